"""How the tracer hooks the interpreter (see tracer.py): sys.monitoring on 3.12+, sys.settrace on 3.11.

Executed in the target after outbox.py, in the same private module. A backend calls the tracer's `discover`,
`enter`, `leave` and `open_call`; it never lets an exception reach the program (failures go to `out.error`).
"""

import _thread
import sys
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import CodeType, FrameType
    from typing import Any

    from .tracer import Tracer

_RETURN_VALUE_311, _YIELD_VALUE_311, _RESUME_311 = 83, 86, 151  # 3.11's opcodes; only the 3.11 backend reads them
_get_ident = _thread.get_ident  # (the modules share one namespace: no name twice)


class Monitoring:
    """3.12+: sys.monitoring under a free tool id (PROFILER_ID first). PY_START, PY_UNWIND and PY_THROW are global
    (the latter two cannot be local); PY_RETURN, PY_YIELD, PY_RESUME are set on each target's code object."""

    name = "sys.monitoring"

    def __init__(self, tracer: "Tracer") -> None:
        self.t, self.tool = tracer, -1
        self.mon = sys.monitoring  # type: ignore[attr-defined,unused-ignore]  # mypy targets 3.11
        events = self.mon.events
        self.local = events.PY_RETURN | events.PY_YIELD | events.PY_RESUME
        self.callbacks = ((events.PY_START, self._start), (events.PY_RESUME, self._resume),
                          (events.PY_RETURN, self._return), (events.PY_YIELD, self._yield),
                          (events.PY_UNWIND, self._unwind), (events.PY_THROW, self._throw))
        self.globals = events.PY_START | events.PY_UNWIND | events.PY_THROW

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

    def retarget(self) -> None:
        if self.tool < 0:
            return
        t, mon = self.t, self.mon
        if not t.by_name:
            for entry in t.live.values():
                mon.set_local_events(self.tool, entry.code, 0)
            t.live.clear()
        mon.set_events(self.tool, self.globals if t.by_name else 0)
        mon.restart_events()  # codes DISABLEd before may be targets now

    def uninstall(self) -> None:
        if self.tool < 0:
            return
        mon = self.mon
        mon.set_events(self.tool, 0)
        for entry in self.t.live.values():
            mon.set_local_events(self.tool, entry.code, 0)
        for event, _ in self.callbacks:
            mon.register_callback(self.tool, event, None)
        mon.free_tool_id(self.tool)
        self.tool = -1

    def _start(self, code: "CodeType", offset: int) -> object:
        t = self.t
        try:
            entry = t.live.get(id(code))
            if entry is None:
                entry = t.discover(code)
                if entry is None:
                    if t.counting:
                        t.counts[code.co_qualname] = t.counts.get(code.co_qualname, 0) + 1
                    return self.mon.DISABLE
                self.mon.set_local_events(self.tool, code, self.local)
            if not entry.active:
                return self.mon.DISABLE
            if _get_ident() not in t.quiet:
                t.enter(entry, sys._getframe(1), False)
        except Exception as exc:
            t.out.error("py_start", exc)
        return None

    def _resume(self, code: "CodeType", offset: int) -> object:
        return self._resumed(code, "py_resume", True)

    def _throw(self, code: "CodeType", offset: int, exc: BaseException) -> object:
        self._resumed(code, "py_throw", False)
        return None  # PY_THROW cannot be disabled

    def _resumed(self, code: "CodeType", where: str, local: bool) -> object:
        t = self.t
        try:
            entry = t.live.get(id(code))
            if entry is None or not entry.active:
                return self.mon.DISABLE if local else None
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


class Settrace:
    """3.11: a global trace function (sys.settrace for this thread, threading.settrace for threads started later)
    that returns a local tracer only for targets, with line events off. A 'return' is classified by the opcode
    it left at: RETURN_VALUE returns, YIELD_VALUE yields (unless an exception was raised at that very yield, i.e.
    thrown in), anything else is an exception unwinding."""

    name = "sys.settrace"

    def __init__(self, tracer: "Tracer") -> None:
        self.t, self.on = tracer, [True]
        self.call, self.local = self._make()

    def _make(self) -> "tuple[Callable[..., object], Callable[..., object]]":
        t, on, names, live, quiet = self.t, self.on, self.t.by_name, self.t.live, self.t.quiet

        def call(frame: "FrameType", event: str, arg: object) -> object:
            code = frame.f_code
            if not on[0]:
                sys.settrace(None)
                return None
            if code.co_qualname not in names:
                return None
            try:
                entry = live.get(id(code)) or t.discover(code)
                if entry is None or not entry.active or _get_ident() in quiet:
                    return None
                frame.f_trace_lines = False
                resumed = False
                if entry.generator:  # a generator or coroutine: started, or resumed after a yield / by a throw
                    ops, lasti = code.co_code, frame.f_lasti
                    resumed = ops[lasti] == _YIELD_VALUE_311 or (ops[lasti] == _RESUME_311 and ops[lasti + 1] != 0)
                t.enter(entry, frame, resumed)
                return local
            except Exception as exc:
                t.out.error("call", exc)
                return None

        def local(frame: "FrameType", event: str, arg: "Any") -> object:
            if not on[0]:
                return None
            try:
                code = frame.f_code
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

        return call, local

    def install(self) -> str | None:
        sys.settrace(self.call)  # type: ignore[arg-type]  # typeshed's TraceFunction wants exactly these names
        threading.settrace(self.call)  # type: ignore[arg-type]
        return None

    def retarget(self) -> None:
        pass

    def uninstall(self) -> None:
        self.on[0] = False  # other threads drop the hook at their next call
        if sys.gettrace() is self.call:
            sys.settrace(None)
        if threading.gettrace() is self.call:
            threading.settrace(None)
