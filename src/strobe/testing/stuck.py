"""Is a silent test stuck, and how? Silence alone proves nothing (a test may compute quietly for minutes), so
the detector combines three signals, all read from outside the process tree:

- output silence: nothing on stdout/stderr for SUSPECT_AFTER_S;
- CPU: per-thread run and run-queue time sampled every SAMPLE_INTERVAL_S (schedstat, so a spinning thread reads
  as "wants a whole core" even on a machine busy with other work);
- stacks: captured once silence and CPU look suspicious, compared with the next capture ~2 s later.

Idle tree + identical stacks -> confirmed, named after what the threads wait in (locks: deadlock; read/poll:
waiting on I/O; sleep: sleeping, which gets a longer grace). A thread using a full core whose innermost own
functions repeat across captures -> infinite loop in that function. Anything else (moderate CPU, changing
stacks, compilers at work) is treated as progress. Time is always passed in (`now`, seconds on any monotonic
clock), so the decision logic is testable with fake samples and no waiting.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from strobe.testing.adapters.base import MAX_SUGGESTIONS, StackKind, module_pattern
from strobe.testing.stacks import BUILD_TOOLS, ProcessStacks, ThreadStack, capture_tree, process_tree, read_stat

SAMPLE_INTERVAL_S = 2.0
SUSPECT_AFTER_S = 6.0  # silence before stacks are captured and a warning shows
CONFIRM_AFTER_S = 8.0  # silence before a consistent picture is confirmed as stuck
SLEEP_CONFIRM_AFTER_S = 30.0  # a sleeping test may be waiting on purpose: give it longer
IDLE_CORES = 0.05  # whole tree below this: idle
HOT_CORES = 0.6  # one thread wanting at least this much of a core: busy looping candidate
# Samples come on a fixed beat: a silence a hair short of a threshold at one sample must not cost a whole period.
SAMPLE_SLACK_S = SAMPLE_INTERVAL_S / 4
WINDOW_INTERVALS = 2  # CPU judged over the last ~4 s
LOOP_DEPTH = 3  # innermost own functions compared between captures of a hot thread


class StuckKind(StrEnum):
    DEADLOCK = "deadlock"
    INFINITE_LOOP = "infinite_loop"
    WAITING_ON_IO = "waiting_on_io"
    SLEEPING = "sleeping"
    HUNG = "hung"
    TIMEOUT = "timeout"


@dataclass(frozen=True)
class ThreadUsage:
    cpu_ns: int  # time spent running
    wait_ns: int = 0  # time runnable but waiting for a CPU (0 when the kernel does not say)


@dataclass
class TreeUsage:
    """One reading of a process tree: counters per (pid, tid), command and start time per pid."""

    threads: dict[tuple[int, int], ThreadUsage] = field(default_factory=dict)
    commands: dict[int, str] = field(default_factory=dict)
    starts: dict[int, int] = field(default_factory=dict)


_NS_PER_TICK = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def _thread_usage(pid: int, tid: int) -> ThreadUsage | None:
    try:
        run_ns, wait_ns, _ = Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()
        return ThreadUsage(int(run_ns), int(wait_ns))
    except (OSError, ValueError):
        pass
    try:  # no schedstat: utime + stime, in clock ticks
        fields = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rpartition(")")[2].split()
        return ThreadUsage((int(fields[11]) + int(fields[12])) * _NS_PER_TICK)
    except (OSError, ValueError, IndexError):
        return None


def read_tree_usage(root_pid: int) -> TreeUsage:
    """CPU counters of every thread of every live process in root_pid's tree."""
    return read_usage(process_tree(root_pid))


def read_usage(pids: Iterable[int]) -> TreeUsage:
    """CPU counters of every thread of these processes (those gone are left out)."""
    usage = TreeUsage()
    for pid in pids:
        stat = read_stat(pid)
        if stat is None:
            continue
        usage.commands[pid], usage.starts[pid] = stat.command, stat.start_ticks
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        for tid in tids:
            if (counters := _thread_usage(pid, tid)) is not None:
                usage.threads[(pid, tid)] = counters
    return usage


