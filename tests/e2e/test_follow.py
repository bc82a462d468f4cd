"""Pointer arguments and return values followed at call time through their DWARF types (serializationDepth):
structs behind pointers, C strings, linked lists to the depth, cycles, unreadable pointers."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Control, StrobeClient, poll
from tests.e2e.test_read_variables import launch_ready

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

ADDRESS = re.compile(r"^0x[0-9a-f]+$")
FUNCTIONS = ["walk", "find", "spin", "peek", "nest", "label"]


async def last_call(client: StrobeClient, sid: str, function: str, event_type: str) -> dict[str, Any]:
    events = await client.all_events(sid, verbose=True, eventType=event_type, function={"equals": function})
    assert events, f"no {event_type} of {function}"
    return events[-1]


async def rounds_until_followed(client: StrobeClient, sid: str, control: Control) -> None:
    """Run rounds until a call of walk is recorded with its list followed (plans land in the background)."""

    async def followed() -> bool | None:
        await control.round(client, sid)
        event = await last_call(client, sid, "walk", "function_enter")
        return True if isinstance(event["arguments"][0], dict) else None

    await poll(followed, 30, "walk's list to be followed")


async def test_pointers_followed_to_the_depth(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, c_target("follow"), project, control)
    assert (await strobe.call("debug_trace", sessionId=sid, add=FUNCTIONS))["hookedFunctions"] == len(FUNCTIONS)
    await rounds_until_followed(strobe, sid, control)

    walk = await last_call(strobe, sid, "walk", "function_enter")
    assert walk["argumentNames"] == ["head", "what"]
    head, what = walk["arguments"]
    assert what == "list"
    # Three struct levels (the default depth): a, b, c; c's next stays an address.
    assert head["value"] == 1 and head["name"] == "alpha"
    assert head["next"]["value"] == 2 and head["next"]["name"] == "beta"
    third = head["next"]["next"]
    assert third["value"] == 3 and third["name"] == "gamma" and ADDRESS.match(third["next"])

    found = await last_call(strobe, sid, "find", "function_exit")
    assert found["returnValue"] == {"value": 3, "name": "gamma", "next": {"value": 4, "name": "delta", "next": None}}

    ring = (await last_call(strobe, sid, "spin", "function_enter"))["arguments"][0]
    assert ring["value"] == 10 and ring["next"]["value"] == 20
    assert ring["next"]["next"] == "<circular ref to ring>"

    maybe, deref = (await last_call(strobe, sid, "peek", "function_enter"))["arguments"]
    assert maybe.startswith("<unreadable") and "0x10" in maybe and deref == 0

    outer = (await last_call(strobe, sid, "nest", "function_enter"))["arguments"][0]
    assert outer == {"mid": {"inner": {"x": 7}, "y": 8}, "tag": "deep"}
    assert (await last_call(strobe, sid, "label", "function_enter"))["arguments"] == ["plain text"]

    # The target still runs normally: every round completes and walk's sum is right.
    assert (await last_call(strobe, sid, "walk", "function_exit"))["returnValue"] == 10


async def test_serialization_depth_changes_what_is_followed(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, c_target("follow"), project, control)
    await strobe.call("debug_trace", sessionId=sid, add=["walk", "nest"])
    await rounds_until_followed(strobe, sid, control)
    await strobe.call("debug_trace", sessionId=sid, serializationDepth=1)
    await control.round(strobe, sid)

    head = (await last_call(strobe, sid, "walk", "function_enter"))["arguments"][0]
    assert head["value"] == 1 and ADDRESS.match(head["next"])  # one level: the next node is not followed
    outer = (await last_call(strobe, sid, "nest", "function_enter"))["arguments"][0]
    assert outer["tag"] == "deep" and re.match(r"^<.*mid>$", outer["mid"])  # a struct beyond the depth

    await strobe.call("debug_trace", sessionId=sid, serializationDepth=5)
    await control.round(strobe, sid)
    head = (await last_call(strobe, sid, "walk", "function_enter"))["arguments"][0]
    assert head["next"]["next"]["next"] == {"value": 4, "name": "delta", "next": None}


async def test_following_is_limited_per_function_and_second(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, c_target("follow"), project, control)
    await strobe.call("debug_trace", sessionId=sid, add=["burst"])

    def followed(events: list[dict[str, Any]]) -> int:
        return sum(isinstance(e["arguments"][0], dict) for e in events)

    async def a_round_with_followed_calls() -> list[dict[str, Any]] | None:
        await control.round(strobe, sid)  # 3000 calls of burst, in far less than a second
        enters = await strobe.all_events(sid, verbose=True, eventType="function_enter", function={"equals": "burst"})
        last_round = enters[-3000:]
        return last_round if followed(last_round) else None

    last_round = await poll(a_round_with_followed_calls, 30, "a round with followed calls of burst")
    assert len(last_round) == 3000
    assert all(isinstance(e["arguments"][0], dict) or ADDRESS.match(e["arguments"][0]) for e in last_round)
    # At most 1000 followed calls of a function per second: 2000 if the round straddles two seconds.
    assert 0 < followed(last_round) <= 2000
    assert next(e for e in last_round if isinstance(e["arguments"][0], dict))["arguments"][0]["name"] == "alpha"
    # A call past the limit says why its pointer shows an address; a followed one has nothing to explain.
    for event in last_round:
        assert ("notFollowed" in event) != isinstance(event["arguments"][0], dict)
    assert "1,000 calls" in next(e["notFollowed"] for e in last_round if "notFollowed" in e)
