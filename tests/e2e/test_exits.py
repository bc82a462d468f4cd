"""How a program ends: its exit code however it exits (exit(), an atexit handler's _exit(), the libc syscall()
wrapper, an inline `syscall` instruction as ASAN's internal_exit does), the calls traced just before it kept, and
a program whose daemon is stopped never waiting for it beyond a bounded time in exit() or in a crash."""

from __future__ import annotations

import contextlib
import os
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strobe.daemon.exits import ExitStatuses
from tests.conftest import Control, StrobeClient
from tests.e2e.test_trace import launch_ready

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

EXITS_C = r"""
/* Usage: exits MODE CONTROL_DIR. Prints "ready", waits for CONTROL_DIR/go, calls step(1..3), then by MODE:
 *   syscall  syscall(SYS_exit_group, 3)       inline   an inline `syscall` instruction: exit_group(4)
 *   exit     exit(5)                          atexit   exit(0), whose atexit handler _exit(7)s
 *   null     writes through a NULL pointer
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

__attribute__((noinline)) int step(int n) { return n * 2; }

static void last_word(void) { _exit(7); }

int main(int argc, char **argv) {
    const char *mode = argv[1];
    char go[4096];
    struct stat st;
    snprintf(go, sizeof go, "%s/go", argv[2]);
    printf("ready\n");
    fflush(stdout);
    while (stat(go, &st) != 0) usleep(2000);
    for (int i = 1; i <= 3; i++) step(i);
    if (strcmp(mode, "syscall") == 0) {
        syscall(SYS_exit_group, 3);
    } else if (strcmp(mode, "inline") == 0) {
        long code = 4;
        __asm__ volatile("syscall" : : "a"((long)SYS_exit_group), "D"(code) : "rcx", "r11", "memory");
    } else if (strcmp(mode, "exit") == 0) {
        exit(5);
    } else if (strcmp(mode, "atexit") == 0) {
        atexit(last_word);
        exit(0);
    } else if (strcmp(mode, "null") == 0) {
        *(volatile int *)0 = 1;
    }
    return 0;
}
"""


@pytest.fixture(scope="session")
def exits_binary(build_dir: Path) -> Path:
    source, out = build_dir / "exits.c", build_dir / "exits"
    if not out.exists():
        source.write_text(EXITS_C)
        subprocess.run(["gcc", "-g", "-O0", "-o", str(out), str(source)], check=True)
    return out


async def run_to_end(strobe: StrobeClient, binary: Path, project: Path, control: Control, mode: str,
                     status: str = "exited") -> tuple[str, dict[str, Any]]:
    sid = await launch_ready(strobe, binary, project, mode, str(control.directory))
    await strobe.call("debug_trace", sessionId=sid, add=["step"])
    (control.directory / "go").touch()
    return sid, await strobe.wait_for_status(sid, status, timeout=30)


async def steps(strobe: StrobeClient, sid: str) -> list[tuple[str, str]]:
    return [(e["eventType"], e["function"]) for e in await strobe.all_events(sid, function={"equals": "step"})]


ALL_STEPS = [("function_enter", "step"), ("function_exit", "step")] * 3


@pytest.mark.parametrize(("mode", "code"), [("syscall", 3), ("exit", 5), ("atexit", 7)])
async def test_the_exit_code_and_the_calls_before_it(
    strobe: StrobeClient, exits_binary: Path, project: Path, control: Control, mode: str, code: int
) -> None:
    sid, listed = await run_to_end(strobe, exits_binary, project, control, mode)
    assert listed["exitCode"] == code
    assert await steps(strobe, sid) == ALL_STEPS


async def test_an_inline_exit_group_gets_its_code_from_the_kernel(
    strobe: StrobeClient, exits_binary: Path, project: Path, control: Control
) -> None:
    """No hook sees an inline `syscall` instruction: the code comes from the kernel's process connector. The calls
    recorded before it are stored only if the agent drained them in time (it sends its ring every 100 ms at most):
    they are not asserted."""
    if not ExitStatuses.permitted():
        pytest.skip("the kernel's process connector does not serve this user here")
    _, listed = await run_to_end(strobe, exits_binary, project, control, "inline")
    assert listed["exitCode"] == 4


