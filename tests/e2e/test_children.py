"""Fork/exec following: children (fork, posix_spawn) and new images (exec) are attached, given the session's
patterns, and resumed; every event carries its pid; each process's end is recorded; a crash in a child is
captured while its parent carries on."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Control, StrobeClient
from tests.e2e.test_trace import launch_ready

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def run_family(
    strobe: StrobeClient, binary: Path, project: Path, control: Control, *args: str, trace: tuple[str, ...]
) -> tuple[str, int, dict[str, Any]]:
    """Launch `family ARGS…`, hook `trace` before it starts its children, let it run to the end."""
    sid = await launch_ready(strobe, binary, project, args[0], str(control.directory), *args[1:])
    launched = next(s for s in (await strobe.call("debug_list_sessions"))["sessions"] if s["sessionId"] == sid)
    await strobe.call("debug_trace", sessionId=sid, add=list(trace))
    (control.directory / "go").touch()
    listed = await strobe.wait_for_status(sid, "exited", timeout=30)
    return sid, int(launched["pid"]), listed


def stdout_text(events: list[dict[str, Any]]) -> str:
    return "".join(e["text"] for e in events)


async def test_crash_in_a_forked_child_while_the_parent_carries_on(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid, parent, listed = await run_family(strobe, c_target("family"), project, control, "fork-crash",
                                           trace=("parent_work", "child_work", "child_crash"))
    assert listed["exitCode"] == 0  # the launched process ended normally…
    processes = {p["pid"]: p for p in listed["processes"]}
    assert len(processes) == 2 and processes[parent]["status"] == "exited"
    (child,) = set(processes) - {parent}
    assert processes[child] | {} == processes[child] and processes[child]["parentPid"] == parent
    assert processes[child]["status"] == "crashed" and processes[child]["signal"] == "SIGSEGV"  # …its child did not

    crashes = await strobe.all_events(sid, eventType="crash")
    assert len(crashes) == 1
    crash = crashes[0]
    assert crash["pid"] == child and crash["function"] == "child_crash" and crash["signal"] == "SIGSEGV"
    assert [e["function"] for e in crash["lastEvents"] if e["eventType"] == "function_enter"][-2:] == [
        "child_crash", "child_work"]

    enters = await strobe.all_events(sid, eventType="function_enter", verbose=True)
    by_pid = {(e["function"], e["pid"]) for e in enters}
    # The parent's calls before and after the fork are its own; the child's calls are recorded once, as its.
    assert [e["pid"] for e in enters if e["function"] == "parent_work"] == [parent, parent]
    assert [e["pid"] for e in enters if e["function"] == "child_work"] == [child]
    assert ("child_crash", child) in by_pid and ("child_crash", parent) not in by_pid

    page = await strobe.call("debug_query", sessionId=sid, pid=child, eventType="function_enter")
    assert page["pids"] == sorted([parent, child]) and {e["function"] for e in page["events"]} == {
        "child_work", "child_crash"}
    out = stdout_text(await strobe.all_events(sid, eventType="stdout"))
    assert "child ended by signal 11" in out and "parent carries on" in out


@pytest.mark.parametrize("how", ["absolute", "relative"])
async def test_fork_exec_chain_three_levels_deep(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control, how: str
) -> None:
    """Each child exec()s the program by its absolute path, or by `./family` from its directory: Frida reports the
    path as the program gave it, and the new image's functions are found either way."""
    binary = c_target("family")
    extra = ("relative",) if how == "relative" else ()
    sid, root, listed = await run_family(strobe, binary, project, control, "chain", "1", *extra, trace=("level_*",))
    processes = {p["pid"]: p for p in listed["processes"]}
    assert len(processes) == 3 and all(p["status"] == "exited" and p["exitCode"] == 0 for p in processes.values())
    second = next(pid for pid, p in processes.items() if p.get("parentPid") == root)
    third = next(pid for pid, p in processes.items() if p.get("parentPid") == second)
    assert all(p["binaryPath"] == str(binary) for p in processes.values()), processes

    enters = await strobe.all_events(sid, eventType="function_enter", verbose=True)
    # Each level's function, hooked in the image each process exec()ed into, recorded with that process's pid.
    assert sorted((e["function"], e["pid"]) for e in enters) == sorted(
        [("level_one", root), ("level_two", second), ("level_three", third)])
    out = stdout_text(await strobe.all_events(sid, eventType="stdout"))
    for level, pid in ((1, root), (2, second), (3, third)):
        assert f"level {level} in pid {pid}\n" in out


async def test_a_spawned_program_without_debug_info_is_followed_for_output_and_crashes(
    strobe: StrobeClient, c_target: Callable[[str], Path], build_dir: Path, project: Path, control: Control
) -> None:
    nodebug = build_dir / "nodebug"
    if not nodebug.exists():
        source = Path(__file__).parents[1] / "targets" / "nodebug.c"
        subprocess.run(["gcc", "-O0", "-s", "-o", str(nodebug), str(source)], check=True)
    sid, parent, listed = await run_family(strobe, c_target("family"), project, control, "spawn", str(nodebug),
                                           trace=("parent_work",))
    processes = {p["pid"]: p for p in listed["processes"]}
    (child,) = set(processes) - {parent}
    assert processes[child]["binaryPath"] == str(nodebug) and processes[child]["parentPid"] == parent
    assert processes[child]["status"] == "crashed" and processes[child]["signal"] == "SIGSEGV"
    crashes = await strobe.all_events(sid, eventType="crash")
    assert len(crashes) == 1 and crashes[0]["pid"] == child and crashes[0]["signal"] == "SIGSEGV"
    out = stdout_text(await strobe.all_events(sid, eventType="stdout"))
    assert "nodebug says hello" in out and "spawned ended by signal 11" in out
