"""How the tracer hooks the interpreter (see tracer.py): sys.monitoring on 3.12+, sys.settrace on 3.11.

Executed in the target after outbox.py, in the same private module. A backend calls the tracer's `discover`,
`enter`, `leave` and `open_call`, and its breakpoints' `discover`, `line`, `entered` and `started` (breaks.py); it
never lets an exception reach the program (failures go to `out.error`).
"""

import _thread
import sys
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import CodeType, FrameType
    from typing import Any

    from .breaks import _OWN_FILE, Step
    from .tracer import _GENERATOR_LIKE, Tracer

_RETURN_VALUE_311, _YIELD_VALUE_311, _RESUME_311 = 83, 86, 151  # 3.11's opcodes; only the 3.11 backend reads them
_get_ident = _thread.get_ident  # (the modules share one namespace: no name twice)


class Monitoring:
    """3.12+: sys.monitoring under a free tool id (PROFILER_ID first). PY_START, PY_UNWIND and PY_THROW are global
    (the latter two cannot be local); PY_RETURN, PY_YIELD, PY_RESUME are set on each target's code object.
    Breakpoints: PY_START and PY_RESUME are global while any is set (to find the code objects that hold them), LINE
    is set on those code objects only, and for a step on the code objects the stepping thread may stop in."""

    name = "sys.monitoring"

    def __init__(self, tracer: "Tracer") -> None:
        self.t, self.b, self.tool = tracer, tracer.breaks, -1
        self.mon = sys.monitoring  # type: ignore[attr-defined,unused-ignore]  # mypy targets 3.11
        events = self.mon.events
        self.local, self.line = events.PY_RETURN | events.PY_YIELD | events.PY_RESUME, events.LINE
        self.callbacks = ((events.PY_START, self._start), (events.PY_RESUME, self._resume),
                          (events.PY_RETURN, self._return), (events.PY_YIELD, self._yield),
                          (events.PY_UNWIND, self._unwind), (events.PY_THROW, self._throw),
                          (events.LINE, self._line))
        self.globals = events.PY_START | events.PY_UNWIND | events.PY_THROW
        self.finding = events.PY_START | events.PY_RESUME
        self.step_codes: dict[int, CodeType] = {}  # given LINE events for the steps under way

    def install(self) -> str | None:
        mon = self.mon
        for tool in [mon.PROFILER_ID, *range(6)]:
            if mon.get_tool(tool) is None:
                mon.use_tool_id(tool, "strobe")
                self.tool = tool
                break
        else:
            used = ", ".join(f"{i}: {mon.get_tool(i)}" for i in range(6))
            return f"sys.monitoring: every tool id is in use ({used}); nothing can be traced in this process"
        for event, callback in self.callbacks:
            mon.register_callback(self.tool, event, callback)
        return None

    def refresh(self, code: "CodeType") -> None:
        """Set the local events `code` needs now: a target's, LINE for breakpoints or steps."""
        key, events = id(code), 0
        if key in self.t.live:
            events |= self.local
        site = self.b.sites.get(key)
        if key in self.step_codes or (site is not None and site.lines):
            events |= self.line
        self.mon.set_local_events(self.tool, code, events)

    def _set_globals(self) -> None:
        events = self.globals if self.t.by_name else 0
        if self.b.armed or self.b.steps:
            events |= self.finding
        self.mon.set_events(self.tool, events)
        self.mon.restart_events()  # codes DISABLEd before may be targets or sites now

    def retarget(self) -> None:
        if self.tool < 0:
            return
        t = self.t
        if not t.by_name:
            codes = [entry.code for entry in t.live.values()]
            t.live.clear()
            for code in codes:
                self.refresh(code)
        self._set_globals()

    def rearm(self, old: "list[CodeType]", frames: "list[FrameType]") -> None:
        """After the breakpoints changed: LINE for the sites found (running frames' code objects included), off for
        the former sites."""
        if self.tool < 0:
            return
        for code in old + [site.code for site in list(self.b.sites.values())]:
            self.refresh(code)
        self._set_globals()

    def watch(self, code: "CodeType") -> None:
        if self.tool >= 0:
            self.refresh(code)

    def begin_step(self, step: "Step", frame: "FrameType") -> None:
        """LINE on the code objects where the step may end (the paused frame's and its callers'), nothing
        DISABLEd left in them; `step_into` adds the code objects an into step enters."""
        if self.tool < 0:
            return
        at: FrameType | None = frame if step.kind != "out" else frame.f_back
        while at is not None:
            code = at.f_code
            if id(code) not in self.step_codes and code.co_filename != _OWN_FILE:
                self.step_codes[id(code)] = code
                self.refresh(code)
            at = at.f_back
        self._set_globals()

    def step_into(self, code: "CodeType") -> None:
        if self.tool >= 0 and id(code) not in self.step_codes:
            self.step_codes[id(code)] = code
            self.refresh(code)

    def end_step(self, step: "Step") -> None:
        if not self.b.steps:
            self.steps_cleared()

    def steps_cleared(self) -> None:
        codes = list(self.step_codes.values())
        self.step_codes.clear()
        if self.tool >= 0:
            for code in codes:
                self.refresh(code)
            self._set_globals()

    def uninstall(self) -> None:
        if self.tool < 0:
            return
        mon = self.mon
        mon.set_events(self.tool, 0)
        for code in ([entry.code for entry in self.t.live.values()] + [site.code for site in self.b.sites.values()]
                     + list(self.step_codes.values())):
            mon.set_local_events(self.tool, code, 0)
        for event, _ in self.callbacks:
            mon.register_callback(self.tool, event, None)
        mon.free_tool_id(self.tool)
        self.tool = -1

    def _start(self, code: "CodeType", offset: int) -> object:
        t, b = self.t, self.b
        try:
            entry = t.live.get(id(code))
            if entry is None:
                entry = t.discover(code)
                if entry is not None:
                    self.refresh(code)
            site = b.discover(code) if b.armed else None
            if entry is not None and not entry.active:
                entry = None
            if entry is None and site is None:
                if b.into:
                    b.started(code)
                    return None  # kept: a stepping thread may enter this code later
                if t.counting:
                    t.counts[code.co_qualname] = t.counts.get(code.co_qualname, 0) + 1
                return self.mon.DISABLE
            if _get_ident() in t.quiet:
                return None
            frame = sys._getframe(1)
            if entry is not None:
                t.enter(entry, frame, False)
            if site is not None and site.entry:
                b.entered(frame, site)
            if b.into:
                b.started(code)
        except Exception as exc:
            t.out.error("py_start", exc)
        return None

    def _resume(self, code: "CodeType", offset: int) -> object:
        return self._resumed(code, "py_resume", True)

    def _throw(self, code: "CodeType", offset: int, exc: BaseException) -> object:
        self._resumed(code, "py_throw", False)
        return None  # PY_THROW cannot be disabled

    def _resumed(self, code: "CodeType", where: str, local: bool) -> object:
        t, b = self.t, self.b
        try:
            site = b.discover(code) if b.armed else None
            if b.into:
                b.started(code)
            entry = t.live.get(id(code))
            if entry is None or not entry.active:
                return self.mon.DISABLE if local and site is None and not b.into else None
            if _get_ident() not in t.quiet:
                t.enter(entry, None, True)
        except Exception as exc:
            t.out.error(where, exc)
        return None

    def _return(self, code: "CodeType", offset: int, value: object) -> object:
        return self._left(code, "return", value, "py_return")

    def _yield(self, code: "CodeType", offset: int, value: object) -> object:
        return self._left(code, "yielded", value, "py_yield")

    def _left(self, code: "CodeType", key: str, value: object, where: str) -> object:
        t = self.t
        try:
            entry = t.live.get(id(code))
            if entry is None:
                return self.mon.DISABLE
            if not t.leave(code, entry.fid, key, value, 0) and not entry.active:
                return self.mon.DISABLE  # a removed target with no open call here
        except Exception as exc:
            t.out.error(where, exc)
        return None

    def _unwind(self, code: "CodeType", offset: int, exc: BaseException) -> None:
        t = self.t
        try:
            entry = t.live.get(id(code))
            if entry is not None:
                t.leave(code, entry.fid, "exception", exc, sys._getframe(1).f_lineno)
        except Exception as error:
            t.out.error("py_unwind", error)

    def _line(self, code: "CodeType", line: int) -> object:
        b = self.b
        try:
            if not b.steps:
                site = b.sites.get(id(code))
                if site is None or line not in site.lines:
                    return self.mon.DISABLE
            b.line(sys._getframe(1), line)
        except Exception as exc:
            self.t.out.error("line", exc)
        return None

