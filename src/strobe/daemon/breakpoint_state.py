"""What a session knows of its breakpoints and of its threads paused at them (daemon/breakpoints.py sets and
resumes them); kept on the LiveSession."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from strobe.daemon.symbols import TraceableFunction


@dataclass
class Breakpoint:
    id: str
    function: str
    condition: str | None
    hit_count: int | None
    sites: list[TraceableFunction] = field(default_factory=list)

    def answer(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "function": self.function}
        sites = [{"function": site.name, "address": hex(site.runtime_address), "file": site.file,
                  "line": site.info.line} for site in self.sites]
        out["locations"] = [{k: v for k, v in site.items() if v is not None} for site in sites]
        if self.sites:
            out["address"] = hex(self.sites[0].runtime_address)
        if self.condition is not None:
            out["condition"] = self.condition
        if self.hit_count is not None:
            out["hitCount"] = self.hit_count
        return out


@dataclass
class PausedThread:
    pid: int
    tid: int
    breakpoint_id: str
    since: float  # time.monotonic()
    event: dict[str, Any]  # the pause event's fields

    def answer(self) -> dict[str, Any]:
        out: dict[str, Any] = {"pid": self.pid, "threadId": self.tid, "breakpointId": self.breakpoint_id,
                               "pausedMs": int((time.monotonic() - self.since) * 1000)}
        for key in ("threadName", "function", "sourceFile", "line", "conditionError"):
            if self.event.get(key) is not None:
                out[key] = self.event[key]
        out["backtrace"] = [_frame_text(frame) for frame in self.event.get("backtrace", [])]
        if "locals" in self.event:
            out["locals"] = self.event["locals"]
        return out


@dataclass
class SessionBreakpoints:
    """One session's breakpoints and paused threads (kept on its LiveSession)."""

    breakpoints: dict[str, Breakpoint] = field(default_factory=dict)
    paused: dict[tuple[int, int], PausedThread] = field(default_factory=dict)
    next_id: int = 1


def _frame_text(frame: dict[str, Any]) -> str:
    where = frame.get("function") or frame.get("address", "?")
    if frame.get("file"):
        where += f" ({frame['file']}:{frame.get('line', '?')})"
    return str(where)
