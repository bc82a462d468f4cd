"""Every thread's stack of a running session, with a diagnosis (debug_stacks): "why is it stuck, now".

Read from outside like a stuck test (testing/stacks.py: eu-stack, gdb as fallback, py-spy for CPython), so it
works while the program hangs and costs it only the moments eu-stack is attached. Two quick captures WINDOW_S
apart, the threads' CPU use between them, then one capture with source lines for the answer; the stuck
detector's judgement (testing/stuck.classify) names what the picture is. Frida's own threads (its agent in every
traced process) are set apart and left out of the judgement; a thread stopped at a Strobe breakpoint reads as
paused there, with the backtrace the agent took when it stopped (an outside unwinder cannot walk through the
agent's frames a paused thread waits in).

    stacks = await session_stacks(manager.sessions, "app-2026-02-05-14h32")
    stacks.diagnosis.kind  # "deadlock" | "busy_loop" | "waiting_on_io" | "sleeping" | "waiting" | "running" | …
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from strobe.daemon.registry import LiveSessions
from strobe.errors import ProcessExited
from strobe.testing.adapters.base import StackKind
from strobe.testing.stacks import (
    MAX_FRAMES,
    Frame,
    ProcessStacks,
    ThreadStack,
    capture_stacks,
    command_name,
    is_python,
    python_stacks,
)
from strobe.testing.stuck import (
    HOT_CORES,
    Classification,
    CpuWindow,
    Key,
    StuckKind,
    Wait,
    classify,
    read_usage,
    suggest_traces,
    waits_in,
)

WINDOW_S = 1.5  # between the two captures the judgement compares, CPU measured over it
MAX_THREADS = 64  # program threads shown with their stacks, over all processes (the rest are counted)
_FRIDA_MODULES = ("frida-agent", "frida-gadget", "/frida-")
_FRIDA_NAMES = ("gum-", "frida", "pool-frida", "strobe-")  # strobe-tracer: Strobe's Python tracer's helper
# where CPython's eval loop and call machinery start, under the C function a Python frame called
_INTERPRETER = ("_PyEval", "PyEval", "_PyObject_", "PyObject_", "cfunction_", "method_vectorcall", "_PyFunction",
                "trace_call_function", "do_call_core", "call_function")
_STATES = {"R": "running", "S": "waiting", "D": "waiting (uninterruptible, usually disk I/O)", "T": "stopped",
           "t": "stopped by a debugger", "Z": "exited", "X": "exited"}
_KINDS = {StuckKind.DEADLOCK: "deadlock", StuckKind.WAITING_ON_IO: "waiting_on_io", StuckKind.SLEEPING: "sleeping",
          StuckKind.HUNG: "waiting", StuckKind.INFINITE_LOOP: "busy_loop"}


@dataclass(frozen=True)
class Paused:
    """A thread stopped at a Strobe breakpoint (or at the end of a step): which, and its backtrace as text."""

    breakpoint: str
    backtrace: tuple[str, ...]


@dataclass(frozen=True)
class LiveThread:
    tid: int
    name: str
    state: str  # "running", "waiting", … or "paused at breakpoint bp-1"
    cpu: float  # share of a core over the window (1.0: a whole core)
    stack: ThreadStack
    strobe: bool  # one of Frida's own threads (Strobe's agent), not the program's
    waits: Wait | None = None


@dataclass(frozen=True)
class LiveProcess:
    pid: int
    command: str
    threads: list[LiveThread] = field(default_factory=list)
    error: str | None = None
    python: bool = False  # its Python threads show interpreter frames (py-spy)


@dataclass(frozen=True)
class Diagnosis:
    kind: str  # deadlock, busy_loop, waiting_on_io, sleeping, waiting, paused, running, unknown
    summary: str
    threads: list[tuple[int, LiveThread]]  # (pid, thread) the diagnosis is about
    suggested_traces: list[str]


@dataclass(frozen=True)
class SessionStacks:
    session_id: str
    processes: list[LiveProcess]
    diagnosis: Diagnosis
    window_s: float
    python_frames: str | None  # why Python frames are missing for a CPython process, when they are


def is_strobe_thread(thread: ThreadStack) -> bool:
    """Frida's threads: their frames are in its agent library and none is the program's; or Frida named them."""
    in_frida = any(frame.module and any(m in frame.module for m in _FRIDA_MODULES) for frame in thread.calls)
    if in_frida and not thread.user_frames:
        return True
    return thread.name.startswith(_FRIDA_NAMES)


def with_native_calls(python: ThreadStack, native: ThreadStack) -> ThreadStack:
    """A Python thread's interpreter frames under the native calls it is in (a lock's wait, read(), sleep): the
    native stack's innermost frames down to the interpreter's own (its eval loop, call machinery). As is when
    py-spy already interleaved them (--native)."""
    if any(frame.module and not frame.location for frame in python.calls):
        return python
    leaf = []
    for frame in native.calls:
        if frame.function.startswith(_INTERPRETER):
            break
        leaf.append(frame)
    return ThreadStack(python.tid, python.name, (*leaf, *python.calls)[:MAX_FRAMES])


async def session_stacks(sessions: LiveSessions, session_id: str, window_s: float = WINDOW_S) -> SessionStacks:
    """The stacks and diagnosis of a running session; SESSION_NOT_FOUND / PROCESS_EXITED otherwise. The captures
    run in a worker thread: the event loop keeps serving other calls meanwhile."""
    live = sessions.get(session_id)
    pids = [process.pid for process in live.live_processes()] if live is not None else []
    if live is None or not pids:
        record = await sessions.record(session_id)  # SESSION_NOT_FOUND when there is none
        code = "unknown" if record.exit_code is None else record.exit_code
        raise ProcessExited(
            f"The program of session '{session_id}' has exited (code: {code}); there are no threads left to read. "
            f"Use debug_query({{sessionId: '{session_id}'}}) for its crash report and events, or launch it again.")
    paused = {key: Paused(p.breakpoint_id or "a step", tuple(p.answer()["backtrace"]))
              for key, p in live.breakpoints.paused.items()}
    return await asyncio.to_thread(capture_session, session_id, pids, paused, window_s, time.sleep,
                                   lambda: live.output_bytes)


def capture_session(session_id: str, pids: list[int], paused: dict[Key, Paused], window_s: float = WINDOW_S,
                    wait: Callable[[float], None] = time.sleep, output: Callable[[], int] = lambda: 0
                    ) -> SessionStacks:
    """Blocking: two quick captures `window_s` apart with CPU counters around them, one detailed capture.
    `output` counts the bytes the program has written so far: output during the window means progress."""
    python = {pid for pid in pids if is_python(pid)}
    spy_missing = False

    def read(pid: int, detail: bool) -> list[ThreadStack]:
        nonlocal spy_missing
        native = capture_stacks(pid, StackKind.NATIVE, detail=detail)
        if pid not in python:
            return native
        spied = {t.tid: t for t in python_stacks(pid)}
        spy_missing = spy_missing or not spied
        merged = [with_native_calls(spied.pop(t.tid), t) if t.tid in spied else t for t in native]
        return merged + list(spied.values())

    before, started, written = read_usage(pids), time.monotonic(), output()
    first = [ProcessStacks(pid, command_name(pid), read(pid, False)) for pid in pids]
    wait(max(0.0, started + window_s - time.monotonic()))
    after, seconds = read_usage(pids), time.monotonic() - started
    second = [ProcessStacks(pid, command_name(pid), read(pid, False)) for pid in pids]
    shown = [ProcessStacks(pid, command_name(pid), read(pid, True)) for pid in pids]
    window = CpuWindow.between(before, after, seconds)
    written = output() - written

    strobe = {(p.pid, t.tid) for p in [*first, *second, *shown] for t in p.threads
              if is_strobe_thread(t)} - set(paused)  # a paused thread waits inside the agent: it is the program's
    left_out = strobe | set(paused)
    result = classify(_without(window, left_out), _program(first, left_out), _program(second, left_out))
    processes = [_process(p, window, strobe, paused, p.pid in python) for p in shown]
    why_no_python = None
    if python and spy_missing:
        why_no_python = ("Python frames unavailable: py-spy is not installed or could not read the interpreter; "
                         "Python threads show the interpreter's native frames only")
    diagnosis = _diagnose(result, processes, paused, seconds, written)
    return SessionStacks(session_id, processes, diagnosis, seconds, why_no_python)


def _without(window: CpuWindow, keys: set[Key]) -> CpuWindow:
    return CpuWindow(window.seconds, {k: v for k, v in window.cpu.items() if k not in keys},
                     {k: v for k, v in window.demand.items() if k not in keys}, window.commands)


def _program(processes: list[ProcessStacks], left_out: set[Key]) -> list[ProcessStacks]:
    """The program's own threads (not Frida's, not paused at a breakpoint)."""
    return [ProcessStacks(p.pid, p.command, [t for t in p.threads if (p.pid, t.tid) not in left_out], p.error)
            for p in processes]


def _state(pid: int, tid: int) -> str:
    try:
        text = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
    except OSError:
        return "exited"
    letter = text.rpartition(")")[2].split()[:1]
    return _STATES.get(letter[0], letter[0]) if letter else "unknown"


def _process(stacks: ProcessStacks, window: CpuWindow, strobe: set[Key], paused: dict[Key, Paused],
             python: bool) -> LiveProcess:
    threads = []
    for thread in stacks.threads:
        key = (stacks.pid, thread.tid)
        stop = paused.get(key)
        state = f"paused at breakpoint {stop.breakpoint}" if stop is not None else _state(*key)
        if stop is not None and stop.backtrace:  # the agent's own unwind, from where the thread stopped
            thread = ThreadStack(thread.tid, thread.name, tuple(Frame(text) for text in stop.backtrace[:MAX_FRAMES]))
        threads.append(LiveThread(thread.tid, thread.name, state, window.cpu.get(key, 0.0), thread, key in strobe,
                                  None if key in strobe or key in paused else waits_in(thread)))
    error = None if threads else ("could not read its stacks (it may have exited, or another debugger is attached: "
                                  "threads held by a breakpoint's allThreads stop cannot be read)")
    return LiveProcess(stacks.pid, stacks.command, threads, error, python)


def _diagnose(result: Classification, processes: list[LiveProcess], paused: dict[Key, Paused],
              seconds: float, written: int = 0) -> Diagnosis:
    program = [(p.pid, t) for p in processes for t in p.threads if not t.strobe and (p.pid, t.tid) not in paused]
    at_breakpoints = [(p.pid, t) for p in processes for t in p.threads if (p.pid, t.tid) in paused]
    cpu = f"{result.total_cpu * 100:.0f}% CPU"
    by_key = {(pid, t.tid): (pid, t) for pid, t in program}
    traces = suggest_traces([t.stack for _, t in program if t.waits is not None or t.cpu >= HOT_CORES])
    if not program and at_breakpoints:
        return Diagnosis("paused", f"Every thread of the program is paused at a breakpoint ({len(at_breakpoints)}); "
                         "debug_continue resumes them.", at_breakpoints, [])
    if not program:
        return Diagnosis("unknown", "No thread of the program could be read.", [], [])
    note = f" ({len(at_breakpoints)} thread(s) paused at breakpoints, not counted)" if at_breakpoints else ""
    if result.kind is StuckKind.INFINITE_LOOP:
        hot = [by_key[k] for k in sorted(result.hot, key=lambda k: -result.hot[k]) if k in by_key]
        name = f"thread {hot[0][1].name} (tid {hot[0][1].tid})" if hot else "a thread"
        summary = (f"Busy loop: {name} uses {max(result.hot.values()) * 100:.0f}% of a core and was in "
                   f"{result.loop} at both captures {seconds:.1f} s apart: an infinite (or very long) loop in "
                   f"{result.loop}{note}.")
        return Diagnosis("busy_loop", summary, hot, traces or ([result.loop] if result.loop else []))
    if result.hot:
        hot = [by_key[k] for k in result.hot if k in by_key]
        return Diagnosis("running", f"Running: {result.detail}, and its stacks moved between the captures "
                         f"(computing, not stuck in one place){note}.", hot, traces)
    if result.kind is None:
        return Diagnosis("running", f"Running normally: {cpu}, nothing looks stuck{note}.", [], traces)
    if not result.same:
        return Diagnosis("running", f"Mostly idle ({cpu}) but its stacks changed between the captures: it is making "
                         f"progress, slowly or in bursts; now {result.detail}{note}.", [], traces)
    if written and result.kind is not StuckKind.DEADLOCK:  # quiet stacks, but it wrote: a loop that sleeps or waits
        return Diagnosis("running", f"Running: it wrote {written} bytes of output during the {seconds:.1f} s window, "
                         f"so it is making progress between waits; now {result.detail}{note}.", [], traces)
    waiting = [(pid, t) for pid, t in program if t.waits is not None and t.waits is not Wait.CHILD]
    titles = {StuckKind.DEADLOCK: "Deadlock", StuckKind.WAITING_ON_IO: "Waiting on I/O",
              StuckKind.SLEEPING: "Sleeping", StuckKind.HUNG: "Waiting"}
    assert result.kind in titles
    if result.kind is StuckKind.DEADLOCK:
        waiting = [(pid, t) for pid, t in waiting if t.waits is Wait.LOCK]
    summary = f"{titles[result.kind]}: {cpu}, identical stacks {seconds:.1f} s apart; {result.detail}{note}."
    return Diagnosis(_KINDS[result.kind], summary, waiting, traces)
