"""Strobe's tracer inside a traced CPython 3.11-3.13 process: it records the calls of the host's target functions.

The host never imports this file: it executes reprs.py, outbox.py, backends.py, templates.py, breaks.py, control.py
and then this text in one fresh private module `_strobe_tracer` (`strobe.instrument.pytracer.source()` gives them in
order), then calls

    tracer = install(sink, control_fd, {"targets": [{"id": 7, "file": "/abs/app.py", "line": 12,
                                                     "qualname": "Cart.total"}], "depth": 3,
                                        "breakpoints": [{"id": "bp-1#0", "kind": "line", "file": "/abs/app.py",
                                                         "line": 14}]})

`sink(data: bytes)` takes one UTF-8 JSON object at a time: a batch
`{"v": 1, "pid": p, "threads": [[tid, name], ...], "events": [...], "dropped": n, "errors": [...]}` or a reply
`{"v": 1, "pid": p, "reply": id, ...}`, a thread's pause report `{"v": 1, "pid": p, "pause": {...}}` or logpoint
lines `{"v": 1, "pid": p, "logpoints": [...], "dropped": n}` (breaks.py, outbox.py). Events are lists
`[kind, fid, ts_ns, tid, seq, parent_seq, payload]` (kind 1 enter, 2 return or yield, 3 unwind, 9 uncaught
exception); `control_fd` carries newline-delimited JSON commands (targets, depth, watches, eval, flush, breakpoints,
resume, set, stop), which `Tracer.command(dict)` also applies directly:

    {"cmd": "breakpoints", "id": 3, "set": [{"id": "bp-1#0", "kind": "line", "file": "/abs/app.py", "line": 14,
     "condition": "qty > 100", "hitCount": 2, "log": "qty={qty!r}"}], "remove": ["bp-0#0"]}
        -> {"ok": true, "failed": [{"id": "...", "error": "why"}]}
    {"cmd": "resume", "id": 4, "tid": 4242, "action": "continue" | "over" | "into" | "out"} -> {"ok": true}
    {"cmd": "eval", "id": 5, "exprs": ["total", "acc.owner"], "tid": 4242, "frame": 0} -> {"values": [[expr, v]]}
    {"cmd": "set", "id": 6, "tid": 4242, "frame": 0, "local": "total", "value": 1000} -> {"previous": .., "value": ..}
A watched or evaluated value that cannot be read is `{"__error__": why}` (reprs.py never renders that key).

3.12+ uses sys.monitoring: PY_START discovers code objects, untargeted ones are DISABLEd after one callback,
targets get per-code local events. 3.11 uses sys.settrace + threading.settrace.
3.11 cannot trace threads that were already running at install: sys.settrace reaches only the calling thread.
Breakpoints, logpoints and steps (breaks.py) go through the same backend: sys.monitoring LINE events on the code
objects that hold them, or 3.11's local trace functions with line events.
"""

import _thread
import atexit
import gc
import itertools
import os
import sys
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # in the target these names come from the modules executed just before this one
    from collections.abc import Callable
    from types import CodeType, FrameType, TracebackType
    from typing import Any

    from .backends import Monitoring, Settrace
    from .breaks import Breakpoints
    from .control import Control
    from .outbox import BATCH_EVENTS, LOG_CAP, Outbox
    from .reprs import ChainError, Renderer, exc_message, instance_attr, read_chain, tname

ENTER, RETURN, UNWIND, CRASH = 1, 2, 3, 9
_GENERATOR_LIKE = 0x20 | 0x80 | 0x100 | 0x200  # CO_GENERATOR, CO_COROUTINE, CO_ITERABLE_COROUTINE, CO_ASYNC_GENERATOR
_VARARGS, _VARKEYWORDS, _ASYNC_GENERATOR = 0x04, 0x08, 0x200
_TRACEBACK_FRAMES, _FRAME_LOCALS = 50, 30
_UNBOUND = "\"<unbound>\""  # an argument not bound yet (JSON text)
_now = time.monotonic_ns
_ident = _thread.get_ident
_native_id = _thread.get_native_id


