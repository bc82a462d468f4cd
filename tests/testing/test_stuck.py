"""The stuck detector: its decisions on fake samples with an injected clock (no waiting), then on real programs
that deadlock, spin, block in read() or print steadily (with shortened thresholds; the runner's tests use the
real ones)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from strobe.testing.adapters.base import StackKind
from strobe.testing.stacks import Frame, ProcessStacks, ThreadStack
from strobe.testing.stuck import (
    CpuWindow,
    StuckDetector,
    StuckKind,
    StuckVerdict,
    ThreadUsage,
    TreeUsage,
    Wait,
    classify,
    suggest_traces,
    waits_in,
)

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
APP = "/home/me/app/bank_tests"
PID = 100


def lib(function: str) -> Frame:
    return Frame(function, None, LIBC)


def own(function: str) -> Frame:
    return Frame(function, f"/home/me/app/{function.split('::')[0]}.c:7", APP)


def thread(tid: int, *frames: Frame, name: str = "bank_tests") -> ThreadStack:
    return ThreadStack(tid, name, tuple(frames))


LOCKED = (lib("futex_wait"), lib("__GI___lll_lock_wait"), lib("___pthread_mutex_lock@GLIBC_2.2.5"))
JOINING = thread(PID, lib("__futex_abstimed_wait_common"), lib("__pthread_clockjoin_ex"), own("main"))
DEADLOCK = [ProcessStacks(PID, "bank_tests", [JOINING, thread(101, *LOCKED, own("transfer_funds")),
                                              thread(102, *LOCKED, own("audit_ledger"))])]
READING = [ProcessStacks(PID, "client", [thread(PID, lib("__GI___libc_read"), own("wait_for_reply"), own("main"))])]


class FakeTree:
    """Stands in for /proc and eu-stack: CPU counters advance by the shares given to `tick`, stacks are whatever
    `stacks` holds (a list, or a function of the capture number)."""

    def __init__(self, stacks: list[ProcessStacks] | Callable[[int], list[ProcessStacks]],
                 commands: dict[int, str] | None = None) -> None:
        self.stacks, self.commands = stacks, commands or {PID: "bank_tests"}
        self.counters: dict[tuple[int, int], ThreadUsage] = {}
        self.captures: list[bool] = []  # the `detail` flag of each capture

    def tick(self, seconds: float, shares: dict[tuple[int, int], float]) -> None:
        for key, share in shares.items():
            old = self.counters.get(key, ThreadUsage(0, 0))
            self.counters[key] = ThreadUsage(old.cpu_ns + int(share * seconds * 1e9), old.wait_ns)

    def usage(self, root: int) -> TreeUsage:
        return TreeUsage(dict(self.counters), dict(self.commands), {pid: 7 for pid in self.commands})

    def read_stacks(self, root: int, kind: StackKind, detail: bool) -> list[ProcessStacks]:
        self.captures.append(detail)
        return self.stacks(len(self.captures)) if callable(self.stacks) else self.stacks


def drive(tree: FakeTree, shares: dict[tuple[int, int], float],
          until: float) -> tuple[StuckDetector, list[tuple[float, StuckVerdict | None, str | None]]]:
    """Run a detector on `tree` from t=0 (the last output) to `until`, a sample every 2 s. Returns the detector
    and what it said at each sample."""
    detector = StuckDetector(PID, 0.0, usage_reader=tree.usage, stack_reader=tree.read_stacks)
    timeline: list[tuple[float, StuckVerdict | None, str | None]] = []
    now = 0.0
    while now < until:
        now += 2.0
        tree.tick(2.0, shares)
        verdict = detector.sample(now)
        timeline.append((now, verdict, detector.warning.diagnosis if detector.warning else None))
        if verdict:
            break
    return detector, timeline


IDLE = {(PID, PID): 0.0, (PID, 101): 0.0, (PID, 102): 0.0}


def test_deadlock_is_suspected_at_6s_and_confirmed_at_8s_with_the_stacks() -> None:
    tree = FakeTree(DEADLOCK)
    detector, timeline = drive(tree, IDLE, until=30)
    assert [(t, bool(v), w is not None) for t, v, w in timeline] == [
        (2.0, False, False), (4.0, False, False), (6.0, False, True), (8.0, True, True)]
    assert timeline[2][2] is not None and timeline[2][2].startswith("No output for 6s, 0% CPU")
    assert timeline[3][2] == "0% CPU, stacks unchanged 2s; 2 threads waiting for locks in transfer_funds, audit_ledger"
    verdict = timeline[-1][1]
    assert verdict and verdict.kind is StuckKind.DEADLOCK
    assert verdict.diagnosis.startswith("Deadlock: 0% CPU, identical stacks")
    assert "transfer_funds, audit_ledger" in verdict.diagnosis and verdict.idle_ms == 8000
    assert verdict.suggested_traces == ["transfer_funds", "audit_ledger"]  # no libc, no main
    assert tree.captures == [False, False, True]  # two quick captures compared, one detailed for the report
    assert [t["name"] for t in verdict.threads()] == ["bank_tests (tid 100)", "bank_tests (tid 101)",
                                                      "bank_tests (tid 102)"]
    assert verdict.threads()[1]["stack"][-1] == "transfer_funds at /home/me/app/transfer_funds.c:7"
    assert detector.sample(10.0) is verdict  # settled


def test_spinning_thread_is_an_infinite_loop_in_its_function() -> None:
    stacks = [ProcessStacks(PID, "solver", [thread(PID, own("solver::step"), own("solver::run"), own("main"))])]
    tree = FakeTree(stacks, {PID: "solver"})
    _, timeline = drive(tree, {(PID, PID): 1.0}, until=30)
    assert timeline[2][2] == "No output for 6s, 100% CPU in solver::step"
    verdict = timeline[-1][1]
    assert timeline[-1][0] == 8.0 and verdict and verdict.kind is StuckKind.INFINITE_LOOP
    assert verdict.diagnosis == "Infinite loop: 100% CPU in solver::step, no output for 8s"
    assert verdict.suggested_traces == ["solver::*"]


def test_loop_found_when_the_innermost_frame_alternates_with_a_helper() -> None:
    def capture(n: int) -> list[ProcessStacks]:
        inner = [own("converged")] if n % 2 else []
        return [ProcessStacks(PID, "solver", [thread(PID, lib("memcpy"), *inner, own("search"), own("main"))])]

    _, timeline = drive(FakeTree(capture, {PID: "solver"}), {(PID, PID): 0.97}, until=30)
    verdict = timeline[-1][1]
    assert verdict and verdict.diagnosis == "Infinite loop: 97% CPU in search, no output for 8s"


def test_busy_thread_whose_stacks_keep_changing_is_not_called_stuck() -> None:
    def capture(n: int) -> list[ProcessStacks]:  # a long computation: different functions at every capture
        frames = [own(f"phase{n}::work{n}"), own(f"phase{n}::step"), own(f"phase{n}::run"), own("pipeline::main")]
        return [ProcessStacks(PID, "crunch", [thread(PID, *frames)])]

    detector, timeline = drive(FakeTree(capture, {PID: "crunch"}), {(PID, PID): 1.0}, until=40)
    assert not any(v for _, v, _ in timeline)
    assert detector.warning is not None and "100% CPU" in detector.warning.diagnosis  # still a suspicion


def test_a_compiler_at_full_speed_is_building_not_looping() -> None:
    stacks = [ProcessStacks(PID, "cargo", [thread(PID, lib("wait4"))]),
              ProcessStacks(200, "rustc", [thread(200, own("llvm::optimize"), own("rustc::codegen"))])]
    tree = FakeTree(stacks, {PID: "cargo", 200: "rustc"})
    _, timeline = drive(tree, {(200, 200): 1.0}, until=30)
    assert not any(v or w for _, v, w in timeline) and tree.captures == []


def test_blocked_in_read_is_waiting_on_io_not_a_loop_or_deadlock() -> None:
    _, timeline = drive(FakeTree(READING, {PID: "client"}), {(PID, PID): 0.0}, until=30)
    verdict = timeline[-1][1]
    assert verdict and verdict.kind is StuckKind.WAITING_ON_IO
    assert verdict.diagnosis.startswith("Waiting on I/O: 0% CPU, identical stacks")
    assert "wait_for_reply" in verdict.diagnosis and verdict.suggested_traces == ["wait_for_reply"]


def test_sleeping_gets_a_longer_grace_before_it_is_called_stuck() -> None:
    stacks = [ProcessStacks(PID, "poller", [thread(PID, lib("clock_nanosleep@GLIBC_2.17"), own("poll_status"))])]
    _, timeline = drive(FakeTree(stacks, {PID: "poller"}), {(PID, PID): 0.0}, until=60)
    verdict = timeline[-1][1]
    assert timeline[-1][0] == 30.0 and verdict and verdict.kind is StuckKind.SLEEPING
    assert timeline[3][2] is not None and "sleeping in poll_status" in timeline[3][2]


def test_steady_output_is_never_stuck_and_costs_no_stack_capture() -> None:
    tree = FakeTree(DEADLOCK)
    detector = StuckDetector(PID, 0.0, usage_reader=tree.usage, stack_reader=tree.read_stacks)
    for second in range(1, 60):
        detector.output_seen(float(second))
        if second % 2 == 0:
            tree.tick(2.0, IDLE)
            assert detector.sample(float(second)) is None
    assert detector.warning is None and tree.captures == []


def test_output_after_a_warning_clears_it() -> None:
    tree = FakeTree(DEADLOCK)
    detector = StuckDetector(PID, 0.0, usage_reader=tree.usage, stack_reader=tree.read_stacks)
    for now in (2.0, 4.0, 6.0):
        tree.tick(2.0, IDLE)
        detector.sample(now)
    assert detector.warning is not None
    detector.output_seen(7.0)
    tree.tick(2.0, IDLE)
    assert detector.sample(8.0) is None and detector.warning is None


def test_moderate_cpu_is_progress() -> None:
    tree = FakeTree(DEADLOCK)
    _, timeline = drive(tree, {(PID, 101): 0.3}, until=30)
    assert not any(v or w for _, v, w in timeline) and tree.captures == []


def test_an_idle_tree_whose_stacks_change_is_not_confirmed_until_they_settle() -> None:
    moved = [ProcessStacks(PID, "bank_tests", [JOINING, thread(101, *LOCKED, own("transfer_funds"))])]
    tree = FakeTree(lambda n: DEADLOCK if n >= 4 else (moved if n % 2 else DEADLOCK))
    _, timeline = drive(tree, IDLE, until=30)
    assert [t for t, v, _ in timeline if v] == [14.0]  # captures at 6, 8, 10, 12 differed; 12 and 14 agree


def test_cpu_before_the_silence_does_not_mask_an_idle_deadlock() -> None:
    tree = FakeTree(DEADLOCK)
    detector = StuckDetector(PID, 0.0, usage_reader=tree.usage, stack_reader=tree.read_stacks)
    verdict = None
    for step in range(1, 20):
        tree.tick(2.0, {(PID, 101): 0.9} if step <= 2 else IDLE)  # computed quietly for 4 s, then locked up
        if verdict := detector.sample(step * 2.0):
            break
    assert verdict and verdict.kind is StuckKind.DEADLOCK and verdict.idle_ms <= 12000


def test_wrappers_waiting_for_their_child_are_left_out_of_the_diagnosis() -> None:
    harness_main = thread(300, lib("futex_wait"), lib("pthread_cond_wait@@GLIBC_2.3.2"), own("test::run_tests"))
    reader = thread(301, lib("__GI___libc_read"), own("client::handshake"))
    stacks = [ProcessStacks(PID, "sh", [thread(PID, lib("__GI___wait4"), Frame("??", None, "/usr/bin/dash"))]),
              ProcessStacks(300, "client_tests", [harness_main, reader])]
    _, timeline = drive(FakeTree(stacks, {PID: "sh", 300: "client_tests"}), {}, until=30)
    verdict = timeline[-1][1]
    assert verdict and verdict.kind is StuckKind.WAITING_ON_IO
    assert verdict.suggested_traces == ["client::*"]
    names = [t["name"] for t in verdict.threads()]  # every process is shown, each thread says where it lives
    assert names[0] == "bank_tests (tid 100, pid 100 sh)" and len(names) == 3


def test_timeout_verdict_captures_stacks_for_the_report() -> None:
    tree = FakeTree(DEADLOCK)
    detector = StuckDetector(PID, 0.0, usage_reader=tree.usage, stack_reader=tree.read_stacks)
    verdict = detector.timeout_verdict(300, "unit tests", 301.0)
    assert verdict.kind is StuckKind.TIMEOUT and tree.captures == [True]
    assert verdict.diagnosis == "Timed out: still running after 5 min, the limit for unit tests"
    assert len(verdict.threads()) == 3 and verdict.suggested_traces == ["transfer_funds", "audit_ledger"]


def test_waits_in_tells_locks_io_sleep_child_and_events_apart() -> None:
    assert waits_in(thread(1, *LOCKED, own("f"))) is Wait.LOCK
    assert waits_in(thread(1, lib("futex_wait"), lib("__new_sem_wait_slow64"), lib("PyThread_acquire_lock_timed"))) \
        is Wait.LOCK
    assert waits_in(thread(1, lib("epoll_wait"), lib("uv__io_poll"), lib("uv_run"))) is Wait.IO
    assert waits_in(thread(1, lib("__GI___clock_nanosleep"), lib("__GI___nanosleep"), own("f"))) is Wait.SLEEP
    assert waits_in(thread(1, lib("__GI___wait4"))) is Wait.CHILD
    assert waits_in(thread(1, lib("futex_wait"), lib("___pthread_cond_wait"), own("f"))) is Wait.EVENT
    assert waits_in(thread(1, own("spin"), lib("__GI___libc_read"))) is None  # running its own code


def test_suggested_traces_use_the_programs_own_frames() -> None:
    rust = thread(1, lib("syscall"), Frame("std::sys::sync::mutex::futex::Mutex::lock_contended", None, APP),
                  Frame("bank::ledger::post::h0123456789abcdef", None, APP),
                  Frame("bank::tests::transfer::{{closure}}", None, APP),
                  Frame("core::ops::function::FnOnce::call_once", None, APP))
    assert suggest_traces([rust]) == ["bank::ledger::*", "bank::tests::*"]
    python = thread(1, Frame("wait", "/usr/lib/python3.11/threading.py:320"),
                    Frame("wait_for_server", "tests/test_client.py:14"), Frame("handshake", "app/client.py:3"))
    assert suggest_traces([python], StackKind.PYTHON) == ["@file:test_client.py", "@file:client.py"]
    interpreter = thread(1, lib("epoll_wait"), Frame("sock_recv_guts", None, "/home/me/.pyenv/bin/python3.11"))
    assert suggest_traces([interpreter], StackKind.PYTHON) == []  # the interpreter's own C, not the test's code
    many = thread(1, *(own(f"f{i}") for i in range(9)))
    assert suggest_traces([many]) == ["f0", "f1", "f2", "f3", "f4"]


# ---- real programs, shortened thresholds ----

FAST: dict[str, Any] = {"suspect_after_s": 1.0, "confirm_after_s": 2.0, "slack_s": 0.1}
INTERVAL = 0.5


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(*argv: str | Path) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE, start_new_session=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdout:
            proc.stdout.close()


def watch(proc: subprocess.Popen[bytes], feed_output: bool, limit: float = 8.0) -> StuckVerdict | None:
    """Sample a real process every INTERVAL s until a verdict, its exit or `limit`. With `feed_output`, its
    output is reported to the detector as it arrives, as the runner does."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    start = time.monotonic()
    detector = StuckDetector(proc.pid, start, **FAST)
    next_sample = start + INTERVAL
    while time.monotonic() - start < limit and proc.poll() is None:
        if feed_output:
            with contextlib.suppress(BlockingIOError):
                if os.read(fd, 4096):
                    detector.output_seen(time.monotonic())
        if time.monotonic() >= next_sample:
            next_sample += INTERVAL
            if verdict := detector.sample(time.monotonic()):
                return verdict
        time.sleep(0.05)
    return None


