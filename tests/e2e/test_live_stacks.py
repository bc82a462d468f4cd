"""debug_stacks end to end: real programs that deadlock or spin, launched under Strobe through a real MCP client;
the answer names the stuck functions and the program is still running afterwards."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from strobe.testing.stacks import py_spy_path, read_stat
from tests.conftest import StrobeClient, poll

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

TARGETS = Path(__file__).parents[1] / "targets"


async def launch_ready(client: StrobeClient, command: str, project: Path, *args: str) -> tuple[str, int]:
    launched = await client.call("debug_launch", command=command, args=list(args), projectRoot=str(project),
                                 cwd=str(project))

    async def ready() -> bool | None:
        page = await client.call("debug_query", sessionId=launched["sessionId"], eventType="stdout")
        return True if any(e["text"] == "ready\n" for e in page["events"]) else None

    await poll(ready, 30, "the target to be ready")
    return launched["sessionId"], launched["pid"]


async def stacks_until(client: StrobeClient, sid: str, kind: str) -> dict[str, Any]:
    """debug_stacks until it says `kind` (the threads may take a moment to reach the stuck state)."""
    last: dict[str, Any] = {}

    async def check() -> dict[str, Any] | None:
        nonlocal last
        last = await client.call("debug_stacks", sessionId=sid)
        return last if last["diagnosis"]["kind"] == kind else None

    try:
        return await poll(check, 30, f"debug_stacks to say {kind}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; last answer: {last}") from None


async def still_running(client: StrobeClient, sid: str, pid: int) -> None:
    sessions = (await client.call("debug_list_sessions"))["sessions"]
    assert [s["status"] for s in sessions if s["sessionId"] == sid] == ["running"]
    stat = read_stat(pid)
    assert stat is not None and stat.state not in ("T", "t", "Z"), stat  # alive and not left stopped


def frames_of(answer: dict[str, Any], name: str) -> list[str]:
    threads = [t for p in answer["processes"] for t in p["threads"] if t["name"] == name]
    assert len(threads) == 1, answer
    frames: list[str] = threads[0]["frames"]
    return frames


async def test_deadlock_names_both_lock_waiting_functions_and_leaves_the_program_running(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    sid, pid = await launch_ready(strobe, str(c_target("stuck_modes")), project, "deadlock")
    answer = await stacks_until(strobe, sid, "deadlock")
    diagnosis = answer["diagnosis"]
    assert "2 threads waiting for locks in" in diagnosis["summary"]
    assert {"transfer_funds", "audit_ledger"} <= set(diagnosis["summary"].replace(",", " ").replace(".", " ").split())
    about = {t["name"]: t for t in diagnosis["threads"]}
    assert set(about) == {"transfer", "audit"}
    assert about["transfer"]["function"] == "transfer_funds" and about["audit"]["function"] == "audit_ledger"
    assert about["transfer"]["at"].startswith("transfer_funds at ") and "stuck_modes.c:" in about["transfer"]["at"]
    assert all(t["waitsOn"] == "lock" and "lock" in t["blockedIn"] for t in about.values())
    assert diagnosis["suggestedTraces"] == ["transfer_funds", "audit_ledger"]

    [process] = answer["processes"]
    assert process["pid"] == pid and process["command"] == "stuck_modes"
    transfer = frames_of(answer, "transfer")
    assert any("pthread_mutex_lock" in f for f in transfer)
    assert any(f.startswith("transfer_funds at ") and f.endswith(" in stuck_modes") for f in transfer)
    assert any(f.startswith("main at ") for f in frames_of(answer, "stuck_modes"))
    # Frida's threads are set apart, not taken for the program's (they wait in poll: they would read as I/O)
    assert process["strobeThreads"] and len(process["threads"]) == 3
    assert all(t["cpu"] == 0 for t in process["threads"])
    assert any("strobeThreads" in note for note in answer["notes"])
    assert any("debug_stop" in step for step in answer["nextSteps"])

    await still_running(strobe, sid, pid)
    await strobe.call("debug_stop", sessionId=sid)


async def test_busy_loop_names_the_spinning_function(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    sid, pid = await launch_ready(strobe, str(c_target("stuck_modes")), project, "spin")
    answer = await stacks_until(strobe, sid, "busy_loop")
    diagnosis = answer["diagnosis"]
    assert "spin_forever" in diagnosis["summary"] and "Busy loop: thread spinner" in diagnosis["summary"]
    [spinner] = diagnosis["threads"]
    assert spinner["name"] == "spinner" and spinner["function"] == "spin_forever"
    assert any(f.startswith("spin_forever at ") for f in frames_of(answer, "spinner"))
    # the core it ran on (it wanted all of it: on a loaded machine it may have waited for a CPU part of the time)
    cpu = {t["name"]: t["cpu"] for t in answer["processes"][0]["threads"]}
    assert cpu["spinner"] > 0 and cpu["spinner"] == max(cpu.values()) and cpu["stuck_modes"] == 0

    await still_running(strobe, sid, pid)
    await strobe.call("debug_stop", sessionId=sid)


@pytest.mark.skipif(py_spy_path() is None, reason="py-spy is not installed")
async def test_python_deadlock_shows_python_frames(strobe: StrobeClient, project: Path) -> None:
    (project / "stuck_modes.py").write_text((TARGETS / "stuck_modes.py").read_text())
    python = os.path.realpath(sys.executable)
    sid, pid = await launch_ready(strobe, python, project, "stuck_modes.py")
    answer = await stacks_until(strobe, sid, "deadlock")
    about = {t["name"]: t for t in answer["diagnosis"]["threads"]}
    assert about["transfer"]["function"] == "transfer_funds" and about["audit"]["function"] == "audit_ledger"
    assert about["transfer"]["at"].startswith("transfer_funds at ") and "stuck_modes.py:" in about["transfer"]["at"]
    assert answer["processes"][0].get("python") is True
    assert any(f.startswith("transfer_funds at ") and "stuck_modes.py:" in f for f in frames_of(answer, "transfer"))
    assert "notes" not in answer or not any("py-spy" in n for n in answer["notes"])

    await still_running(strobe, sid, pid)
    await strobe.call("debug_stop", sessionId=sid)


async def test_exited_and_unknown_sessions_say_what_to_do(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    launched = await strobe.call("debug_launch", command=str(c_target("hello")), projectRoot=str(project))
    sid = launched["sessionId"]
    await strobe.wait_for_status(sid, "exited")
    exited = await strobe.error("debug_stacks", sessionId=sid)
    assert exited.code == "PROCESS_EXITED"
    assert "has exited" in exited.message and "debug_query" in exited.message

    unknown = await strobe.error("debug_stacks", sessionId="no-such-session")
    assert unknown.code == "SESSION_NOT_FOUND"
    await strobe.call("debug_stop", sessionId=sid)


async def test_a_thread_paused_at_a_breakpoint_reads_as_paused_and_is_left_out(
    strobe: StrobeClient, c_target: Callable[[str], Path], tmp_path: Path
) -> None:
    """breaks.c: w-orders stops at a breakpoint on process_order while w-steady keeps printing. The paused thread is
    listed as paused at that breakpoint, stopped inside the function it broke on, and not judged stuck."""
    from tests.e2e.test_breakpoints import launch, paused

    sid = await launch(strobe, c_target("breaks"), tmp_path)
    [bp] = (await strobe.call("debug_breakpoint", sessionId=sid, add=[{"function": "process_order"}]))["breakpoints"]
    (tmp_path / "go").touch()
    [stopped] = await paused(strobe, sid)
    answer = await strobe.call("debug_stacks", sessionId=sid)
    threads = {t["name"]: t for p in answer["processes"] for t in p["threads"]}
    assert threads["w-orders"]["state"] == f"paused at breakpoint {bp['id']}", threads["w-orders"]
    assert any("process_order" in frame for frame in threads["w-orders"]["frames"]), threads["w-orders"]["frames"]
    assert threads["w-steady"]["state"] != threads["w-orders"]["state"]
    assert stopped["threadId"] not in [t.get("tid") for t in answer["diagnosis"]["threads"]], answer["diagnosis"]
    # w-steady sleeps 5 ms between ticks, so both captures usually find it in usleep and the main thread in
    # pthread_join: identical stacks ("waiting" on their own), yet the output it wrote meanwhile says it is making
    # progress. (When a capture catches it printing, the stacks differ: "running" as well.)
    assert answer["diagnosis"]["kind"] == "running", answer["diagnosis"]
    await strobe.call("debug_stop", sessionId=sid)
