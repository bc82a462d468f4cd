"""What a session knows of its breakpoints and of its threads paused at them (daemon/breakpoints.py sets and
resumes them); kept on the LiveSession."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from strobe.daemon.crashes import crash_row
from strobe.daemon.symbols import TraceableFunction
from strobe.instrument.protocol import CrashFrame, LogpointHit
from strobe.instrument.thread_stops import ThreadHold
from strobe.store.schema import EventKind


@dataclass(frozen=True)
class Site:
    """One address a breakpoint is armed at: a function's entry, or the first instruction of a copy of a line."""

    kind: str  # "entry" or "line": the agent's BreakpointSpec kind
    address: int  # where it is loaded
    function: str | None
    file: str | None
    line: int | None
    traceable: TraceableFunction | None = None  # an entry's function (its parameters are the condition's names)
    module: str | None = None  # a line's module and where it is loaded (runtime = static + slide)
    slide: int = 0
    runtime: str = "native"  # "cpython": a Python code object's start or a .py line (`address` is the line then)

    def answer(self) -> dict[str, Any]:
        address = hex(self.address) if self.runtime == "native" else None
        out = {"function": self.function, "address": address, "file": self.file, "line": self.line}
        return {k: v for k, v in out.items() if v is not None}


@dataclass
class Breakpoint:
    id: str
    target: str  # what it was asked for: a function pattern, or "file:line"
    condition: str | None
    hit_count: int | None
    sites: list[Site] = field(default_factory=list)
    log: str | None = None  # a logpoint's message template (the thread is not stopped)
    function: str | None = None  # the pattern, for a function breakpoint
    file: str | None = None  # the source file (as its line table names it) and line, for a line breakpoint
    line: int | None = None
    all_threads: bool = False  # a stop stops the program's other threads too

    @property
    def python(self) -> bool:
        """Set in Python code (the interpreter's tracer stops it), not native code."""
        return bool(self.sites) and self.sites[0].runtime != "native"

    def answer(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id}
        if self.function is not None:
            out["function"] = self.function
        if self.file is not None:
            out.update(file=self.file, line=self.line)
        out["locations"] = [site.answer() for site in self.sites]
        if self.sites and self.sites[0].runtime == "native":
            out["address"] = hex(self.sites[0].address)
        elif self.sites:
            out["runtime"] = "python"
        if self.log is not None:
            out["message"] = self.log
        if self.condition is not None:
            out["condition"] = self.condition
        if self.hit_count is not None:
            out["hitCount"] = self.hit_count
        if self.all_threads:
            out["allThreads"] = True
        return out


@dataclass
class PausedThread:
    pid: int
    tid: int
    breakpoint_id: str  # "" at the end of a step
    since: float  # time.monotonic()
    event: dict[str, Any]  # the pause event's fields
    pc: int = 0  # where it is (runtime)
    entry: bool = False  # at a function's first instruction (its frame not set up yet)
    frames: list[CrashFrame] = field(default_factory=list)  # as the agent unwound them: the pc, then return addresses
    python: bool = False  # stopped in Python code by the interpreter's tracer (no native frames, pc 0)

    def answer(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pid": self.pid, "threadId": self.tid,
                               "pausedMs": int((time.monotonic() - self.since) * 1000)}
        if self.breakpoint_id:
            out["breakpointId"] = self.breakpoint_id
        for key in ("step", "threadName", "function", "sourceFile", "line", "conditionError", "otherThreads"):
            if self.event.get(key) is not None:
                out[key] = self.event[key]
        out["backtrace"] = [_frame_text(frame) for frame in self.event.get("backtrace", [])]
        for key in ("arguments", "locals", "skippedLines"):
            if key in self.event:
                out[key] = self.event[key]
        return out


@dataclass
class SessionBreakpoints:
    """One session's breakpoints and paused threads (kept on its LiveSession)."""

    breakpoints: dict[str, Breakpoint] = field(default_factory=dict)
    paused: dict[tuple[int, int], PausedThread] = field(default_factory=dict)
    waiters: dict[tuple[int, int], asyncio.Future[PausedThread]] = field(default_factory=dict)  # steps under way
    holds: dict[int, ThreadHold] = field(default_factory=dict)  # by pid: other threads stopped (allThreads)
    next_id: int = 1


def _frame_text(frame: dict[str, Any]) -> str:
    where = frame.get("function") or frame.get("address", "?")
    if frame.get("file"):
        where += f" ({frame['file']}:{frame.get('line', '?')})"
    return str(where)


def logpoint_row(session: int, pid: int, hit: LogpointHit, start_ns: int) -> tuple[Any, ...]:
    """An events row for a logpoint's line: its text; which logpoint and the thread's name in the extra JSON."""
    event: dict[str, Any] = {"text": hit.text, "logpointId": hit.id.split("#", 1)[0]}
    if hit.threadName:
        event["threadName"] = hit.threadName
    return crash_row(session, pid, hit.tid, hit.sec * 1_000_000_000 + hit.nsec - start_ns, event, EventKind.LOGPOINT)