def first_line(proc: subprocess.Popen[bytes]) -> None:
    assert proc.stdout is not None and proc.stdout.readline()


def test_real_deadlock(programs: Callable[[str], Path], spawn: Callable[..., subprocess.Popen[bytes]]) -> None:
    proc = spawn(programs("deadlock"))
    first_line(proc)
    verdict = watch(proc, feed_output=False)
    assert verdict and verdict.kind is StuckKind.DEADLOCK, verdict
    assert set(verdict.suggested_traces) == {"transfer_funds", "audit_ledger"}
    stacks = {t["name"].split(" (")[0]: t for t in verdict.threads()}
    assert set(stacks) == {"deadlock", "transfer", "audit"}
    assert stacks["transfer"]["name"].endswith(f", pid {proc.pid} deadlock)")  # names say where the thread lives
    assert any(frame.startswith("transfer_funds at ") and frame.endswith("deadlock.c:14")
               for frame in stacks["transfer"]["stack"])


def test_real_spin(programs: Callable[[str], Path], spawn: Callable[..., subprocess.Popen[bytes]]) -> None:
    proc = spawn(programs("spin"))
    first_line(proc)
    verdict = watch(proc, feed_output=False)
    assert verdict and verdict.kind is StuckKind.INFINITE_LOOP, verdict
    assert verdict.diagnosis.startswith("Infinite loop: ") and "CPU in search_fixed_point" in verdict.diagnosis