# ---- a stopped daemon ----------------------------------------------------------------------------------------

BOUND_S = 2.0  # the agent's longest wait for the daemon in exit() or a crash
SLACK_S = 1.5  # this machine's scheduling on top of it (2 cores, a test suite running)


def alive(pid: int) -> bool:
    """Running, not a zombie (the daemon, stopped, cannot reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_gone(pid: int, timeout: float) -> float | None:
    """Seconds until `pid` ended, or None if it still runs after `timeout`."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if not alive(pid):
            return time.monotonic() - start
        time.sleep(0.01)
    return None


@contextlib.contextmanager
def stopped(pid: int) -> Iterator[None]:
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def daemon_pid(home: Path) -> int:
    return int((home / "strobe.pid").read_text().split()[0])


@pytest.mark.parametrize(("mode", "status"), [("exit", "exited"), ("null", "crashed")])
async def test_a_stopped_daemon_holds_exit_and_crashes_for_a_bounded_time(
    strobe: StrobeClient, strobe_home: Path, exits_binary: Path, project: Path, control: Control,
    mode: str, status: str,
) -> None:
    sid = await launch_ready(strobe, exits_binary, project, mode, str(control.directory))
    await strobe.call("debug_trace", sessionId=sid, add=["step"])
    pid = next(s["pid"] for s in (await strobe.call("debug_list_sessions"))["sessions"] if s["sessionId"] == sid)
    with stopped(daemon_pid(strobe_home)):
        (control.directory / "go").touch()
        took = wait_gone(pid, BOUND_S + SLACK_S + 5)
    assert took is not None, f"pid {pid} still waits for the stopped daemon"
    assert took < BOUND_S + SLACK_S, f"pid {pid} took {took:.2f}s to end with the daemon stopped"
    # What it sent before it gave up waiting is stored once the daemon runs again.
    listed = await strobe.wait_for_status(sid, status, timeout=30)
    assert listed["exitCode"] == (5 if mode == "exit" else None)
    assert await steps(strobe, sid) == ALL_STEPS


ASAN_C = r"""
#include <stdlib.h>
__attribute__((noinline)) int step(int n) { return n * 2; }
int main(void) {
    for (int i = 1; i <= 3; i++) step(i);
    char *buffer = malloc(8);
    buffer[8] = 1; /* heap-buffer-overflow: ASAN reports, then ends through internal__exit(1), an inline syscall */
    free(buffer);
    return 0;
}
"""


@pytest.fixture(scope="session")
def asan_binary(build_dir: Path) -> Path:
    source, out = build_dir / "asan_exit.c", build_dir / "asan_exit"
    if not out.exists():
        source.write_text(ASAN_C)
        built = subprocess.run(["gcc", "-g", "-O0", "-fsanitize=address", "-o", str(out), str(source)],
                               capture_output=True, text=True)
        if built.returncode != 0:
            pytest.skip(f"no AddressSanitizer here: {built.stderr[-300:]}")
    return out


async def test_an_asan_report_keeps_its_exit_code_and_the_calls_before_it(
    strobe: StrobeClient, asan_binary: Path, project: Path
) -> None:
    """ASAN ends through __sanitizer::internal__exit (an inline exit_group): hooked where the runtime is found."""
    await strobe.call("debug_trace", add=["step"], projectRoot=str(project))
    sid = (await strobe.call("debug_launch", command=str(asan_binary), projectRoot=str(project)))["sessionId"]
    listed = await strobe.wait_for_status(sid, "exited", timeout=30)
    assert listed["exitCode"] == 1
    assert await steps(strobe, sid) == ALL_STEPS
    stderr = "".join(e["text"] for e in await strobe.all_events(sid, eventType="stderr"))
    assert "ERROR: AddressSanitizer: heap-buffer-overflow" in stderr


# ---- the kernel's account (daemon/exits.py) ------------------------------------------------------------------


@pytest.fixture
def statuses() -> Iterator[ExitStatuses]:
    watcher = ExitStatuses()
    watcher.start()
    yield watcher
    watcher.close()