# ---- what a blocked thread waits in ---------------------------------------------------------------

class Wait(StrEnum):
    LOCK = "lock"
    IO = "io"
    SLEEP = "sleep"
    CHILD = "child"
    EVENT = "event"


_IO_CALLS = frozenset({"read", "libc_read", "read_nocancel", "readv", "pread64", "recv", "recvfrom", "recvmsg",
                       "poll", "ppoll", "select", "pselect", "pselect6", "epoll_wait", "epoll_pwait",
                       "epoll_pwait2", "accept", "accept4", "connect", "io_uring_enter", "uv__io_poll", "getline",
                       "fgets", "libc_recv", "libc_recvfrom", "libc_accept", "libc_connect"})
_SLEEP_CALLS = frozenset({"nanosleep", "clock_nanosleep", "libc_nanosleep", "usleep", "sleep", "pysleep",
                          "std::thread::sleep", "clock_nanosleep_time64"})
_CHILD_CALLS = frozenset({"wait4", "waitpid", "waitid", "libc_wait4", "libc_waitpid", "wait"})
_LOCK_WORDS = ("mutex_lock", "lll_lock_wait", "mutex_timedlock", "mutex_clocklock", "rwlock_rdlock",
               "rwlock_wrlock", "rwlock_timed", "rwlock_clock", "sem_wait", "sem_timedwait", "sem_clockwait",
               "acquire_lock", "lock_contended", "lock_slow", "RawMutex::lock", "RwLock::read", "RwLock::write")
_EVENT_WORDS = ("cond_wait", "cond_timedwait", "cond_clockwait", "pthread_join", "clockjoin", "timedjoin", "park",
                "futex", "sigsuspend", "sigwait", "sigtimedwait", "pause", "Condvar", "recv")


def _normalize(function: str) -> str:
    """`__GI___libc_read@GLIBC_2.2.5` -> `libc_read`; Rust's `::h<hash>` suffix dropped."""
    name = re.sub(r"::h[0-9a-f]{16}$", "", function.partition("@")[0])
    while True:
        stripped = name.lstrip("_")
        stripped = stripped.removeprefix("GI_")
        if stripped == name:
            return name
        name = stripped


def waits_in(thread: ThreadStack) -> Wait | None:
    """What a thread is blocked in, from its innermost frames up to its first own frame (None: nothing known,
    e.g. it is running)."""
    found: set[Wait] = set()
    for frame in thread.calls[:16]:
        if frame.is_user:
            break
        name = _normalize(frame.function)
        last = name.rpartition("::")[2]
        if any(word in name for word in _LOCK_WORDS):
            found.add(Wait.LOCK)
        elif name in _IO_CALLS or last in _IO_CALLS:
            found.add(Wait.IO)
        elif name in _SLEEP_CALLS or last in _SLEEP_CALLS:
            found.add(Wait.SLEEP)
        elif name in _CHILD_CALLS:
            found.add(Wait.CHILD)
        elif any(word in name for word in _EVENT_WORDS):
            found.add(Wait.EVENT)
    return next((wait for wait in Wait if wait in found), None)  # precedence: the enum's order


def relevant(processes: list[ProcessStacks]) -> list[ProcessStacks]:
    """The processes whose stacks say something: not wrappers (`sh`, `cargo`, …) nor processes whose main thread
    only waits for a child. All readable ones when that leaves none."""
    readable = [p for p in processes if p.threads]
    keep = [p for p in readable if not p.is_wrapper
            and not any(t.tid == p.pid and waits_in(t) is Wait.CHILD for t in p.threads)]
    return keep or readable


