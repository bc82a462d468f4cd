"""Watches end to end: values read at each traced call of a live C program and attached to its events
(native CModule reads for direct scalars, JavaScript for chains, structs and expressions), scoping
with `on`, limits and errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Control, StrobeClient, poll
from tests.e2e.test_read import launch_memory
from tests.e2e.test_read_variables import launch_ready

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def watched(client: StrobeClient, sid: str, function: str, count: int) -> list[dict[str, Any]]:
    async def enough() -> list[dict[str, Any]] | None:
        events = await client.all_events(sid, verbose=True, function={"equals": function})
        with_values = [e for e in events if e.get("watchValues")]
        return with_values if len(with_values) >= count else None

    return await poll(enough, 20, f"{count} events of {function} with watch values")


async def test_native_and_js_watches_on_every_traced_call(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, c_target("memory"), project, control)
    reply = await strobe.call("debug_trace", sessionId=sid, add=["tick"], watches={"add": [
        {"variable": "g_ticks"},
        {"variable": "g_counter", "label": "counter"},
        {"variable": "g_config_ptr->next->name"},
        {"variable": "g_config.inner.pos"},
        {"expr": "1 + 2", "label": "three"},
    ]})
    assert [w["label"] for w in reply["activeWatches"]] == [
        "g_ticks", "counter", "g_config_ptr->next->name", "g_config.inner.pos", "three"]
    assert reply["activeWatches"][0]["type"] == "long int"
    events = await watched(strobe, sid, "tick", 6)
    for event in events:
        values = event["watchValues"]
        assert values == values | {"counter": 42, "g_config_ptr->next->name": "second",
                                   "g_config.inner.pos": {"x": 10, "y": 20}, "three": 3}, event
        if event["eventType"] == "function_enter":
            assert values["g_ticks"] == event["arguments"][0]  # g_ticks is incremented right before tick(g_ticks)


async def test_on_scopes_a_watch_and_remove_stops_it(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, c_target("memory"), project, control)
    await strobe.call("debug_trace", sessionId=sid, add=["tick"], watches={"add": [
        {"variable": "g_counter", "on": ["nothing::here"]},
        {"variable": "g_tempo", "on": ["tick"]},
    ]})
    events = await watched(strobe, sid, "tick", 4)
    assert all(set(e["watchValues"]) == {"g_tempo"} and e["watchValues"]["g_tempo"] == 120.5 for e in events)
    removed = await strobe.call("debug_trace", sessionId=sid, watches={"remove": ["g_tempo", "ghost"]})
    assert [w["label"] for w in removed["activeWatches"]] == ["g_counter"]
    assert "Watch 'ghost' was not active; nothing to remove." in removed["warnings"]


async def test_watch_errors_and_limits(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, c_target("memory"), project, control)
    error = await strobe.error("debug_trace", sessionId=sid, watches={"add": [{"variable": "no_such_thing"}]})
    assert error.code == "WATCH_FAILED" and "not found" in error.message
    error = await strobe.error("debug_trace", watches={"add": [{"variable": "g_counter"}]})
    assert error.code == "VALIDATION_ERROR" and "running process" in error.message
    many = [{"expr": str(i)} for i in range(33)]
    error = await strobe.error("debug_trace", sessionId=sid, watches={"add": many})
    assert error.code == "VALIDATION_ERROR" and "32" in error.message
    error = await strobe.error("debug_trace", sessionId=sid, watches={"add": [{"variable": "g_counter->x->y"}]})
    assert error.code == "WATCH_FAILED" and "not a pointer" in error.message
    # Nothing was half-applied: no watch is active.
    assert (await strobe.call("debug_trace", sessionId=sid))["activeWatches"] == []


async def test_a_raw_address_watch_is_read_with_its_type(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid, buffer = await launch_memory(strobe, c_target("memory"), project, control)
    reply = await strobe.call("debug_trace", sessionId=sid, add=["tick"], watches={"add": [
        {"address": hex(buffer + 4), "type": "u32", "label": "bytes 4-7"},
    ]})
    assert reply["activeWatches"] == [{"label": "bytes 4-7", "address": hex(buffer + 4), "type": "u32", "size": 4}]
    events = await watched(strobe, sid, "tick", 2)
    assert all(e["watchValues"] == {"bytes 4-7": 0x07060504} for e in events)
