"""Thread stops (instrument/thread_stops.py) on a real program: tests/targets/holdme.c, three worker threads that
count loops of a 1 ms nanosleep and the signals their handlers ran for, on a board file the test reads.

A held thread is one whose count stays put while a free worker's count moves on (the free one is the clock: no
fixed sleeps) and whose /proc state is 't' (tracing stop). Every test checks that the program never saw an EINTR
it could not explain by a handler: a hold must be invisible to it beyond the pause."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

import strobe
from strobe.errors import ValidationError
from strobe.instrument.thread_stops import HELPER_MODULE, ThreadHold

T = TypeVar("T")
SLOTS = 14  # the board's layout: see tests/targets/holdme.c
READY, TID, COUNT, HANDLED, SPURIOUS = 0, 1, 4, 7, 10
SIGRT = signal.SIGRTMIN + 1
libc = ctypes.CDLL(None, use_errno=True)


def wait_for(check: Callable[[], T | None], what: str, timeout: float = 10.0) -> T:
    """Poll `check` until it returns something other than None (or False); fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.005)


def tgkill(pid: int, tid: int, sig: int) -> None:
    if libc.tgkill(pid, tid, sig) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill({pid}, {tid}, {sig})")


def state(pid: int, tid: int) -> str:
    return Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@dataclass
class Holdme:
    process: subprocess.Popen[bytes]
    board: Path
    expect_alive: bool = True

    @property
    def pid(self) -> int:
        return self.process.pid

    def read(self) -> tuple[int, ...]:
        return struct.unpack(f"{SLOTS}q", self.board.read_bytes())

    @property
    def tids(self) -> list[int]:
        return list(self.read()[TID:TID + 3])

    def counts(self) -> list[int]:
        return list(self.read()[COUNT:COUNT + 3])

    def handled(self) -> list[int]:
        return list(self.read()[HANDLED:HANDLED + 3])

    def spurious(self) -> list[int]:
        return list(self.read()[SPURIOUS:SPURIOUS + 3])

    def free_worker_runs(self, worker: int, loops: int = 30) -> None:
        """Wait until `worker` (one not held) has run `loops` more loops: time enough for any held one to move."""
        start = self.counts()[worker]
        wait_for(lambda: self.counts()[worker] >= start + loops, f"worker {worker} to run {loops} loops")

    def all_run(self, since: list[int], loops: int = 10) -> None:
        wait_for(lambda: all(now >= then + loops for now, then in zip(self.counts(), since, strict=True)),
                 f"every worker to run {loops} loops past {since}")


@pytest.fixture
def holdme(c_target: Callable[[str], Path], tmp_path: Path) -> Iterator[Holdme]:
    board = tmp_path / "board"
    process = subprocess.Popen([str(c_target("holdme")), str(board)])
    try:
        target = Holdme(process, board)
        wait_for(lambda: board.exists() and board.stat().st_size == SLOTS * 8 and target.read()[READY] == 3
                 and all(target.tids), "holdme's three workers to start")
        target.all_run([0, 0, 0], 1)
        yield target
        assert process.poll() is None or not target.expect_alive, "holdme died"
        assert target.spurious() == [0, 0, 0], "a hold showed the program an EINTR no handler explains"
        assert not helpers_left(), "a thread-stop helper outlived its hold"
    finally:
        process.kill()
        process.wait()


