"""The lifeline (instrument/launcher.py, agent/src/common/forks.ts) on real processes, with a small host process in
the daemon's place (a Launcher that spawns a program): killed with -9, the host takes its program and every process
of the program's group with it, a child it never followed too; a process it released, or a child left behind by a
group leader that exited, outlives it. And the two requests fit the agent's interfaces.

A survivor is checked once the host has been reaped: by then the kernel has already sent whatever the closing of the
host's pipe sends, so a process still running with no SIGKILL pending was spared, not merely not yet reached."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from tests.instrument.contract import value_errors
from tests.instrument.test_protocol_contract import QuietObserver, agent

from strobe.instrument import protocol
from strobe.instrument.agent_build import agent_source_dir, compile_agent
from strobe.instrument.handle import ProcessHandle

FORKING_C = r"""
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* lifeline_forking PIDFILE [exit]: forks a child that writes its pid to PIDFILE and waits forever; the parent
   waits forever too, or with "exit" exits once the child has written it. */
int main(int argc, char **argv) {
    int ready[2];
    if (argc < 2 || pipe(ready) != 0)
        return 1;
    if (fork() == 0) {
        FILE *out = fopen(argv[1], "w");
        fprintf(out, "%d\n", (int)getpid());
        fclose(out);
        write(ready[1], "x", 1);
        for (;;) pause();
    }
    char byte;
    read(ready[0], &byte, 1);
    if (argc > 2 && strcmp(argv[2], "exit") == 0)
        return 0;
    for (;;) pause();
}
"""

HOST = r"""
import sys, threading
from strobe.instrument.launcher import Launcher

mode, agent_path, *argv = sys.argv[1:]
launcher = Launcher()

class Observer:
    def on_child(self, handle, origin, parent, path):
        launcher.resume(handle.pid)
    def __getattr__(self, name):
        return lambda *args: None

handle = launcher.spawn(argv, "/", {}, open(agent_path).read(), Observer())
print("tied", handle.lifeline.scope, flush=True)
if mode == "untraced-children":
    launcher.forget(handle.pid)  # its children belong to no session: resumed untraced, tied by nothing of their own
launcher.resume(handle.pid)
if mode == "release":
    handle.release()
    print("released", handle.lifeline.scope, flush=True)