def test_real_blocked_read_is_waiting_on_io(programs: Callable[[str], Path],
                                            spawn: Callable[..., subprocess.Popen[bytes]]) -> None:
    proc = spawn(programs("blocked_read"))
    first_line(proc)
    verdict = watch(proc, feed_output=False)
    assert verdict and verdict.kind is StuckKind.WAITING_ON_IO, verdict
    assert "wait_for_reply" in verdict.diagnosis and "loop" not in verdict.diagnosis.lower()


def test_real_steady_printer_is_never_stuck(programs: Callable[[str], Path],
                                           spawn: Callable[..., subprocess.Popen[bytes]]) -> None:
    printer = spawn(programs("steady"), "16")  # 4 s of a line every 250 ms, idle in poll() in between
    assert watch(printer, feed_output=True) is None
    assert printer.wait(timeout=10) == 0
    unheard = spawn(programs("steady"), "16")  # the same program with its output ignored: it does look stuck
    first_line(unheard)
    verdict = watch(unheard, feed_output=False)
    assert verdict and verdict.kind is StuckKind.WAITING_ON_IO and "wait_briefly_for_reply" in verdict.diagnosis


# ---- classify(): one picture (two captures and the CPU between them), as debug_stacks asks -----------------

def window(shares: dict[tuple[int, int], float], commands: dict[int, str] | None = None) -> CpuWindow:
    before = TreeUsage({key: ThreadUsage(0, 0) for key in shares}, commands or {PID: "bank_tests"})
    after = TreeUsage({key: ThreadUsage(int(share * 1.5e9), 0) for key, share in shares.items()},
                      commands or {PID: "bank_tests"})
    return CpuWindow.between(before, after, 1.5)


