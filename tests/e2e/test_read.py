"""debug_read end to end: live reads of a running C program built now (raw memory here; variables
in test_read_variables.py), the validation table, and reads after the process is gone."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Control, StrobeClient, poll

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def launch_memory(client: StrobeClient, binary: Path, project: Path, control: Control) -> tuple[str, int]:
    """Launch tests/targets/memory.c; returns (session id, runtime address of g_buffer)."""
    sid = (await client.call("debug_launch", command=str(binary), args=[str(control.directory)],
                             projectRoot=str(project)))["sessionId"]

    async def ready() -> int | None:
        page = await client.call("debug_query", sessionId=sid, eventType="stdout")
        texts = [e["text"] for e in page["events"]]
        if "ready\n" not in texts:
            return None
        found = [re.fullmatch(r"buffer (0x[0-9a-f]+)\n", t) for t in texts]
        return next(int(m.group(1), 16) for m in found if m)

    return sid, await poll(ready, 15, "the memory target to be ready")


@pytest.fixture
def memory_target(c_target: Callable[[str], Path]) -> Path:
    return c_target("memory")


async def test_raw_reads_of_each_type_and_bytes_to_a_file(
    strobe: StrobeClient, memory_target: Path, project: Path, control: Control
) -> None:
    sid, buffer = await launch_memory(strobe, memory_target, project, control)
    at = hex(buffer)
    reply = await strobe.call("debug_read", sessionId=sid, targets=[
        {"address": at, "size": 1, "type": "u8"},
        {"address": hex(buffer + 4), "size": 4, "type": "u32"},
        {"address": hex(buffer + 0x80), "size": 1, "type": "i8"},
        {"address": hex(buffer + 8), "size": 8, "type": "u64"},
        {"address": hex(buffer + 2), "size": 2, "type": "i16"},
        {"address": at, "size": 200, "type": "bytes"},
    ])
    results = reply["results"]
    assert [r["target"] for r in results] == [at, hex(buffer + 4), hex(buffer + 0x80), hex(buffer + 8),
                                               hex(buffer + 2), at]
    assert results[0] == {"target": at, "address": at, "type": "u8", "size": 1, "value": 0}
    assert results[1]["value"] == int.from_bytes(bytes([4, 5, 6, 7]), "little")
    assert results[2]["value"] == -128
    assert results[3]["value"] == int.from_bytes(bytes(range(8, 16)), "little")
    assert results[4]["value"] == 0x0302
    dump = results[5]
    assert dump["size"] == 200 and dump["type"] == "bytes"
    assert dump["preview"].startswith("00 01 02 03") and dump["preview"].endswith("1f …")
    assert Path(dump["file"]).read_bytes() == bytes(range(200))
    assert Path(dump["file"]).name.startswith(sid)
    # The dump belongs to the session: deleting the session deletes it.
    await strobe.call("debug_stop", sessionId=sid)
    assert not Path(dump["file"]).exists()


async def test_per_target_errors_leave_the_other_targets_alone(
    strobe: StrobeClient, memory_target: Path, project: Path, control: Control
) -> None:
    sid, buffer = await launch_memory(strobe, memory_target, project, control)
    results = (await strobe.call("debug_read", sessionId=sid, targets=[
        {"address": "0x8", "size": 4, "type": "u32"},
        {"address": hex(buffer + 1), "size": 1, "type": "u8"},
        {"address": hex(buffer), "size": 2, "type": "u32"},
        {"variable": "no_such_variable_anywhere"},
    ]))["results"]
    assert "not readable" in results[0]["error"]
    assert results[1]["value"] == 1
    assert "does not match type u32 (4 bytes)" in results[2]["error"]
    assert results[3]["error"].startswith("Variable 'no_such_variable_anywhere' not found")
    # The process is unharmed: it still runs a round.
    await control.round(strobe, sid)


@pytest.mark.parametrize(
    ("arguments", "needle"),
    [
        ({"targets": []}, "targets"),
        ({"targets": [{"address": "0x10", "size": 1, "type": "u8"}] * 17}, "at most 16"),
        ({"targets": [{"variable": "g"}], "depth": 0}, "depth"),
        ({"targets": [{"variable": "g"}], "depth": 6}, "less than or equal to 5"),
        ({"targets": [{"variable": "g"}], "poll": {"intervalMs": 49, "durationMs": 1000}}, "intervalMs"),
        ({"targets": [{"variable": "g"}], "poll": {"intervalMs": 5001, "durationMs": 30000}}, "5000"),
        ({"targets": [{"variable": "g"}], "poll": {"intervalMs": 100, "durationMs": 99}}, "durationMs"),
        ({"targets": [{"variable": "g"}], "poll": {"intervalMs": 100, "durationMs": 30001}}, "30000"),
        ({"targets": [{"address": "0x10", "size": 0, "type": "bytes"}]}, "size"),
        ({"targets": [{"address": "0x10", "size": 65537, "type": "bytes"}]}, "65536"),
        ({"targets": [{"address": "0x10", "size": 4}]}, "needs size and type"),
        ({"targets": [{"address": "16", "size": 4, "type": "u32"}]}, "hex string"),
        ({"targets": [{"address": "0x10", "size": 4, "type": "u31"}]}, "type"),
        ({"targets": [{"variable": "g", "address": "0x10"}]}, "exactly one of variable or address"),
        ({"targets": [{"variable": "x" * 257}]}, "256"),
    ],
)
async def test_validation_limits(
    strobe: StrobeClient, arguments: dict[str, Any], needle: str
) -> None:
    error = await strobe.error("debug_read", sessionId="any-session", **arguments)
    assert error.code == "VALIDATION_ERROR"
    assert needle in error.message


async def test_reads_after_exit_and_on_unknown_sessions(
    strobe: StrobeClient, memory_target: Path, project: Path, control: Control
) -> None:
    error = await strobe.error("debug_read", sessionId="nope", targets=[{"variable": "g_counter"}])
    assert error.code == "SESSION_NOT_FOUND"
    sid, _ = await launch_memory(strobe, memory_target, project, control)
    (control.directory / "quit").touch()
    await strobe.wait_for_status(sid, "exited")
    error = await strobe.error("debug_read", sessionId=sid, targets=[{"variable": "g_counter"}])
    assert error.code == "PROCESS_EXITED"
    assert "still queryable" in error.message


async def test_poll_interleaves_snapshots_with_function_events_in_time_order(
    strobe: StrobeClient, memory_target: Path, project: Path, control: Control
) -> None:
    sid, _ = await launch_memory(strobe, memory_target, project, control)
    stdout = await strobe.all_events(sid, eventType="stdout")
    ticks = next(e["text"].split()[1] for e in stdout if e["text"].startswith("ticks "))
    assert (await strobe.call("debug_trace", sessionId=sid, add=["tick"]))["hookedFunctions"] == 1
    started = await strobe.call("debug_read", sessionId=sid, targets=[{"address": ticks, "size": 8, "type": "i64"}],
                                poll={"intervalMs": 50, "durationMs": 600})
    assert started["polling"] is True and started["expectedSamples"] == 12 and started["variableCount"] == 1
    assert started["eventType"] == "variable_snapshot" and "variable_snapshot" in started["hint"]

    async def finished() -> list[dict[str, Any]] | None:
        page = await strobe.call("debug_query", sessionId=sid, eventType="variable_snapshot")
        polls = page.get("polls", [])
        return polls if polls and polls[0]["state"] == "complete" else None

    polls = await poll(finished, 15, "the poll to complete")
    assert polls[0]["samples"] == 12 and polls[0]["expectedSamples"] == 12
    timeline = [e for e in await strobe.all_events(sid, verbose=True)
                if e["eventType"] in ("variable_snapshot", "function_enter")]
    snapshots = [i for i, e in enumerate(timeline) if e["eventType"] == "variable_snapshot"]
    assert len(snapshots) == 12
    stamps = [e["timestampNs"] for e in timeline]
    assert stamps == sorted(stamps)
    # g_ticks is incremented right before each tick(g_ticks) call: a snapshot taken between two calls
    # reads a value between their arguments, which only holds if both are placed on one clock.
    checked = 0
    for i in snapshots:
        value = timeline[i]["values"][ticks]
        before = [e["arguments"][0] for e in timeline[:i] if e["eventType"] == "function_enter"]
        after = [e["arguments"][0] for e in timeline[i + 1:] if e["eventType"] == "function_enter"]
        if before and after:
            assert before[-1] <= value <= after[0], (before[-1], value, after[0])
            checked += 1
    assert checked >= 8
    gaps = [b - a for a, b in zip(stamps_of(timeline, snapshots), stamps_of(timeline, snapshots)[1:], strict=False)]
    assert min(gaps) >= 30_000_000  # ~50 ms apart, not a burst


def stamps_of(timeline: list[dict[str, Any]], positions: list[int]) -> list[int]:
    return [timeline[i]["timestampNs"] for i in positions]


async def test_poll_stops_when_the_process_exits_and_says_how_many_samples_it_took(
    strobe: StrobeClient, memory_target: Path, project: Path, control: Control
) -> None:
    sid, buffer = await launch_memory(strobe, memory_target, project, control)
    await strobe.call("debug_read", sessionId=sid, targets=[{"address": hex(buffer), "size": 4, "type": "u32"}],
                      poll={"intervalMs": 50, "durationMs": 30000})

    async def some() -> int | None:
        page = await strobe.call("debug_query", sessionId=sid, eventType="variable_snapshot")
        return page["totalCount"] if page["totalCount"] >= 3 else None

    await poll(some, 15, "a few snapshots")
    (control.directory / "quit").touch()
    await strobe.wait_for_status(sid, "exited")
    page = await strobe.call("debug_query", sessionId=sid, eventType="variable_snapshot", limit=500)
    assert page["polls"][0]["state"] == "process_exited"
    assert page["polls"][0]["samples"] == page["totalCount"] >= 3
    assert all(e["eventType"] == "variable_snapshot" for e in page["events"])
    assert all(set(e["values"]) == {hex(buffer)} for e in page["events"])
    assert page["events"][0]["values"][hex(buffer)] == 0x03020100


async def test_an_unresponsive_agent_times_out_after_5_s_and_the_session_carries_on(
    strobe: StrobeClient, memory_target: Path, project: Path, control: Control
) -> None:
    sid, buffer = await launch_memory(strobe, memory_target, project, control)
    pid = next(s["pid"] for s in (await strobe.call("debug_list_sessions"))["sessions"] if s["sessionId"] == sid)
    os.kill(pid, signal.SIGSTOP)  # every thread stops, the agent's included
    try:
        started = time.monotonic()
        error = await strobe.error("debug_read", sessionId=sid, targets=[{"address": hex(buffer), "size": 1,
                                                                          "type": "u8"}])
        waited = time.monotonic() - started
    finally:
        os.kill(pid, signal.SIGCONT)
    assert error.code == "FRIDA_ATTACH_FAILED" and "timed out (5s)" in error.message
    assert 4.5 <= waited < 30
    again = await strobe.call("debug_read", sessionId=sid, targets=[{"address": hex(buffer + 9), "size": 1,
                                                                     "type": "u8"}])
    assert again["results"][0]["value"] == 9
    await control.round(strobe, sid)
