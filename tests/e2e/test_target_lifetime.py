"""Targets never outlive, nor hang on, a dead daemon: a daemon killed with -9 takes the program it launched and the
children it follows with it; a launch whose client vanishes mid-way is finished (never left spawned and suspended);
a daemon killed mid-launch leaves nothing suspended either.

Each test waits by polling with a deadline, and kills whatever it started in `finally` (the strobe_home fixture
then fails the test if anything started under its home is still there)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import StrobeClient, connect, poll

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

FAMILY_C = r"""
#include <stdio.h>
#include <unistd.h>

int main(void) {
    pid_t child = fork();
    if (child == 0) {
        for (;;) pause();
    }
    printf("parent %d child %d\n", (int)getpid(), (int)child);
    fflush(stdout);
    for (;;) pause();
}
"""

HOOKED_FUNCTIONS = 9000  # hooked before the program runs: seconds between its spawn and its resume


def build(build_dir: Path, name: str, source: str) -> Path:
    out = build_dir / name
    if not out.exists():
        (build_dir / f"{name}.c").write_text(source)
        subprocess.run(["gcc", "-g", "-O0", "-o", str(out), str(build_dir / f"{name}.c")], check=True)
    return out


@pytest.fixture(scope="module")
def family(build_dir: Path) -> Path:
    return build(build_dir, "lifetime_family", FAMILY_C)


@pytest.fixture(scope="module")
def slow_to_hook(build_dir: Path) -> Path:
    """A program with HOOKED_FUNCTIONS functions slow_0, slow_1…, that says "ready" and waits forever."""
    functions = "".join(f"int slow_{i}(int x) {{ return x + {i}; }}\n" for i in range(HOOKED_FUNCTIONS))
    main = ("#include <stdio.h>\n#include <unistd.h>\n"
            "int main(void) { puts(\"ready\"); fflush(stdout); for (;;) pause(); }\n")
    return build(build_dir, "lifetime_slow", functions + main)


def state(pid: int) -> str | None:
    """The process's state letter (R, S, t…), or None when it is gone (a zombie is gone: it runs no more)."""
    try:
        letter = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return None
    return None if letter in ("Z", "X") else letter


def daemon_pid(home: Path) -> int:
    return int((home / "strobe.pid").read_text())