def test_classify_identical_idle_lock_waits_as_a_deadlock_naming_the_functions() -> None:
    result = classify(window(IDLE), DEADLOCK, DEADLOCK)
    assert result.kind is StuckKind.DEADLOCK and result.same and not result.hot
    assert result.detail == "2 threads waiting for locks in transfer_funds, audit_ledger"
    assert [t.tid for t in result.threads] == [PID, 101, 102]


def test_classify_marks_an_idle_picture_whose_stacks_moved_as_not_the_same() -> None:
    moved = [ProcessStacks(PID, "bank_tests", [JOINING, thread(101, *LOCKED, own("transfer_funds")),
                                               thread(102, lib("futex_wait"), own("audit_ledger"), own("audit"))])]
    result = classify(window(IDLE), DEADLOCK, moved)
    assert not result.same
    assert classify(window(IDLE), None, DEADLOCK).same is False  # one capture proves nothing


def test_classify_hot_thread_repeating_its_function_is_a_loop_there() -> None:
    stacks = [ProcessStacks(PID, "solver", [thread(PID, own("solver::step"), own("solver::run"), own("main"))])]
    result = classify(window({(PID, PID): 0.98}, {PID: "solver"}), stacks, stacks)
    assert result.kind is StuckKind.INFINITE_LOOP and result.loop == "solver::step"
    assert result.detail == "98% CPU in solver::step" and result.hot == {(PID, PID): pytest.approx(0.98)}
    assert classify(window({(PID, PID): 0.98}, {PID: "solver"}), None, stacks).kind is None  # needs two captures


def test_classify_moderate_cpu_and_busy_compilers_are_work() -> None:
    assert classify(window({(PID, 101): 0.3}), DEADLOCK, DEADLOCK).kind is None
    building = classify(window({(200, 200): 1.0}, {200: "rustc"}), DEADLOCK, DEADLOCK)
    assert not building.hot and building.kind is None


def test_cpu_window_counts_waiting_for_a_cpu_as_demand() -> None:
    before = TreeUsage({(PID, PID): ThreadUsage(0, 0)})
    after = TreeUsage({(PID, PID): ThreadUsage(500_000_000, 1_000_000_000)})
    picture = CpuWindow.between(before, after, 2.0)
    assert picture.cpu == {(PID, PID): 0.25} and picture.demand == {(PID, PID): 0.75}
    assert picture.total == 0.25 and picture.hot() == {(PID, PID): 0.75}
