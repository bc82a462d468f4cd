"""Go programs over MCP (tests/targets/go_values: 16 goroutines a round, garbage collections, deep recursion).

Go code is never hooked (daemon/go_abi.py says why): `main.*` traced must leave the program running to its real
end, every run, with one warning naming the Go functions, while the C of cgo next to them is still traced.
Exit codes are the kernel's (Go exits by its own exit_group system call, not libc's exit: daemon/exits.py). A
statically linked build is refused before anything is spawned, with what to do. Go globals are read by package path.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import StrobeClient, poll

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

@pytest.fixture(scope="session")
def go_values(go_target: Callable[..., Path]) -> Callable[[bool], Path]:
    """tests/targets/go_values, dynamically linked or static."""
    return lambda static: go_target("go_values", static)


async def run_to_end(strobe: StrobeClient, binary: Path, project: Path, *args: str,
                     patterns: list[str] | None = None) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """Launch (patterns staged first), wait for the end: (launch answer, session, output events)."""
    if patterns:
        await strobe.call("debug_trace", add=patterns, projectRoot=str(project))
    launched = await strobe.call("debug_launch", command=str(binary), args=list(args), projectRoot=str(project))
    sid = launched["sessionId"]
    session = await strobe.wait_for_status(sid, "exited", timeout=120)
    output = await strobe.all_events(sid, eventType="stdout") + await strobe.all_events(sid, eventType="stderr")
    return launched, session, output


async def test_goroutines_traced_run_to_their_real_end(
        strobe: StrobeClient, go_values: Callable[[bool], Path], project: Path) -> None:
    """Before: 'unexpected return pc ... fatal error: unknown caller pc' in 1 run of 3 (exit hooks), 'traceback did
    not unwind completely' in 4 of 4 (entry-only hooks on main.depth). Now: the Go functions are not hooked, said once
    with why; cgo's C thread starter is traced; the program ends as it would alone, exit code included."""
    binary = go_values(False)
    for _ in range(4):
        launched, session, output = await run_to_end(strobe, binary, project, "-exit", "3", "4",
                                                     patterns=["main.*", "x_cgo_thread_start"])
        text = "".join(e["text"] for e in output)
        assert "fatal error" not in text and "unexpected return pc" not in text, text[-2000:]
        assert re.search(r"^total \d+ go values 45$", text, re.M), text[-2000:]
        assert session["exitCode"] == 3, session
        go = [w for w in launched["warnings"] if w.startswith("Not hooked, Go code (")]
        assert len(go) == 1 and "main.depth" in go[0] and "goroutine" in go[0], launched["warnings"]
        assert "no argument or return value is shown" in go[0]
        assert launched["hookedFunctions"] == 1  # x_cgo_thread_start: C, on the thread's own stack
    _, panicked, output = await run_to_end(strobe, binary, project, "-panic", "1", patterns=["main.*"])
    assert panicked["exitCode"] == 2, panicked  # Go's exit code for an unrecovered panic
    assert any("panic: asked to panic" in e["text"] for e in output)


async def test_static_build_is_refused_with_what_to_do(
        strobe: StrobeClient, go_values: Callable[[bool], Path], project: Path) -> None:
    binary = go_values(True)
    error = await strobe.error("debug_launch", command=str(binary), args=["1"], projectRoot=str(project))
    assert error.code == "FRIDA_ATTACH_FAILED"
    assert "statically linked" in error.message and "-linkmode=external" in error.message, error.message
    assert "signal 11" in error.message  # what Frida would have said, explained


async def test_globals_by_package_path(
        strobe: StrobeClient, go_values: Callable[[bool], Path], project: Path, tmp_path: Path) -> None:
    """`main.counter` (41, +1 a round), a string's header, a step after a package path with slashes, and a name that
    is not there, said as Go's. The C of cgo traced meanwhile: every new thread's start is recorded (the program
    waits: a Go program's own exit_group is not seen by the agent, whose last records would be lost with it)."""
    await strobe.call("debug_trace", add=["main.*", "x_cgo_thread_start"], projectRoot=str(project))
    launched = await strobe.call("debug_launch", command=str(go_values(False)), args=["-wait", str(tmp_path), "2"],
                                 projectRoot=str(project))
    sid = launched["sessionId"]

    async def ready() -> list[dict[str, Any]] | None:
        events = await strobe.all_events(sid, eventType="stdout")
        return events if any(e["text"] == "ready\n" for e in events) else None

    printed = "".join(e["text"] for e in await poll(ready, 60, "go_values to be ready"))
    total = re.search(r"^total \d+ (go values) (\d+)$", printed, re.M)
    assert total, printed
    targets = ["main.counter", "main.label", "main.label.len", "runtime.buildVersion.len",
               "internal/runtime/cgroup.errEOF", "main.nope"]
    results = {r["target"]: r for r in (await strobe.call(
        "debug_read", sessionId=sid, targets=[{"variable": t} for t in targets]))["results"]}
    assert results["main.counter"]["value"] == int(total.group(2)) == 43
    assert results["main.label"]["fields"]["len"]["value"] == len(total.group(1))
    assert results["main.label.len"]["value"] == len("go values")
    go_version = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=True,
                                env={**os.environ, "GOTOOLCHAIN": "local"}).stdout.strip()
    assert results["runtime.buildVersion.len"]["value"] == len(go_version)
    assert results["internal/runtime/cgroup.errEOF"]["type"] == "error"
    assert "No Go global matches 'main.nope'" in results["main.nope"]["error"]
    assert "main.counter" in results["main.nope"]["error"]

    async def thread_starts() -> list[dict[str, Any]] | None:
        calls = await strobe.all_events(sid, eventType="function_enter")
        return calls or None

    calls = await poll(thread_starts, 30, "the recorded starts of Go's threads")
    assert {e["function"] for e in calls} == {"x_cgo_thread_start"}
    (tmp_path / "quit").touch()
    ended = await strobe.wait_for_status(sid, "exited", timeout=30)
    assert ended["exitCode"] == 0