def kill_all(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


async def gone(pids: list[int], timeout: float, what: str) -> float:
    """Wait until none of `pids` runs; returns how long it took."""
    started = time.monotonic()

    async def check() -> bool | None:
        return True if all(state(pid) is None for pid in pids) else None

    await poll(check, timeout, what)
    return time.monotonic() - started


def spawned_under(home: Path, binary: Path) -> list[int]:
    """Pids running `binary` with STROBE_HOME=<home> in their environment."""
    marker = f"STROBE_HOME={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.readlink(entry / "exe") == str(binary) and marker in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def fd_links(pid: int) -> dict[str, str]:
    """fd number -> what it is ("pipe:[123]", "anon_inode:[pidfd]"...), for the fds still readable."""
    links = {}
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                links[fd] = os.readlink(f"/proc/{pid}/fd/{fd}")
    return links


def held_by_reaper(home: Path, pid: int) -> bool:
    """Whether the daemon's reaper (a helper under the same home) holds a pidfd of `pid`."""
    marker = f"STROBE_HOME={home}".encode()
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or b"pidfd_open" not in (entry / "cmdline").read_bytes() \
                    or marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            for fd, link in fd_links(int(entry.name)).items():
                if link == "anon_inode:[pidfd]" and f"Pid:\t{pid}\n" in (entry / "fdinfo" / fd).read_text():
                    return True
        except OSError:
            continue
    return False


def tied(pid: int, daemon: int) -> bool:
    """Whether `pid` has a pipe of the daemon's open besides its stdio: its agent tied the lifeline."""
    ours = {link for link in fd_links(daemon).values() if link.startswith("pipe:")}
    return any(link in ours for fd, link in fd_links(pid).items() if fd not in ("0", "1", "2"))


async def _true(condition: bool) -> bool | None:
    return True if condition else None


async def launched_family(client: StrobeClient, binary: Path, project: Path) -> tuple[int, int]:
    """Launch the forking program and wait until its child is followed: (launched pid, child pid)."""
    sid = (await client.call("debug_launch", command=str(binary), projectRoot=str(project)))["sessionId"]

    async def followed() -> tuple[int, int] | None:
        listed = next(s for s in (await client.call("debug_list_sessions"))["sessions"] if s["sessionId"] == sid)
        processes = listed.get("processes", [])
        child = [p["pid"] for p in processes if p.get("parentPid") == listed["pid"]]
        return (listed["pid"], child[0]) if child else None

    return await poll(followed, 30, "the child to be followed")


async def test_a_daemon_killed_with_minus_9_takes_its_target_and_followed_child_with_it(
    strobe_home: Path, family: Path, project: Path
) -> None:
    pids: list[int] = []
    try:
        async with connect(strobe_home) as client:
            root, child = await launched_family(client, family, project)
            pids += [root, child]
        daemon = daemon_pid(strobe_home)
        assert state(root) is not None and state(child) is not None
        assert os.getpgid(child) == root == os.getpgid(root)  # Frida starts the program in a session of its own

        os.kill(daemon, signal.SIGKILL)
        took = await gone([daemon, root, child], 10, "the daemon, its target and the followed child to be gone")
        print(f"daemon, target and child gone {took:.3f}s after kill -9")
    finally:
        kill_all(pids)


async def test_a_daemon_killed_while_threads_are_paused_and_held_leaves_nothing_stopped(
    strobe_home: Path, c_target: Callable[[str], Path], tmp_path: Path
) -> None:
    """A thread paused at a breakpoint with allThreads (the others held by the ptrace helper): killing the daemon with
    -9 takes the program (its lifeline) and the helper (its stdin ends), leaving no process stopped."""
    binary = c_target("breaks")
    pids: list[int] = []
    try:
        async with connect(strobe_home) as client:
            sid = (await client.call("debug_launch", command=str(binary), args=[str(tmp_path)],
                                     projectRoot=str(tmp_path)))["sessionId"]
            await client.call("debug_breakpoint", sessionId=sid,
                              add=[{"function": "process_order", "allThreads": True}])
            (tmp_path / "go").touch()

            async def held() -> dict[str, Any] | None:
                listed = next(s for s in (await client.call("debug_list_sessions"))["sessions"]
                              if s["sessionId"] == sid)
                paused = listed.get("paused") or []
                return paused[0] if paused and "otherThreads" in paused[0] else None

            thread = await poll(held, 30, "the paused thread with the others held")
            pids.append(thread["pid"])
        daemon = daemon_pid(strobe_home)
        helpers = [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()
                   and b"strobe.instrument.thread_stops" in _cmdline(e)]
        assert helpers, "the hold's helper runs"
        os.kill(daemon, signal.SIGKILL)
        await gone([daemon, *pids, *helpers], 10, "the daemon, the paused program and the hold's helper to be gone")
    finally:
        kill_all(pids)


def _cmdline(entry: Path) -> bytes:
    try:
        return (entry / "cmdline").read_bytes()
    except OSError:
        return b""


class RawClient:
    """`strobe mcp` spoken to line by line, so the test can make the client vanish (SIGKILL) mid-request."""

    def __init__(self, home: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "strobe", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env={**os.environ, "STROBE_HOME": str(home)},
        )
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2024-11-05", "capabilities": {},
                                    "clientInfo": {"name": "lifetime-test", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def post(self, method: str, params: dict[str, Any]) -> None:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.post(method, params)
        assert self.process.stdout is not None
        reply: dict[str, Any] = json.loads(self.process.stdout.readline())
        assert reply.get("id") == self.next_id and "result" in reply, reply
        return reply

    def vanish(self) -> None:
        self.process.kill()
        self.process.wait(10)


@contextlib.contextmanager
def launch_in_flight(home: Path, binary: Path, project: Path) -> Iterator[tuple[RawClient, int]]:
    """A debug_launch of `binary` with HOOKED_FUNCTIONS functions to hook before it runs, caught while the process
    is spawned and stopped (ptrace): yields the client and the pid. Kills both on the way out."""
    client = RawClient(home)
    pids: list[int] = []
    try:
        client.request("tools/call", {"name": "debug_trace",
                                      "arguments": {"add": ["slow_*"], "projectRoot": str(project)}})
        client.post("tools/call", {"name": "debug_launch",
                                   "arguments": {"command": str(binary), "projectRoot": str(project)}})
        deadline = time.monotonic() + 30
        while not pids and time.monotonic() < deadline:
            pids = [pid for pid in spawned_under(home, binary) if state(pid) == "t"]
            time.sleep(0.005)
        assert pids, "the launched process was never seen spawned and stopped"
        yield client, pids[0]
    finally:
        client.vanish()
        kill_all(pids)


async def test_a_launch_whose_client_vanishes_mid_way_is_finished_not_left_suspended(
    strobe_home: Path, slow_to_hook: Path, project: Path
) -> None:
    with launch_in_flight(strobe_home, slow_to_hook, project) as (client, pid):
        client.vanish()  # while the daemon hooks 9,000 functions, before it resumes the process
        started = time.monotonic()

        async def resumed() -> str | None:
            now = state(pid)
            return now if now not in ("t", "T") else None

        assert await poll(resumed, 60, "the process to be resumed") in ("S", "R")
        print(f"resumed {time.monotonic() - started:.3f}s after its client vanished")
        async with connect(strobe_home) as other:  # its session is there for any client, running, and can be stopped

            async def running() -> list[dict[str, Any]] | None:  # a state other than t can come mid-injection too
                listed: list[dict[str, Any]] = (await other.call("debug_list_sessions"))["sessions"]
                return listed if [(s["pid"], s["status"]) for s in listed] == [(pid, "running")] else None

            listed = await poll(running, 60, "the finished launch's session to be listed, running")
            await other.call("debug_stop", sessionId=listed[0]["sessionId"])
        await gone([pid], 10, "the stopped process to be gone")


async def test_a_daemon_killed_mid_launch_leaves_no_suspended_process(
    strobe_home: Path, slow_to_hook: Path, project: Path
) -> None:
    with launch_in_flight(strobe_home, slow_to_hook, project) as (client, pid):
        daemon = daemon_pid(strobe_home)
        # From a few ms after its fork (Frida's spawn returning) the process is either held by the reaper or tied to
        # the daemon's lifeline by its agent; before that nothing can end it (see instrument/launcher.py).
        await poll(lambda: _true(held_by_reaper(strobe_home, pid) or tied(pid, daemon)), 30,
                   "the process to be held by the reaper or tied to the lifeline")
        client.vanish()  # first, or its proxy would start a new daemon behind the test's back
        os.kill(daemon, signal.SIGKILL)
        took = await gone([daemon, pid], 10, "the daemon and the process it was launching to be gone")
        print(f"gone {took:.3f}s after kill -9")