class Settrace:
    """3.11: a global trace function (sys.settrace for this thread, threading.settrace for threads started later)
    that returns a local tracer only for targets, with line events off, and for code objects holding breakpoints,
    with line events on where they hold line breakpoints. A 'return' is classified by the opcode it left at:
    RETURN_VALUE returns, YIELD_VALUE yields (unless an exception was raised at that very yield, i.e. thrown in),
    anything else is an exception unwinding. A step gives line events to the paused frame and its callers; a thread
    stepping into swaps its own global trace function for `step_call` (line events in every frame it enters)."""

    name = "sys.settrace"

    def __init__(self, tracer: "Tracer") -> None:
        self.t, self.b, self.on = tracer, tracer.breaks, [True]
        self.call, self.local, self.step_call = self._make()

    def _make(self) -> "tuple[Callable[..., object], Callable[..., object], Callable[..., object]]":
        t, b, on, names, live, quiet = self.t, self.t.breaks, self.on, self.t.by_name, self.t.live, self.t.quiet

        def call(frame: "FrameType", event: str, arg: object) -> object:
            code = frame.f_code
            if not on[0]:
                sys.settrace(None)
                return None
            if code.co_qualname not in names and (not b.armed or id(code) in b.plain or (  # known to hold none
                    b.by_filename.get(code.co_filename, code) is None and code.co_qualname not in b.entries)):
                return None
            try:
                entry = (live.get(id(code)) or t.discover(code)) if code.co_qualname in names else None
                if entry is not None and not entry.active:
                    entry = None
                site = b.discover(code)
                if (entry is None and site is None) or _get_ident() in quiet:
                    return None
                frame.f_trace_lines = site is not None and bool(site.lines)
                resumed = False
                if code.co_flags & _GENERATOR_LIKE:  # started, or resumed after a yield / by a throw
                    ops, lasti = code.co_code, frame.f_lasti
                    resumed = ops[lasti] == _YIELD_VALUE_311 or (ops[lasti] == _RESUME_311 and ops[lasti + 1] != 0)
                if entry is not None:
                    t.enter(entry, frame, resumed)
                if site is not None and site.entry and not resumed:
                    b.entered(frame, site)
                return local
            except Exception as exc:
                t.out.error("call", exc)
                return None

        def step_call(frame: "FrameType", event: str, arg: object) -> object:
            found = call(frame, event, arg)
            if not on[0]:
                return None
            step = b.steps.get(_get_ident())
            if step is None or step.kind != "into":  # the step ended (or was dropped from another thread)
                if sys.gettrace() is step_call:
                    sys.settrace(call)  # type: ignore[arg-type]
                return found
            if frame.f_code.co_filename == _OWN_FILE:
                return found
            frame.f_trace_lines = True
            return local

        def local(frame: "FrameType", event: str, arg: "Any") -> object:
            if not on[0]:
                return None
            try:
                code = frame.f_code
                if event == "line":
                    site = b.sites.get(id(code))
                    if site is not None and site.lines and not b.steps and frame.f_lineno not in site.lines:
                        return local  # the common case: another line of a code object with line breakpoints
                    b.line(frame, frame.f_lineno)
                    if b.wants_lines(frame):
                        return local
                    if id(code) in live:
                        frame.f_trace_lines = False
                        return local
                    return None  # a caller traced for a step that has ended
                if event == "exception":
                    opened = t.open_call(code)
                    if opened is not None:
                        opened[3:6] = arg[1], frame.f_lasti, frame.f_lineno
                elif event == "return":
                    entry = live.get(id(code))
                    if entry is None:
                        return None
                    op, lasti = code.co_code[frame.f_lasti], frame.f_lasti
                    opened = t.open_call(code) if op != _RETURN_VALUE_311 else None
                    if op == _RETURN_VALUE_311:
                        t.leave(code, entry.fid, "return", arg, 0)
                    elif op == _YIELD_VALUE_311 and (opened is None or opened[4] != lasti):
                        t.leave(code, entry.fid, "yielded", arg, 0)
                    else:
                        exc, line = (opened[3], opened[5]) if opened is not None else (None, frame.f_lineno)
                        t.leave(code, entry.fid, "exception", exc, line)
            except Exception as exc:
                t.out.error(event, exc)
            return local

        return call, local, step_call

    def install(self) -> str | None:
        sys.settrace(self.call)  # type: ignore[arg-type]  # typeshed's TraceFunction wants exactly these names
        threading.settrace(self.call)  # type: ignore[arg-type]
        return None

    def retarget(self) -> None:
        pass

    def rearm(self, old: "list[CodeType]", frames: "list[FrameType]") -> None:
        """After the breakpoints changed: line events in the running frames of code objects that hold line
        breakpoints now (in threads this tracer traces; the others have no trace function to call)."""
        for frame in frames:
            site = self.b.sites.get(id(frame.f_code))
            if site is not None and site.lines:
                self._trace(frame)

    def watch(self, code: "CodeType") -> None:
        pass

    def _trace(self, frame: "FrameType") -> None:
        if frame.f_trace is None or frame.f_trace is self.local:
            frame.f_trace = self.local
            frame.f_trace_lines = True

    def begin_step(self, step: "Step", frame: "FrameType") -> None:
        """(on the stepping thread) Line events in the paused frame and its callers; for into, in every frame
        this thread enters until the step ends."""
        at: FrameType | None = frame if step.kind != "out" else frame.f_back
        while at is not None:
            if at.f_code.co_filename != _OWN_FILE:
                self._trace(at)
            at = at.f_back
        if step.kind == "into":
            sys.settrace(self.step_call)  # type: ignore[arg-type]

    def step_into(self, code: "CodeType") -> None:
        pass

    def end_step(self, step: "Step") -> None:
        """(on the stepping thread)"""
        if step.kind == "into" and sys.gettrace() is self.step_call:
            sys.settrace(self.call)  # type: ignore[arg-type]

    def steps_cleared(self) -> None:
        pass  # each thread stepping into restores its trace function at its next call

    def uninstall(self) -> None:
        self.on[0] = False  # other threads drop the hook at their next call
        if sys.gettrace() in (self.call, self.step_call):
            sys.settrace(None)
        if threading.gettrace() is self.call:
            threading.settrace(None)