def _thread_name(ident: int, tid: int) -> str:
    thread = getattr(threading, "_active", {}).get(ident)  # never threading.current_thread(): it creates dummies
    name = instance_attr(thread, "_name") if thread is not None else None
    return name if type(name) is str else f"thread-{tid}"


def _unwrap_async_yield(value: object) -> object:
    """An async generator's `yield v` reaches the hooks wrapped in a C object with no Python accessor; its
    tp_traverse visits exactly the wrapped value."""
    if tname(type(value)) == "async_generator_wrapped_value":
        inner = gc.get_referents(value)
        if len(inner) == 1:
            return inner[0]
    return value


def _absolute(filename: str) -> str:
    """A relative co_filename made absolute against the current directory (as it was at import, usually)."""
    if filename.startswith("/"):
        return filename
    try:
        return os.path.abspath(filename)
    except OSError:  # the current directory is gone
        return filename


def _depth(value: object) -> int:
    if type(value) is not int or not 0 <= value <= 10:
        raise ValueError(f"depth must be an integer from 0 to 10, not {str(value)[:40]}")
    return value


class Live:
    """A code object found to be a target (kept while calls of it may be open, even once it is no longer one)."""

    __slots__ = ("active", "argnames", "code", "fid", "generator", "named")

    def __init__(self, code: "CodeType", fid: int, argnames: tuple[str, ...], generator: bool,
                 names_json: tuple[str, ...]) -> None:
        self.code, self.fid, self.argnames, self.generator, self.active = code, fid, argnames, generator, True
        self.named = tuple(zip(argnames, names_json, strict=True))  # (name, name as JSON text): events as text


class ThreadState:
    """A traced thread: its native id and its stack of open calls, each [id(code), enter seq, enter ts, and for
    3.11: the exception seen, its f_lasti, its line]."""

    __slots__ = ("stack", "tid")

    def __init__(self, tid: int) -> None:
        self.tid = tid
        self.stack: list[list[Any]] = []