def suggest_traces(threads: Iterable[ThreadStack], kind: StackKind = StackKind.NATIVE) -> list[str]:
    """Trace patterns from the program's own frames, innermost first: a qualified name's module (`a::b::*`), an
    unqualified C function by name, a Python frame's file. Native frames of an interpreter (Python without
    py-spy, JS runtimes) name the runtime's internals, not the test's code, so they suggest nothing."""
    out: list[str] = []
    for thread in threads:
        for frame in thread.user_frames:
            is_script = bool(frame.location and re.search(r"\.(py|js|mjs|cjs|ts):\d+$", frame.location))
            if kind is not StackKind.NATIVE and not is_script:
                continue
            name = _normalize(frame.function).replace("::{{closure}}", "")
            pattern: str | None
            if is_script and frame.location:
                pattern = f"@file:{Path(frame.location.rpartition(':')[0]).name}"
            elif "::" in name:
                pattern = module_pattern(name.split("<")[0], "::")
            else:
                pattern = name if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) else None
            if pattern and pattern not in out:
                out.append(pattern)
    return out[:MAX_SUGGESTIONS]


# ---- classification of two captures and the CPU use between them --------------------------------

Key = tuple[int, int]  # (pid, tid)


@dataclass(frozen=True)
class CpuWindow:
    """CPU use of a tree's threads over an interval, as shares of a core: `cpu` is time run, `demand` time run
    or waiting to run (a spinning thread wants a whole core even on a busy machine)."""

    seconds: float
    cpu: dict[Key, float]
    demand: dict[Key, float]
    commands: dict[int, str] = field(default_factory=dict)

    @property
    def total(self) -> float:
        return sum(self.cpu.values())

    def hot(self) -> dict[Key, float]:
        """Threads wanting at least HOT_CORES of a core (none while a compiler is among them: that is building)."""
        hot = {key: share for key, share in self.demand.items() if share >= HOT_CORES}
        return {} if any(self.commands.get(pid) in BUILD_TOOLS for pid, _ in hot) else hot

    @classmethod
    def between(cls, before: TreeUsage, after: TreeUsage, seconds: float) -> CpuWindow:
        """The window between two readings `seconds` apart (threads only in `after` count from zero)."""
        cpu: dict[Key, float] = {}
        demand: dict[Key, float] = {}
        for key, counters in after.threads.items():
            old = before.threads.get(key, ThreadUsage(0, 0))
            ran = max(0, counters.cpu_ns - old.cpu_ns) / 1e9
            waited = max(0, counters.wait_ns - old.wait_ns) / 1e9
            cpu[key] = ran / seconds if seconds > 0 else 0.0
            demand[key] = min(1.0, (ran + waited) / seconds) if seconds > 0 else 0.0
        return cls(seconds, cpu, demand, dict(after.commands))


@dataclass(frozen=True)
class Classification:
    """What two captures and the CPU window between them say. `kind` None: working (moderate CPU, or a busy
    thread whose stacks moved). `same`: the two captures' stacks are identical (an idle tree is only stuck then)."""

    kind: StuckKind | None
    detail: str
    total_cpu: float
    hot: dict[Key, float]
    loop: str | None = None
    same: bool = False
    threads: tuple[ThreadStack, ...] = ()  # the hot threads, or the relevant threads of an idle tree


def same_stacks(first: list[ProcessStacks], second: list[ProcessStacks]) -> bool:
    def signature(processes: list[ProcessStacks]) -> dict[Key, tuple[str, ...]]:
        return {(p.pid, t.tid): t.functions for p in relevant(processes) for t in p.threads}

    return bool(signature(first)) and signature(first) == signature(second)