def helpers_left() -> list[int]:
    """This process's children that run the thread-stop helper (every hold must have ended its own)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (entry.name.isdigit() and f"PPid:\t{os.getpid()}\n" in (entry / "status").read_text()
                    and HELPER_MODULE.encode() in (entry / "cmdline").read_bytes()
                    and state(int(entry.name), int(entry.name)) != "Z"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_held_threads_stop_and_run_again(holdme: Holdme) -> None:
    first, second, free = holdme.tids
    hold = ThreadHold.start(holdme.pid, [first, second])
    try:
        assert hold.active
        assert (hold.result.held, hold.result.gone, hold.result.failed) == ([first, second], [], {})
        assert [state(holdme.pid, tid) for tid in (first, second)] == ["t", "t"]
        frozen = holdme.counts()
        holdme.free_worker_runs(2)
        assert holdme.counts()[:2] == frozen[:2]
        assert state(holdme.pid, free) in ("R", "S")
    finally:
        hold.release()
    assert not hold.active
    holdme.all_run(holdme.counts())  # and the fixture checks: alive, no spurious EINTR


def test_helper_closing_on_stdin_end_releases(holdme: Holdme) -> None:
    """The daemon dying closes the helper's stdin: the helper detaches everything and exits 0."""
    tid = holdme.tids[0]
    env = {**os.environ, "PYTHONPATH": str(Path(strobe.__file__).parents[1])}
    helper = subprocess.Popen([sys.executable, "-m", HELPER_MODULE, str(holdme.pid), str(tid)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    try:
        assert helper.stdin is not None and helper.stdout is not None
        assert json.loads(helper.stdout.readline()) == {"held": [tid], "gone": [], "failed": {}, "signals": {}}
        frozen = holdme.counts()[0]
        holdme.free_worker_runs(1)
        assert holdme.counts()[0] == frozen
        helper.stdin.close()
        assert helper.stdout.read() == b"released\n"
        assert helper.wait(10) == 0
        holdme.all_run(holdme.counts())
    finally:
        helper.kill()
        helper.wait()


def test_helper_killed_releases(holdme: Holdme) -> None:
    """A helper killed with SIGKILL cannot detach anything: the kernel detaches its tracees and they run."""
    tid = holdme.tids[1]
    hold = ThreadHold.start(holdme.pid, [tid])
    try:
        assert hold.result.held == [tid]
        assert hold.helper_pid is not None
        os.kill(hold.helper_pid, signal.SIGKILL)
        wait_for(lambda: not hold.active, "the helper to die")
        holdme.all_run(holdme.counts())
    finally:
        hold.release()
    hold.release()


def test_missing_threads_are_gone_and_release_is_idempotent(holdme: Holdme, tmp_path: Path) -> None:
    tid = holdme.tids[0]
    absent = next(n for n in range(4_000_000, 3_000_000, -1) if not Path(f"/proc/{n}").exists())
    # this test's own pid exists, but as a thread of another process: not one of holdme's
    with ThreadHold.start(holdme.pid, [absent, tid, os.getpid(), tid]) as hold:
        assert (hold.result.held, hold.result.gone, hold.result.failed) == ([tid], [absent, os.getpid()], {})
        hold.release()
        hold.release()
        assert not hold.active and hold.helper_pid is None
    holdme.all_run(holdme.counts())

    exited = subprocess.Popen(["true"])
    exited.wait()
    hold = ThreadHold.start(exited.pid, [exited.pid])
    assert (hold.result.held, hold.result.gone, hold.result.failed) == ([], [exited.pid], {})
    assert not hold.active  # nothing held: the helper is already gone
    hold.release()

    assert ThreadHold.start(holdme.pid, []).result.held == []


def test_a_thread_traced_elsewhere_is_failed(holdme: Holdme) -> None:
    tid = holdme.tids[0]
    with ThreadHold.start(holdme.pid, [tid]) as first:
        second = ThreadHold.start(holdme.pid, [tid, holdme.tids[1]])
        try:
            assert second.result.held == [holdme.tids[1]]
            assert list(second.result.failed) == [tid]
            assert f"already traced by process {first.helper_pid}" in second.result.failed[tid]
        finally:
            second.release()
        assert state(holdme.pid, tid) == "t"  # the second helper let go of its own thread only
    holdme.all_run(holdme.counts())


def test_target_killed_while_held_is_reaped(holdme: Holdme) -> None:
    """The daemon can reap a held program that dies: the helper reaps the threads it traced as they die."""
    hold = ThreadHold.start(holdme.pid, holdme.tids[:2])
    holdme.expect_alive = False
    try:
        assert len(hold.result.held) == 2
        holdme.process.kill()
        assert holdme.process.wait(10) == -signal.SIGKILL
        assert hold.active
    finally:
        hold.release()
    assert not hold.active


def test_signal_sent_while_held_is_delivered_after_release(holdme: Holdme) -> None:
    tid = holdme.tids[0]
    with ThreadHold.start(holdme.pid, [tid]) as hold:
        assert hold.result.held == [tid]
        tgkill(holdme.pid, tid, signal.SIGUSR1)
        holdme.free_worker_runs(2)
        assert holdme.handled()[0] == 0  # pending, not run: the thread is stopped
        pending = next(line for line in Path(f"/proc/{holdme.pid}/task/{tid}/status").read_text().splitlines()
                       if line.startswith("SigPnd:"))
        assert int(pending.split()[1], 16) & (1 << (signal.SIGUSR1 - 1))
    wait_for(lambda: holdme.handled()[0] == 1, "the SIGUSR1 handler to run once the thread runs")


def test_signals_racing_the_stop_are_not_lost(holdme: Holdme) -> None:
    """Real-time signals queue (none merge), so every one sent must run the handler exactly once, however many land
    between the helper's seize and interrupt (a signal-delivery-stop: dequeued already, handed back at detach)."""
    tid = holdme.tids[0]
    sent = 0
    done = threading.Event()

    def send() -> None:
        nonlocal sent
        while not done.is_set():
            tgkill(holdme.pid, tid, SIGRT)
            sent += 1
            if sent % 50 == 0:
                time.sleep(0.0005)  # the queue of pending signals is bounded (RLIMIT_SIGPENDING)

    sender = threading.Thread(target=send)
    sender.start()
    caught = 0
    try:
        for _ in range(30):
            with ThreadHold.start(holdme.pid, [tid]) as hold:
                assert hold.result.held == [tid]
                caught += len(hold.result.signals)
                assert set(hold.result.signals.values()) <= {SIGRT}
    finally:
        done.set()
        sender.join()
    wait_for(lambda: holdme.handled()[0] == sent, f"{sent} handler runs (caught while stopping: {caught})")
    print(f"{sent} signals sent, {caught} caught in a signal-delivery-stop and handed back")


VFORKER_C = r"""
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* vforker: a worker thread naps in a loop; the main thread vforks a child that reads stdin to its end, so the main
   thread waits in the kernel (state D) until the test closes that stdin, then prints "resumed" and exits 0. */
static void *nap(void *arg) {
    struct timespec ms = {0, 1000000};
    for (;;)
        nanosleep(&ms, NULL);
    return arg;
}

int main(void) {
    pthread_t worker;
    pthread_create(&worker, NULL, nap, NULL);
    pid_t child = vfork();
    if (child == 0) {
        char c;
        while (read(0, &c, 1) > 0) {}
        _exit(0);
    }
    waitpid(child, NULL, 0);
    puts("resumed");
    return 0;
}
"""


def test_a_thread_that_cannot_stop_in_time_is_failed_then_let_go(tmp_path: Path) -> None:
    """A thread waiting in the kernel where no signal reaches it (a vfork parent) does not stop by the timeout: it
    is reported failed, and the helper lets it go the moment it would stop, while it holds the other threads."""
    (tmp_path / "vforker.c").write_text(VFORKER_C)
    subprocess.run(["gcc", "-pthread", "-o", str(tmp_path / "vforker"), str(tmp_path / "vforker.c")], check=True)
    process = subprocess.Popen([str(tmp_path / "vforker")], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert process.stdin is not None and process.stdout is not None
        wait_for(lambda: len(os.listdir(f"/proc/{process.pid}/task")) == 2 and state(process.pid, process.pid) == "D",
                 "the vforker's main thread to wait for its child")
        worker = max(int(tid) for tid in os.listdir(f"/proc/{process.pid}/task"))
        with ThreadHold.start(process.pid, [process.pid, worker], timeout_s=0.3) as hold:
            assert hold.result.held == [worker]
            assert "did not stop within 0.3s (state D" in hold.result.failed[process.pid]
            process.stdin.close()  # the child exits, the main thread returns from vfork: the helper lets it go
            wait_for(lambda: process.poll() is not None, "the vforker's main thread to run on and exit")
            assert (process.returncode, process.stdout.read()) == (0, b"resumed\n")
            assert hold.active
    finally:
        process.kill()
        process.wait()
    assert not helpers_left()


@pytest.mark.parametrize("bad", [(0, [1]), (1, [-5])])
def test_ids_that_cannot_be_threads_are_refused(bad: tuple[int, list[int]]) -> None:
    with pytest.raises(ValidationError, match="must be positive"):
        ThreadHold.start(*bad)
    with pytest.raises(ValidationError, match="this process"):
        ThreadHold.start(os.getpid(), [threading.get_native_id()])