class Tracer:
    """One installed tracer: the targets, each thread's stack of open traced calls, the helper thread, commands.

    An event's parent is the enter seq of the innermost open call on the same thread when the event happened."""

    def __init__(self, sink: "Callable[[bytes], object]", control_fd: int | None, config: dict[str, object]) -> None:
        self.out = Outbox(sink, int(config.get("max_buffered", 200_000)),  # type: ignore[call-overload]
                          int(config.get("flush_at", BATCH_EVENTS)),  # type: ignore[call-overload]
                          int(config.get("max_logpoints", LOG_CAP)))  # type: ignore[call-overload]
        self._emit, self._emit_text, self._value = self.out.emit, self.out.emit_text, self.out.value
        self._control_fd, self._reading = control_fd, control_fd is not None
        self._commands = True  # commands can still come (False once the host's end closed, or in a forked child)
        self._helper: threading.Thread | None = None
        self._interval = float(config.get("flush_interval", 0.01))  # type: ignore[arg-type]
        self._render = Renderer(3).render  # config["depth"] is applied as a command by _install
        self._seq = itertools.count(1)
        self._local = _thread._local()
        self.by_name: dict[str, list[tuple[str, int, int]]] = {}  # qualname -> (file, line, fid); changed in place
        self.live: dict[int, Live] = {}  # by id(code); a Live holds its code, so ids are not reused
        self.quiet: set[int] = set()  # threads whose calls are never recorded (the helper, a flushing thread)
        self.counting = bool(config.get("count_callbacks"))
        self.counts: dict[str, int] = {}  # untargeted-code callbacks by qualname, when counting
        self._watches: list[tuple[str, list[str]]] = []
        self.state = "installed"
        self.unavailable: str | None = None
        self.breaks = Breakpoints(self)
        self.control = Control(self)
        self.backend: Monitoring | Settrace = Monitoring(self) if sys.version_info >= (3, 12) else Settrace(self)
        self._sys_hook, self._thread_hook = self._sys_excepthook, self._thread_excepthook
        self._sys_prev, self._thread_prev = sys.excepthook, threading.excepthook

    def _install(self, config: dict[str, object]) -> None:
        self._start_helper()  # first, so that its start is never traced
        self.unavailable = self.backend.install()
        if self.unavailable:
            self.out.note("install", self.unavailable)
        sys.excepthook, threading.excepthook = self._sys_hook, self._thread_hook
        atexit.register(self.flush)
        os.register_at_fork(after_in_child=self._after_fork)
        for name in ("depth", "watches", "targets"):
            if name in config:
                self.command({"cmd": name, name: config[name]})
        if "breakpoints" in config:
            try:
                for failed in self.breaks.update(config["breakpoints"], []):
                    self.out.note("breakpoints", f"{failed['id']}: {failed['error']}")
            except Exception as exc:
                self.out.error("breakpoints", exc)

    def stop(self) -> None:
        """Uninstall everything (trace hooks, exception hooks, atexit, this module) and send what was recorded."""
        if self.state == "stopped":
            return
        self.state = "stopped"
        self.backend.uninstall()
        self.breaks.release()  # after: a thread let go meets no breakpoint again
        if sys.excepthook is self._sys_hook:
            sys.excepthook = self._sys_prev
        if threading.excepthook is self._thread_hook:
            threading.excepthook = self._thread_prev
        atexit.unregister(self.flush)
        self.flush()
        self.out.wake()
        if getattr(sys.modules.get(__name__), "__dict__", None) is globals():
            del sys.modules[__name__]

    def _start_helper(self) -> None:
        self._helper = threading.Thread(target=self.control.run, name="strobe-tracer", daemon=True)
        self._helper.start()

    def can_pause(self) -> bool:
        """Whether a thread may wait for a `resume`: only while one can come (tracer installed, commands read by a
        live helper thread, or no control fd at all: the Python API's caller resumes)."""
        if self.state != "installed" or not self._commands:
            return False
        return self._control_fd is None or (self._reading and self._helper is not None and self._helper.is_alive())

    def _host_gone(self) -> None:
        """Commands cannot come any more: no thread waits for one, no breakpoint is left to stop one."""
        self._reading = self._commands = False
        self.breaks.release(forget=True)

    def _after_fork(self) -> None:
        """In a forked child: a new helper thread, this pid, none of the parent's events. The control pipe is
        shared with the parent, so the child stops reading it: the host cannot send this child commands."""
        if self.state != "installed":
            return
        try:
            self._reading = self._commands = False
            self.breaks.after_fork()
            self.quiet.clear()  # changed in place: the 3.11 backend's functions hold this set
            self.out.after_fork()
            state = getattr(self._local, "state", None)
            if state is not None:  # the forking thread: same open calls, a new native id
                state.tid = _native_id()
                self.out.threads.append([state.tid, _thread_name(_ident(), state.tid)])
            self._start_helper()
        except Exception as exc:
            self.out.error("fork", exc)

    # ---- recording (hot path; called by the backends) ----

    def _new_thread(self) -> ThreadState:
        state = self._local.state = ThreadState(_native_id())
        self.out.threads.append([state.tid, _thread_name(_ident(), state.tid)])
        return state

    def enter(self, entry: Live, frame: "FrameType | None", resumed: bool) -> None:
        ts = _now()
        try:
            state = self._local.state
        except AttributeError:
            state = self._new_thread()
        stack = state.stack
        parent = stack[-1][1] if stack else -1
        seq = next(self._seq)
        stack.append([id(entry.code), seq, ts, None, -1, 0])
        if frame is not None and not resumed and not self._watches:  # the common case, written as text
            values, render, value = frame.f_locals, self._render, self._value
            args = ",".join([f"[{name},{value(render(values[n])) if n in values else _UNBOUND}]"
                             for n, name in entry.named])
            self._emit_text(f'[1,{entry.fid},{ts},{state.tid},{seq},{parent},{{"args":[{args}]}}]')
            return
        if frame is None or resumed:
            payload: dict[str, object] = {"resumed": True}
        else:
            values, render = frame.f_locals, self._render
            payload = {"args": [[n, render(values[n]) if n in values else "<unbound>"] for n in entry.argnames]}
        if self._watches:
            payload["watches"] = self._read_watches()
        self._emit([ENTER, entry.fid, ts, state.tid, seq, parent, payload])

    def open_call(self, code: "CodeType") -> "list[Any] | None":
        """This thread's innermost open call of `code`."""
        state: ThreadState | None = getattr(self._local, "state", None)
        if state is None:
            return None
        key = id(code)
        found = [entry for entry in state.stack if entry[0] == key]
        return found[-1] if found else None

    def leave(self, code: "CodeType", fid: int, key: str, value: "Any", line: int) -> bool:
        """Close this thread's innermost open call of `code`; `key` is "return", "yielded" or "exception" (then
        `value` is the exception or None). False when there is no such call."""
        ts = _now()
        try:
            state = self._local.state
        except AttributeError:
            return False
        stack, code_id = state.stack, id(code)
        at = len(stack) - 1
        while at >= 0 and stack[at][0] != code_id:
            at -= 1
        if at < 0:
            return False
        opened = stack[at]
        del stack[at:]  # also closes calls whose end was not seen (a target removed while they ran)
        if key == "yielded" and code.co_flags & _ASYNC_GENERATOR:
            value = _unwrap_async_yield(value)
        if key == "return" and not self._watches:  # the common case, written as text
            self._emit_text(f'[2,{fid},{ts},{state.tid},{next(self._seq)},{stack[-1][1] if stack else -1},'
                            f'{{"return":{self._value(self._render(value))},"duration":{ts - opened[2]},'
                            f'"enter":{opened[1]}}}]')
            return True
        if key != "exception":
            value = self._render(value)
        elif value is None:
            value = {"type": "?", "message": "", "line": line}
        else:
            value = {"type": tname(type(value)), "message": exc_message(value), "line": line}
        payload = {key: value, "duration": ts - opened[2], "enter": opened[1]}
        if self._watches:
            payload["watches"] = self._read_watches()
        self._emit([UNWIND if key == "exception" else RETURN, fid, ts, state.tid, next(self._seq),
                    stack[-1][1] if stack else -1, payload])
        return True

    def _read_watches(self) -> dict[str, object]:
        values: dict[str, object] = {}
        for key, parts in self._watches:
            try:
                values[key] = self._render(read_chain(parts))
            except ChainError as exc:
                values[key] = {"__error__": str(exc)}
            except Exception as exc:
                values[key] = {"__error__": "unreadable: " + tname(type(exc))}
        return values

    # ---- targets ----

    def _match(self, code: "CodeType") -> int | None:
        for file, line, fid in self.by_name.get(code.co_qualname, ()):
            if line == code.co_firstlineno and (file == code.co_filename or file == _absolute(code.co_filename)):
                return fid
        return None

    def discover(self, code: "CodeType") -> Live | None:
        """The live entry of a code object seen for the first time, if it is a target."""
        fid = self._match(code)
        if fid is None:
            return None
        flags = code.co_flags
        count = code.co_argcount + code.co_kwonlyargcount + bool(flags & _VARARGS) + bool(flags & _VARKEYWORDS)
        names = code.co_varnames[:count]
        entry = self.live[id(code)] = Live(code, fid, names, bool(flags & _GENERATOR_LIKE),
                                           tuple(self.out.dumps(name) for name in names))
        return entry

    def _set_targets(self, targets: object) -> int:
        by_name: dict[str, list[tuple[str, int, int]]] = {}
        for target in targets if isinstance(targets, list) else [targets]:
            fid, file, line, qualname = (target.get(k) if isinstance(target, dict) else None
                                         for k in ("id", "file", "line", "qualname"))
            if not (type(fid) is int and type(file) is str and type(line) is int and type(qualname) is str):
                raise ValueError(f"target {str(target)[:200]}: needs id (int), file (str), line (int), qualname (str)")
            by_name.setdefault(qualname, []).append((file, line, fid))
        self.by_name.clear()
        self.by_name.update(by_name)
        for entry in list(self.live.values()):
            fid = self._match(entry.code)
            entry.active = fid is not None  # a removed target stays known until its open calls have ended
            if fid is not None:
                entry.fid = fid
        self.backend.retarget()
        return sum(len(v) for v in by_name.values())

    # ---- the helper thread: flushes every interval (or at once when woken), reads commands ----

    def flush(self) -> None:
        """Send everything buffered, then return (the calling thread's calls are not traced meanwhile)."""
        ident = _ident()
        added = ident not in self.quiet
        if added:
            self.quiet.add(ident)
        try:
            self.out.flush()
        except Exception as exc:
            self.out.error("flush", exc)
        finally:
            if added:
                self.quiet.discard(ident)

    def command(self, cmd: dict[str, object]) -> None:
        """Apply one host command (control.py); the reply, when it has an "id", goes through the sink."""
        self.control.apply(cmd)

    # ---- uncaught exceptions ----

    def _sys_excepthook(self, kind: type[BaseException], exc: BaseException, tb: "TracebackType | None") -> None:
        try:
            self._crash(exc, tb, _thread_name(_ident(), _native_id()))
        except Exception as error:
            self.out.error("excepthook", error)
        self._sys_prev(kind, exc, tb)  # the hook that was there before ours, always

    def _thread_excepthook(self, args: "threading.ExceptHookArgs") -> None:
        try:
            if args.exc_type is not SystemExit and args.exc_value is not None:
                name = instance_attr(args.thread, "_name") if args.thread is not None else None
                self._crash(args.exc_value, args.exc_traceback,
                            name if type(name) is str else f"thread-{_native_id()}")
        except Exception as error:
            self.out.error("excepthook", error)
        self._thread_prev(args)

    def _crash(self, exc: BaseException, tb: "TracebackType | None", thread: str) -> None:
        """Event 9: the exception, its traceback (innermost last) with each frame's locals; sent at once."""
        if self.state != "installed":
            return
        try:
            ts = _now()
            tbs: list[TracebackType] = []
            while tb is not None and len(tbs) < 10_000:
                tbs.append(tb)
                tb = tb.tb_next
            frames = [{"file": t.tb_frame.f_code.co_filename, "line": t.tb_lineno,
                       "function": t.tb_frame.f_code.co_qualname, "locals": self.frame_locals(t.tb_frame)}
                      for t in tbs[-_TRACEBACK_FRAMES:]]
            payload = {"type": tname(type(exc)), "message": exc_message(exc), "thread": thread, "traceback": frames}
            state = getattr(self._local, "state", None) or self._new_thread()
            self.out.urgent([CRASH, -1, ts, state.tid, next(self._seq), -1, payload])
        except Exception as error:
            self.out.error("crash", error)
        self.flush()

    def frame_locals(self, frame: "FrameType") -> dict[str, object]:
        """A frame's locals rendered (at most _FRAME_LOCALS, dunder names left out)."""
        out: dict[str, object] = {}
        for name, value in frame.f_locals.items():
            if type(name) is not str or (name.startswith("__") and name.endswith("__")):
                continue
            if len(out) == _FRAME_LOCALS:
                out["…"] = "more locals"
                break
            out[name] = self._render(value)
        return out

    def stats(self) -> dict[str, object]:
        """For tests and diagnostics: backend, buffered events, drops, untargeted callbacks by qualname."""
        return {"backend": self.backend.name, "tool": getattr(self.backend, "tool", None), "state": self.state,
                "buffered": len(self.out.events), "dropped": self.out.dropped, "callbacks": dict(self.counts),
                "unavailable": self.unavailable}


_installed: Tracer | None = None


def install(sink: "Callable[[bytes], object]", control_fd: int | None, config: dict[str, object] | None = None
            ) -> Tracer:
    """Start tracing this interpreter (a tracer installed before is stopped first)."""
    global _installed
    if _installed is not None:
        _installed.stop()
    _installed = Tracer(sink, control_fd, config or {})
    _installed._install(config or {})
    return _installed