def idle_kind(threads: list[ThreadStack]) -> tuple[StuckKind, str]:
    """What an idle tree's threads wait in, and where (their innermost own functions)."""
    waits = [w for t in threads if (w := waits_in(t)) is not None]

    def where(wait: Wait) -> str:
        names = []
        for thread in threads:
            if waits_in(thread) is wait:
                own = thread.user_frames
                names.append(own[0].function if own else thread.name)
        return ", ".join(dict.fromkeys(names))

    if Wait.LOCK in waits and Wait.IO not in waits:
        count = waits.count(Wait.LOCK)
        threads_text = f"{count} thread{'s' if count > 1 else ''}"
        return StuckKind.DEADLOCK, f"{threads_text} waiting for locks in {where(Wait.LOCK)}"
    if Wait.IO in waits:
        return StuckKind.WAITING_ON_IO, f"blocked reading/polling in {where(Wait.IO)} (nothing arrives)"
    if Wait.SLEEP in waits and Wait.EVENT not in waits:
        return StuckKind.SLEEPING, f"sleeping in {where(Wait.SLEEP)}"
    if Wait.EVENT in waits:
        return StuckKind.HUNG, f"waiting for an event that never comes in {where(Wait.EVENT)}"
    return StuckKind.HUNG, "no thread is running"


def loop_function(first: list[ProcessStacks], second: list[ProcessStacks], hot: dict[Key, float]) -> str | None:
    """The innermost function a hot thread was in at both captures (within its LOOP_DEPTH innermost own
    frames; all frames when it has none of its own, e.g. spinning inside libc)."""
    before = {(p.pid, t.tid): t for p in first for t in p.threads}
    after = {(p.pid, t.tid): t for p in second for t in p.threads}
    for key in sorted(hot, key=lambda k: -hot[k]):
        if key not in before or key not in after:
            continue
        old, new = (t.user_frames or list(t.calls) for t in (before[key], after[key]))
        common = {f.function for f in old[:LOOP_DEPTH]}
        for frame in new[:LOOP_DEPTH]:
            if frame.function in common:
                return frame.function
    return None


def classify(window: CpuWindow, first: list[ProcessStacks] | None, second: list[ProcessStacks]) -> Classification:
    """The stuck detector's judgement of one picture: a hot thread whose innermost own function repeats across
    the captures is an infinite loop in it; an idle tree is named after what its threads wait in (a deadlock,
    I/O, sleep, an event), confirmed only when `same`. `first` None: one capture so far (no loop, never same).

        >>> classify(CpuWindow.between(before, after, 1.5), first, second).kind
        <StuckKind.DEADLOCK: 'deadlock'>
    """
    hot = window.hot()
    if hot:
        by_key = {(p.pid, t.tid): t for p in second for t in p.threads}
        hot_threads = tuple(by_key[key] for key in sorted(hot, key=lambda k: -hot[k]) if key in by_key)
        loop = loop_function(first, second, hot) if first is not None else None
        share = f"{max(hot.values()) * 100:.0f}% CPU"
        if loop is not None:
            return Classification(StuckKind.INFINITE_LOOP, f"{share} in {loop}", window.total, hot, loop,
                                  threads=hot_threads)
        top = hot_threads[0].user_frames[:1] if hot_threads else []
        return Classification(None, share + (f" in {top[0].function}" if top else ""), window.total, hot,
                              threads=hot_threads)
    if window.total >= IDLE_CORES:
        return Classification(None, f"{window.total * 100:.0f}% CPU", window.total, hot)
    threads = tuple(t for p in relevant(second) for t in p.threads)
    kind, detail = idle_kind(list(threads))
    same = first is not None and same_stacks(first, second)
    return Classification(kind, detail, window.total, hot, same=same, threads=threads)


# ---- the detector ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class StuckWarning:
    """Shown in progress while a suspicion builds up (the runner adds the current test's name)."""

    idle_ms: int
    diagnosis: str
    suggested_traces: list[str]


@dataclass(frozen=True)
class StuckVerdict:
    """Confirmed: what it is, and every thread's stack captured before the tree is killed."""

    kind: StuckKind
    diagnosis: str
    idle_ms: int
    processes: list[ProcessStacks]
    suggested_traces: list[str]

    def threads(self) -> list[dict[str, Any]]:
        """StuckTest.threads: [{name, stack}], each name saying which process the thread belongs to."""
        multi = len([p for p in self.processes if p.threads]) > 1
        out: list[dict[str, Any]] = []
        for proc in self.processes:
            for thread in proc.threads:
                where = f"pid {proc.pid} {proc.command}" if multi or thread.name != proc.command else ""
                name = f"{thread.name} (tid {thread.tid}{', ' + where if where else ''})"
                out.append({"name": name, "stack": thread.frames})
        return out


