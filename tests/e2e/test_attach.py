"""debug_launch {pid}: attaching to a C program this test started itself (tests/targets/attachee.c), tracing it
with a watch, seeing its output from the attach on, reading its globals, catching its crash and exit; debug_stop
detaches and leaves it running unharmed (no Strobe code left in it, attachable again); a daemon killed with -9
leaves it running.

Every test starts the program with subprocess.Popen (its stdout and stderr to files the test reads), waits by
polling with a deadline, and kills it in `finally`."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Control, StrobeClient, connect, poll

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


class Program:
    """The attachee, started outside Strobe; its own stdout and stderr go to files."""

    def __init__(self, binary: Path, control: Control, directory: Path) -> None:
        self.stdout_path, self.stderr_path = directory / "own-stdout", directory / "own-stderr"
        with open(self.stdout_path, "wb") as out, open(self.stderr_path, "wb") as err:
            self.process = subprocess.Popen([str(binary), str(control.directory)], stdout=out, stderr=err,
                                            stdin=subprocess.DEVNULL)
        self.pid = self.process.pid

    def stdout(self) -> str:
        return self.stdout_path.read_text()

    async def printed(self, text: str, timeout: float = 15) -> None:
        async def there() -> bool | None:
            return True if text in self.stdout() else None

        await poll(there, timeout, f"the program's own stdout to show {text!r}")

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait(10)


@pytest.fixture
def program(c_target: Callable[[str], Path], control: Control, tmp_path: Path) -> Iterator[Program]:
    started = Program(c_target("attachee"), control, tmp_path)
    try:
        yield started
    finally:
        started.kill()


def agent_mapped(pid: int) -> bool:
    return "frida" in Path(f"/proc/{pid}/maps").read_text()


async def attach(client: StrobeClient, program: Program, project: Path) -> dict[str, Any]:
    await program.printed("ready\n")
    return await client.call("debug_launch", pid=program.pid, projectRoot=str(project))


async def test_attach_trace_output_read_then_detach_leaves_it_running(
    strobe: StrobeClient, program: Program, project: Path, control: Control, c_target: Callable[[str], Path]
) -> None:
    assert not agent_mapped(program.pid)
    launched = await attach(strobe, program, project)
    sid = launched["sessionId"]
    binary = str(c_target("attachee"))
    assert launched["attached"] is True and launched["pid"] == program.pid
    assert launched["command"] == [binary, str(control.directory)]
    assert "before the attach is not available" in launched["nextSteps"]
    listed = next(s for s in (await strobe.call("debug_list_sessions"))["sessions"] if s["sessionId"] == sid)
    assert listed["attached"] is True and listed["status"] == "running" and listed["binaryPath"] == binary

    traced = await strobe.call("debug_trace", sessionId=sid, add=["compute"],
                               watches={"add": [{"variable": "total"}]})
    assert traced["hookedFunctions"] == 1 and [w["label"] for w in traced["activeWatches"]] == ["total"]
    await control.round(strobe, sid)  # waits for "round 1 done" in the session's stdout events

    enters = await strobe.all_events(sid, eventType="function_enter", verbose=True)
    assert [e["arguments"] for e in enters if e["function"] == "compute"] == [[1, 0], [1, 1], [1, 2]]
    # total before each call: 0, then 10, then 10 + 11 (the watch is read as the call starts)
    assert [e["watchValues"]["total"] for e in enters if e["function"] == "compute"] == [0, 10, 21]
    exits = await strobe.all_events(sid, eventType="function_exit", verbose=True)
    assert [e["returnValue"] for e in exits if e["function"] == "compute"] == [10, 11, 12]

    async def stdout_lines() -> list[str] | None:
        lines = [e["text"] for e in await strobe.all_events(sid, eventType="stdout")]
        return lines if "via writev: total 33\n" in lines else None

    lines = await poll(stdout_lines, 15, "the writev line in the session's stdout")
    assert lines == ["round 1 done\n", "via writev: total 33\n"]  # "ready" came before the attach
    stderr = await poll(lambda: _texts(strobe, sid, "stderr"), 15, "the session's stderr")
    assert stderr == ["round 1 err\n"]
    assert program.stdout() == "ready\nround 1 done\nvia writev: total 33\n"  # its own stdout still gets it all

    read = (await strobe.call("debug_read", sessionId=sid, targets=[{"variable": "rounds_done"},
                                                                     {"variable": "total"}]))["results"]
    assert [r["value"] for r in read] == [1, 33]

    stopped = await strobe.call("debug_stop", sessionId=sid, retain=True)
    assert stopped["detached"] is True and stopped["success"] is True
    assert program.alive()
    listed = next(s for s in (await strobe.call("debug_list_sessions"))["sessions"] if s["sessionId"] == sid)
    assert listed["status"] == "stopped" and listed["attached"] is True

    async def unloaded() -> bool | None:
        return True if not agent_mapped(program.pid) else None

    await poll(unloaded, 15, "Strobe's agent to leave the process")
    (control.directory / "round-2").touch()  # it goes on, unhooked, with correct results
    await program.printed("via writev: total 96\n")
    assert program.alive()
    assert program.stdout().endswith("round 2 done\nvia writev: total 96\n")

    again = await strobe.call("debug_launch", pid=program.pid, projectRoot=str(project))  # attachable again
    assert again["attached"] is True and again["sessionId"] != sid
    killed = await strobe.call("debug_stop", sessionId=again["sessionId"], kill=True)
    assert "detached" not in killed
    assert program.process.wait(15) == -signal.SIGKILL


async def _texts(client: StrobeClient, sid: str, kind: str) -> list[str] | None:
    texts = [e["text"] for e in await client.all_events(sid, eventType=kind)]
    return texts or None


async def test_a_crash_after_attach_is_a_crash_event(
    strobe: StrobeClient, program: Program, project: Path, control: Control
) -> None:
    sid = (await attach(strobe, program, project))["sessionId"]
    (control.directory / "crash").touch()
    ended = await strobe.wait_for_status(sid, "crashed", timeout=30)
    assert ended["signal"] == "SIGSEGV" and ended["attached"] is True
    [crash] = await strobe.all_events(sid, eventType="crash")
    assert crash["signal"] == "SIGSEGV"
    assert any(frame.get("function") == "explode" for frame in crash["backtrace"])
    assert program.process.wait(15) == -signal.SIGSEGV


async def test_its_exit_while_attached_ends_the_session_with_its_code(
    strobe: StrobeClient, program: Program, project: Path, control: Control
) -> None:
    sid = (await attach(strobe, program, project))["sessionId"]
    (control.directory / "quit").touch()
    ended = await strobe.wait_for_status(sid, "exited", timeout=30)
    assert ended["exitCode"] == 3
    assert program.process.wait(15) == 3


async def test_a_thread_paused_at_a_breakpoint_goes_on_after_detach(
    strobe: StrobeClient, program: Program, project: Path, control: Control
) -> None:
    sid = (await attach(strobe, program, project))["sessionId"]
    await strobe.call("debug_breakpoint", sessionId=sid, add=[{"function": "compute"}])
    (control.directory / "round-1").touch()

    async def paused() -> list[Any] | None:
        listed = next(s for s in (await strobe.call("debug_list_sessions"))["sessions"] if s["sessionId"] == sid)
        return listed.get("paused") or None

    await poll(paused, 30, "the thread to stop at compute")
    assert "round 1 done" not in program.stdout()
    assert (await strobe.call("debug_stop", sessionId=sid))["detached"] is True
    await program.printed("round 1 done\nvia writev: total 33\n")  # released, and no breakpoint left to stop it
    (control.directory / "round-2").touch()
    await program.printed("via writev: total 96\n")
    assert program.alive()


async def test_a_daemon_killed_with_minus_9_leaves_an_attached_process_running(
    strobe_home: Path, program: Program, project: Path, control: Control
) -> None:
    async with connect(strobe_home) as client:
        sid = (await attach(client, program, project))["sessionId"]
        await client.call("debug_trace", sessionId=sid, add=["compute"])
        await control.round(client, sid)
    daemon = int((strobe_home / "strobe.pid").read_text())
    os.kill(daemon, signal.SIGKILL)

    async def daemon_gone() -> bool | None:
        return True if not Path(f"/proc/{daemon}").exists() else None

    await poll(daemon_gone, 15, "the daemon to be gone")
    (control.directory / "round-2").touch()
    await program.printed("via writev: total 96\n")
    assert program.alive()


async def test_attach_errors(strobe: StrobeClient, strobe_home: Path, program: Program, project: Path,
                             c_target: Callable[[str], Path]) -> None:
    root = str(project)
    both = await strobe.error("debug_launch", pid=program.pid, command=str(c_target("attachee")), projectRoot=root)
    assert both.code == "VALIDATION_ERROR" and "exactly one of command" in both.message and "not both" in both.message
    neither = await strobe.error("debug_launch", projectRoot=root)
    assert neither.code == "VALIDATION_ERROR" and "exactly one of command" in neither.message
    with_args = await strobe.error("debug_launch", pid=program.pid, args=["x"], projectRoot=root)
    assert with_args.code == "VALIDATION_ERROR" and "args only apply when starting" in with_args.message

    missing = await strobe.error("debug_launch", pid=2**31 - 2, projectRoot=root)
    assert missing.code == "VALIDATION_ERROR" and f"No process with pid {2**31 - 2} is running" in missing.message
    daemon = int((strobe_home / "strobe.pid").read_text())
    itself = await strobe.error("debug_launch", pid=daemon, projectRoot=root)
    assert itself.code == "VALIDATION_ERROR" and "Strobe's own daemon" in itself.message

    sid = (await attach(strobe, program, project))["sessionId"]
    twice = await strobe.error("debug_launch", pid=program.pid, projectRoot=root)
    assert twice.code == "SESSION_EXISTS" and sid in twice.message and "debug_stop" in twice.message
    assert (await strobe.call("debug_stop", sessionId=sid))["detached"] is True
    assert program.alive()