def test_the_kernel_says_how_a_process_ended(statuses: ExitStatuses) -> None:
    if not ExitStatuses.permitted():
        pytest.skip("the process connector does not serve this user here")
    exited = subprocess.Popen(["sh", "-c", "exit 3"])
    killed = subprocess.Popen(["sh", "-c", "kill -KILL $$"])
    exited.wait(), killed.wait()
    status = statuses.wait(exited.pid, 5)
    assert status is not None and status.exited and status.code == 3
    status = statuses.wait(killed.pid, 5)
    assert status is not None and not status.exited and status.signal == signal.SIGKILL
    alive_now = subprocess.Popen(["sleep", "30"])
    try:
        assert statuses.wait(alive_now.pid, 0.2) is None  # not ended: no answer, never a guess
    finally:
        alive_now.kill()
        alive_now.wait()


def test_a_daemon_the_kernel_does_not_serve_knows_no_exit_code(tmp_path: Path) -> None:
    """In a user namespace of its own the kernel ignores the subscription: exits are then unknown (even when the
    kernel sends events to the socket because another listener exists: their pids need not be this namespace's)."""
    script = tmp_path / "probe.py"
    script.write_text(
        "import subprocess\n"
        "from strobe.daemon.exits import ExitStatuses\n"
        "statuses = ExitStatuses()\n"
        "statuses.start()\n"
        "child = subprocess.Popen(['sh', '-c', 'exit 3'])\n"
        "child.wait()\n"
        "print(ExitStatuses.permitted(), statuses.wait(child.pid, 5), statuses.reason is not None)\n"
        "statuses.close()\n"
    )
    run = subprocess.run(["unshare", "--user", "--map-root-user", sys.executable, str(script)], capture_output=True,
                         text=True, timeout=60)
    if run.returncode != 0 and "unshare" in run.stderr:
        pytest.skip(f"no user namespaces here: {run.stderr.strip()}")
    assert run.stdout.split() == ["False", "None", "True"], run.stderr


def netlink_event(what: int, body: bytes) -> bytes:
    """One process connector message as the kernel sends it."""
    event = struct.pack("=IIQ", what, 0, 0) + body
    message = struct.pack("=IIIIHH", 1, 1, 0, 0, len(event), 0) + event
    return struct.pack("=IHHII", 16 + len(message), 3, 0, 0, 0) + message


def exit_event(pid: int, tgid: int, status: int) -> bytes:
    return netlink_event(0x80000000, struct.pack("=IIII", pid, tgid, status, 17))


def test_a_group_ends_with_its_last_thread_and_a_reused_pid_starts_afresh() -> None:
    statuses = ExitStatuses()
    statuses.available = True
    statuses.answered.set()
    # A worker thread ends alone (pthread_exit: 0), then the whole group through exit_group(3).
    statuses._take(exit_event(101, 100, 0))
    assert statuses.wait(100, 0) is None  # its leader still runs
    statuses._take(exit_event(100, 100, 3 << 8) + exit_event(102, 100, 3 << 8))
    status = statuses.wait(100, 0)
    assert status is not None and status.exited and status.code == 3
    # The pid is used again by a new process (fork) or a new program (exec): what came before is forgotten.
    statuses._take(netlink_event(0x1, struct.pack("=IIII", 1, 1, 100, 100)))
    assert statuses.wait(100, 0) is None
    statuses._take(exit_event(100, 100, 11))
    statuses._take(netlink_event(0x2, struct.pack("=II", 100, 100)))
    assert statuses.wait(100, 0) is None


def test_nothing_here_needs_a_running_daemon(exits_binary: Path) -> None:
    """The program itself ends as it should outside Strobe (what the e2e tests compare against)."""
    for mode, code in (("syscall", 3), ("inline", 4), ("exit", 5), ("atexit", 7)):
        control = exits_binary.parent / f"control-{mode}"
        control.mkdir(exist_ok=True)
        (control / "go").touch()
        assert subprocess.run([str(exits_binary), mode, str(control)], capture_output=True).returncode == code