@dataclass
class _Interval:
    seconds: float
    end: float
    cpu: dict[tuple[int, int], float]  # core-seconds run per thread
    demand: dict[tuple[int, int], float]  # core-seconds run or waiting to run


UsageReader = Callable[[int], TreeUsage]
StackReader = Callable[[int, StackKind, bool], list[ProcessStacks]]  # (root pid, kind, detail)


class StuckDetector:
    """Fed by the runner: output_seen() on every output line, sample() every SAMPLE_INTERVAL_S. sample() returns
    a verdict once stuck is confirmed; `warning` holds the current suspicion meanwhile."""

    def __init__(self, root_pid: int, now: float, kind: StackKind = StackKind.NATIVE, *,
                 usage_reader: UsageReader = read_tree_usage, stack_reader: StackReader = capture_tree,
                 suspect_after_s: float = SUSPECT_AFTER_S, confirm_after_s: float = CONFIRM_AFTER_S,
                 sleep_confirm_after_s: float = SLEEP_CONFIRM_AFTER_S, slack_s: float = SAMPLE_SLACK_S) -> None:
        self.root_pid, self.kind = root_pid, kind
        self._read_usage, self._read_stacks = usage_reader, stack_reader
        self.suspect_after_s, self.confirm_after_s = suspect_after_s, confirm_after_s
        self.sleep_confirm_after_s, self.slack_s = sleep_confirm_after_s, slack_s
        self.last_output = now
        self.warning: StuckWarning | None = None
        self.verdict: StuckVerdict | None = None
        self.seen: dict[int, int] = {}  # every pid ever in the tree -> its start time, to kill escapees later
        self._usage: TreeUsage | None = None
        self._last_sample = now
        self._intervals: list[_Interval] = []
        self._captures: list[tuple[float, list[ProcessStacks]]] = []
        self._unchanged_since: float | None = None  # first of the consecutive identical captures

    def output_seen(self, now: float) -> None:
        self.last_output = max(self.last_output, now)

    def sample(self, now: float) -> StuckVerdict | None:
        usage = self._read_usage(self.root_pid)
        self.seen.update(usage.starts)
        self._add_interval(usage, now)
        idle = now - self.last_output
        if self.verdict:
            return self.verdict
        if idle < self.suspect_after_s - self.slack_s:
            self._reset()
            return None
        # the last few intervals of the silence: a test that computed, then deadlocked, reads as idle soon
        window = [i for i in self._intervals if i.end - i.seconds >= self.last_output - 1e-6][-WINDOW_INTERVALS:]
        seconds = sum(i.seconds for i in window)
        if seconds <= 0:
            return None
        cpu: dict[Key, float] = {}
        demand: dict[Key, float] = {}
        for interval in window:
            for key, value in interval.cpu.items():
                cpu[key] = cpu.get(key, 0.0) + value / seconds
            for key, value in interval.demand.items():
                demand[key] = demand.get(key, 0.0) + value / seconds
        picture = CpuWindow(seconds, cpu, demand, usage.commands)
        if not picture.hot() and picture.total >= IDLE_CORES:
            self._reset()  # working at moderate speed: progress, as far as anyone can tell
            return None
        capture = (now, self._read_stacks(self.root_pid, self.kind, False))
        if not self._captures or not same_stacks(self._captures[-1][1], capture[1]):
            self._unchanged_since = None
        elif self._unchanged_since is None:
            self._unchanged_since = self._captures[-1][0]
        self._captures = [*self._captures[-1:], capture]
        first = self._captures[0][1] if len(self._captures) == 2 else None
        result = classify(picture, first, capture[1])
        if result.hot:
            self.verdict = self._judge_hot(result, idle)
        else:
            self.verdict = self._judge_idle(result, idle, now)
        return self.verdict

    def timeout_verdict(self, limit_s: float, what: str, now: float) -> StuckVerdict:
        """The hard time limit ran out: stacks are captured all the same, for the report."""
        processes = self._read_stacks(self.root_pid, self.kind, True)
        threads = [t for p in relevant(processes) for t in p.threads]
        minutes = f"{limit_s / 60:g} min" if limit_s >= 60 else f"{limit_s:g} s"
        return StuckVerdict(StuckKind.TIMEOUT, f"Timed out: still running after {minutes}, the limit for {what}",
                            int((now - self.last_output) * 1000), processes, suggest_traces(threads, self.kind))

    # ---- internals ----

    def _for_report(self, fallback: list[ProcessStacks]) -> list[ProcessStacks]:
        """Confirmed: one more capture, with source lines and inlined frames, for the report."""
        return self._read_stacks(self.root_pid, self.kind, True) or fallback

    def _reset(self) -> None:
        self.warning, self._captures, self._unchanged_since = None, [], None

    def _add_interval(self, usage: TreeUsage, now: float) -> None:
        previous, self._usage = self._usage, usage
        seconds, self._last_sample = now - self._last_sample, now
        if previous is None or seconds <= 0:
            return
        cpu: dict[tuple[int, int], float] = {}
        demand: dict[tuple[int, int], float] = {}
        for key, counters in usage.threads.items():
            before = previous.threads.get(key, ThreadUsage(0, 0))
            ran = max(0, counters.cpu_ns - before.cpu_ns) / 1e9
            cpu[key] = ran
            demand[key] = min(seconds, ran + max(0, counters.wait_ns - before.wait_ns) / 1e9)
        self._intervals = [*self._intervals[-15:], _Interval(seconds, now, cpu, demand)]

    def _judge_idle(self, result: Classification, idle: float, now: float) -> StuckVerdict | None:
        _, latest = self._captures[-1]
        threads = list(result.threads)
        same_since = self._unchanged_since
        kind, detail = result.kind or StuckKind.HUNG, result.detail
        cpu = f"{result.total_cpu * 100:.0f}% CPU"
        traces = suggest_traces(threads, self.kind)
        if same_since is None:
            self.warning = StuckWarning(int(idle * 1000), f"No output for {idle:.0f}s, {cpu}; {detail}", traces)
            return None
        unchanged = now - same_since
        self.warning = StuckWarning(int(idle * 1000), f"{cpu}, stacks unchanged {unchanged:.0f}s; {detail}", traces)
        limit = self.sleep_confirm_after_s if kind is StuckKind.SLEEPING else self.confirm_after_s
        if idle < limit - self.slack_s:
            return None
        titles = {StuckKind.DEADLOCK: "Deadlock", StuckKind.WAITING_ON_IO: "Waiting on I/O",
                  StuckKind.SLEEPING: "Sleeping", StuckKind.HUNG: "Hung"}
        diagnosis = f"{titles[kind]}: {cpu}, identical stacks for {unchanged:.0f}s, no output for {idle:.0f}s; {detail}"
        return StuckVerdict(kind, diagnosis, int(idle * 1000), self._for_report(latest), traces)

    def _judge_hot(self, result: Classification, idle: float) -> StuckVerdict | None:
        latest = self._captures[-1][1]
        traces = suggest_traces(result.threads, self.kind)
        share = max(result.hot.values())
        if result.loop is None:
            self.warning = StuckWarning(int(idle * 1000), f"No output for {idle:.0f}s, {result.detail}", traces)
            return None
        loop = result.loop
        self.warning = StuckWarning(int(idle * 1000), f"{share * 100:.0f}% CPU, stacks repeat in {loop}", traces)
        if idle < self.confirm_after_s - self.slack_s:
            return None
        diagnosis = f"Infinite loop: {share * 100:.0f}% CPU in {loop}, no output for {idle:.0f}s"
        return StuckVerdict(StuckKind.INFINITE_LOOP, diagnosis, int(idle * 1000), self._for_report(latest), traces)