print("root", handle.pid, flush=True)
threading.Event().wait()
"""


@pytest.fixture(scope="module")
def agent_js(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = agent_source_dir()
    assert source is not None
    path = tmp_path_factory.mktemp("agent") / "agent.js"
    path.write_text(compile_agent(source))
    return path


@pytest.fixture(scope="module")
def forking(build_dir: Path) -> Path:
    out = build_dir / "lifeline_forking"
    if not out.exists():
        (build_dir / "lifeline_forking.c").write_text(FORKING_C)
        subprocess.run(["gcc", "-g", "-O0", "-o", str(out), str(build_dir / "lifeline_forking.c")], check=True)
    return out


class Host:
    """The stand-in daemon, and what it prints (its program's output too), line by line."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def expect(self, prefix: str, timeout: float = 30) -> list[str]:
        """The words of the next line starting with `prefix` (lines before it are skipped)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"the host said no '{prefix}' line within {timeout}s") from None
            if line.startswith(prefix):
                return line.split()

    def kill(self) -> None:
        """kill -9, and reap it: its pipes are closed, and what that sets off has been sent."""
        self.process.kill()
        self.process.wait(30)


@contextlib.contextmanager
def host(mode: str, agent_js: Path, *argv: str) -> Iterator[tuple[Host, list[int]]]:
    """A host running `argv` in `mode`; yields it and a list the test adds its program's pids to: at the end each is
    killed, with its process group (the launched program's holds its children, found or not)."""
    home = Path(os.environ["STROBE_HOME"])  # the suite's private home (tests/conftest.py): never the real one
    process = subprocess.Popen([sys.executable, "-c", HOST, mode, str(agent_js), *argv], stdout=subprocess.PIPE,
                               text=True, env={**os.environ, "STROBE_HOME": str(home)})
    pids: list[int] = []
    try:
        yield Host(process), pids
    finally:
        process.kill()
        process.wait(30)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


def child_pid(pidfile: Path) -> int:
    """The pid the program's child wrote, once it has."""
    wait_until(lambda: pidfile.exists() and pidfile.read_text().endswith("\n"), 30, f"a pid in {pidfile}")
    return int(pidfile.read_text())


def running(pid: int) -> bool:
    """Alive and not about to die: not a zombie, no SIGKILL pending."""
    try:
        status = dict(line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                      if ":\t" in line)
    except FileNotFoundError:
        return False
    pending = int(status["SigPnd"], 16) | int(status["ShdPnd"], 16)
    return status["State"][0] not in "ZX" and not pending & (1 << (signal.SIGKILL - 1))


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.01)
    return time.monotonic() - started


def test_a_killed_host_takes_its_program_and_a_child_it_never_followed(
    agent_js: Path, forking: Path, tmp_path: Path
) -> None:
    with host("untraced-children", agent_js, str(forking), str(tmp_path / "child")) as (daemon, pids):
        assert daemon.expect("tied") == ["tied", "group"]  # Frida starts the program in a session of its own
        pids.append(int(daemon.expect("root")[1]))
        pids.append(child_pid(tmp_path / "child"))
        assert all(running(pid) for pid in pids)
        daemon.kill()
        took = wait_until(lambda: not any(running(pid) for pid in pids), 10, "the program and its child to end")
        print(f"program and untraced child gone {took:.3f}s after the host was reaped")


def test_a_released_program_outlives_its_host(agent_js: Path, c_target: Callable[[str], Path]) -> None:
    with host("release", agent_js, str(c_target("sleeper"))) as (daemon, pids):
        assert daemon.expect("released") == ["released", "none"]
        pids.append(int(daemon.expect("root")[1]))
        daemon.kill()
        assert running(pids[0])


def test_a_group_leader_that_exits_leaves_its_children_untied(agent_js: Path, forking: Path, tmp_path: Path) -> None:
    with host("untraced-children", agent_js, str(forking), str(tmp_path / "child"), "exit") as (daemon, pids):
        parent = int(daemon.expect("root")[1])
        pids.append(parent)
        child = child_pid(tmp_path / "child")
        pids.append(child)
        wait_until(lambda: not running(parent), 10, "the launched process to exit")
        daemon.kill()
        assert running(child)  # left behind by a program that ended on its own: not the daemon's to kill


def test_the_lifeline_requests_fit_the_agent_interfaces() -> None:
    posted: list[dict[str, Any]] = []

    class Script:
        def post(self, message: dict[str, Any]) -> None:
            posted.append(message)
            handle.deliver_reply(protocol.LifelineState(type="lifeline_state", requestId=message["requestId"],
                                                        scope="group" if message["type"] == "lifeline" else "none"))

    class Session:
        detached = False

        def detach(self) -> None:
            Session.detached = True

    handle = ProcessHandle(pid=1, session=Session(), script=Script(), observer=cast(Any, QuietObserver()))
    assert handle.tie_lifeline(4242, 7).scope == "group" and handle.lifeline is not None
    handle.release()
    assert handle.lifeline.scope == "none" and Session.detached
    ts = agent()
    requests = ts.host_requests()
    assert [m["type"] for m in posted] == ["lifeline", "release"]
    found = [e for m in posted for e in value_errors(m, ts.shape(requests[m["type"]]), requests[m["type"]], ts)]
    assert not found, "\n".join(found)
    reply = protocol.agent_message_adapter.validate_python(
        {"type": "lifeline_state", "requestId": 3, "scope": "none", "error": "cannot open"})
    assert isinstance(reply, protocol.LifelineState) and reply.error == "cannot open"
