"""Arguments and return values of traced calls shown through their DWARF types (worked out in the
background once a function is hooked), on programs built now."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Control, StrobeClient, poll
from tests.e2e.test_read_variables import launch_ready

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def typed(client: StrobeClient, sid: str, function: str, event_type: str) -> list[dict[str, Any]] | None:
    events = await client.all_events(sid, verbose=True, eventType=event_type, function={"equals": function})
    ready = [e for e in events if "argumentNames" in e]
    return ready or None


async def test_c_arguments_and_returns_by_type(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, c_target("memory"), project, control)
    assert (await strobe.call("debug_trace", sessionId=sid, add=["tick"]))["hookedFunctions"] == 1

    async def enters() -> list[dict[str, Any]] | None:
        return await typed(strobe, sid, "tick", "function_enter")

    event = (await poll(enters, 15, "typed arguments of tick"))[-1]
    assert event["argumentNames"] == ["n"] and event["argumentTypes"] == ["long int"]
    assert isinstance(event["arguments"][0], int) and event["arguments"][0] > 0

    # tick(n) returns n * 2 + 7; the ticker thread calls it one call at a time.
    async def pairs_of_calls() -> list[tuple[dict[str, Any], dict[str, Any]]] | None:
        calls = await strobe.all_events(sid, verbose=True, function={"equals": "tick"})
        pairs = [(a, b) for a, b in pairwise(calls)
                 if a["eventType"] == "function_enter" and b["eventType"] == "function_exit"]
        return pairs if len(pairs) >= 3 else None

    pairs = await poll(pairs_of_calls, 15, "three calls of tick")
    for enter, leave in pairs:
        assert leave["returnType"] == "long int"
        assert leave["returnValue"] == enter["arguments"][0] * 2 + 7


async def test_cpp_bool_return_is_a_boolean(
    strobe: StrobeClient, cpp_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, cpp_target("shapes"), project, control)
    await strobe.call("debug_trace", sessionId=sid, add=["form::validate"])
    await control.round(strobe, sid)

    async def exits() -> list[dict[str, Any]] | None:
        found = await strobe.all_events(sid, verbose=True, eventType="function_exit",
                                        function={"equals": "form::validate"})
        return found if found and all(e.get("returnType") == "bool" for e in found) else None

    found = await poll(exits, 15, "form::validate exits typed as bool")
    assert sorted(e["returnValue"] for e in found) == [False, True]  # validate(3) and validate(12)
