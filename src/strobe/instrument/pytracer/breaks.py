"""Breakpoints, logpoints and stepping inside the traced interpreter (tracer.py has the module's contract).

Executed in the target after backends.py, in the same private module. The tracer owns one `Breakpoints`; its
backend asks `discover(code)` for each code object it sees start (or resume), then calls `line(frame, n)` at the
line events of the code objects that hold a line breakpoint (and of those a stepping thread runs through), and
`entered(frame, site)` where a code object with an entry breakpoint starts.

    failed = breakpoints.update([{"id": "bp-1#0", "kind": "line", "file": "/abs/app.py", "line": 12,
                                  "condition": "qty > 100", "hitCount": 2}], remove=[])   # [] or [{"id", "error"}]
    breakpoints.resume(4242, "over")        # ValueError when native thread 4242 is not paused

A thread that stops sends `{"v": 1, "pid": p, "pause": {...}}` (see `_report`), then waits alone on its own lock,
the GIL released and nothing else held, until `resume` (continue, over, into, out) or until nobody can send one:
the tracer stopped, the control fd closed, the helper thread gone, or a forked child (which reads no commands).
A logpoint never stops: its line is queued in the outbox (outbox.py sends them in batches).
Conditions and `{expr}` parts of log templates are Python, evaluated in the hit frame's globals and locals.
"""

import _thread
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import CodeType, FrameType

    from .reprs import ChainError, exc_message, static_attr, tname
    from .templates import _compile, parse_template, render_template
    from .tracer import Tracer, _absolute, _ident, _native_id, _now, _thread_name

_MISSING_NAME = object()
_OWN_FILE = sys._getframe().f_code.co_filename  # the tracer's own code: never a step's stop
_PAUSE_FRAMES = 16
_STEP_KINDS = ("over", "into", "out")


class Break:
    """One breakpoint or logpoint as set by the host, its condition and template compiled."""

    __slots__ = ("condition", "file", "hits", "id", "kind", "limit", "line", "log", "qualname")

    def __init__(self, spec: object) -> None:
        if not isinstance(spec, dict):
            raise ValueError(f"a breakpoint is an object with id, kind, file, line, not {str(spec)[:100]}")
        bid, kind, file, line = (spec.get(k) for k in ("id", "kind", "file", "line"))
        if type(bid) is not str or not bid:
            raise ValueError("needs an id (a non-empty string)")
        if kind not in ("line", "entry"):
            raise ValueError(f"kind must be 'line' or 'entry', not {str(kind)[:40]!r}")
        if type(file) is not str or not file.startswith("/"):
            raise ValueError(f"file must be an absolute path, not {str(file)[:200]!r}")
        if type(line) is not int or line < 1:
            raise ValueError(f"line must be a positive integer, not {str(line)[:40]!r}")
        qualname, condition, limit, log = (spec.get(k) for k in ("qualname", "condition", "hitCount", "log"))
        if kind == "entry" and (type(qualname) is not str or not qualname):
            raise ValueError("an entry breakpoint needs the qualname of its function")
        if limit is not None and (type(limit) is not int or limit < 1):
            raise ValueError(f"hitCount must be a positive integer, not {str(limit)[:40]!r}")
        if condition is not None and type(condition) is not str:
            raise ValueError("condition must be a string (a Python expression)")
        if log is not None and type(log) is not str:
            raise ValueError("log must be a string (a message with {expressions})")
        self.id, self.kind, self.file, self.line, self.qualname = bid, kind, file, line, qualname
        self.limit: int | None = limit
        self.hits = 0  # hits whose condition held
        self.condition = None if condition is None else _compile(condition, "condition")
        self.log = None if log is None else parse_template(log)


class Site:
    """A code object holding breakpoints: its line breakpoints by line, its entry breakpoints."""

    __slots__ = ("code", "entry", "lines")

    def __init__(self, code: "CodeType", lines: dict[int, list[Break]], entry: list[Break]) -> None:
        self.code, self.lines, self.entry = code, lines, entry


class Step:
    """A thread's step under way. `over` ends at the next line of the paused frame or of one of its callers (its
    deeper calls do not count), `out` at the next line of a caller, `into` at the next line of any frame."""

    __slots__ = ("frames", "kind")

    def __init__(self, kind: str, frame: "FrameType") -> None:
        self.kind = kind
        self.frames: dict[int, FrameType] = {}  # by id: kept alive, so ids are not reused while the step runs
        if kind != "into":
            at: FrameType | None = frame if kind == "over" else frame.f_back
            while at is not None:
                self.frames[id(at)] = at
                at = at.f_back

    def ends_at(self, frame: "FrameType") -> bool:
        if self.kind == "into":
            return frame.f_code.co_filename != _OWN_FILE
        return id(frame) in self.frames


class Pause:
    """A paused thread's wait: its lock is held until `go`; `frame`: where it stopped."""

    __slots__ = ("action", "frame", "lock")

    def __init__(self, frame: "FrameType") -> None:
        self.frame = frame
        self.action = "continue"
        self.lock = _thread.allocate_lock()
        self.lock.acquire()

    def go(self, action: str) -> None:
        self.action = action
        try:  # noqa: SIM105 (contextlib is not imported into the target)
            self.lock.release()
        except RuntimeError:  # released already
            pass


class Breakpoints:
    """The breakpoints set, the code objects that hold them, the paused threads and the steps under way."""

    def __init__(self, tracer: "Tracer") -> None:
        self.t = tracer
        self.armed = False  # any breakpoint set: the backend looks for sites
        self.by_id: dict[str, Break] = {}
        self.files: dict[str, dict[int, list[Break]]] = {}  # absolute file -> line -> its line breakpoints
        self.entries: dict[str, list[Break]] = {}  # qualname -> entry breakpoints
        self.sites: dict[int, Site] = {}  # by id(code); a Site holds its code, so ids are not reused
        self.plain: dict[int, CodeType] = {}  # code objects of those files that hold none (kept for their ids)
        self.by_filename: dict[str, dict[int, list[Break]] | None] = {}  # co_filename -> its line breakpoints
        self.steps: dict[int, Step] = {}  # by thread ident (each also in its thread's `_local`: idents are reused)
        self._local = _thread._local()
        self.into = False  # some thread steps into
        self.paused: dict[int, Pause] = {}  # by native thread id
        self._lock = _thread.allocate_lock()  # changes to the breakpoints and the sites
        self._counts = _thread.allocate_lock()

    # ---- the host's commands (on the helper thread) ----

    def update(self, specs: object, remove: object) -> list[dict[str, str]]:
        """Set (or replace, by id) `specs` and remove the ids in `remove`; the specs that failed, with why."""
        failed: list[dict[str, str]] = []
        added: dict[str, Break] = {}
        remove = [] if remove is None else remove
        for spec in specs if isinstance(specs, list) else [] if specs is None else [specs]:
            try:
                found = Break(spec)
                added[found.id] = found
            except (ValueError, SyntaxError) as exc:
                bid = spec.get("id") if isinstance(spec, dict) else None
                failed.append({"id": str(bid), "error": str(exc.msg if isinstance(exc, SyntaxError) else exc)})
        if not isinstance(remove, list) or not all(type(r) is str for r in remove):
            raise ValueError("remove must be a list of breakpoint ids")
        frames = self._running_frames()
        with self._lock:
            by_id = {bid: b for bid, b in self.by_id.items() if bid not in remove}
            by_id.update(added)
            files: dict[str, dict[int, list[Break]]] = {}
            entries: dict[str, list[Break]] = {}
            for bp in by_id.values():
                if bp.kind == "line":
                    files.setdefault(bp.file, {}).setdefault(bp.line, []).append(bp)
                else:
                    entries.setdefault(bp.qualname, []).append(bp)  # type: ignore[arg-type]
            self.by_id, self.files, self.entries, self.by_filename = by_id, files, entries, {}
            old, self.sites, self.plain = self.sites, {}, {}
            self.armed = bool(by_id)
            if by_id:
                for code in [site.code for site in old.values()] + [f.f_code for f in frames]:
                    if id(code) not in self.sites and id(code) not in self.plain:
                        self._site(code)
        self.t.backend.rearm([site.code for site in old.values()], frames)
        return failed

    def resume(self, tid: object, action: object) -> None:
        if action not in ("continue", *_STEP_KINDS):
            raise ValueError(f"action must be one of continue, over, into, out, not {str(action)[:40]!r}")
        pause = self.paused.pop(tid, None) if type(tid) is int else None
        if pause is None:
            raise ValueError(f"thread {str(tid)[:40]} is not paused; paused: {sorted(self.paused)}")
        pause.go(str(action))

    def frame_of(self, tid: object, index: object) -> "FrameType":
        """Frame `index` (0: the innermost, numbered as the pause report's frames) of paused thread `tid`."""
        pause = self.paused.get(tid) if type(tid) is int else None
        if pause is None:
            raise ValueError(f"thread {str(tid)[:40]} is not paused; paused: {sorted(self.paused)}")
        frames: list[FrameType] = []
        at: FrameType | None = pause.frame
        while at is not None and len(frames) < _PAUSE_FRAMES:
            if at.f_code.co_filename != _OWN_FILE:
                frames.append(at)
            at = at.f_back
        if type(index) is not int or not 0 <= index < len(frames):
            raise ValueError(f"frame {str(index)[:40]} is not one of thread {tid}'s {len(frames)} Python frames "
                             "(0: the innermost)")
        return frames[index]

    def read_in(self, frame: "FrameType", parts: list[str]) -> object:
        """A dotted name in a paused frame: a local (else a global of its module), then attributes read
        statically (no property or __getattr__ runs)."""
        root = parts[0]
        scope = frame.f_locals
        value = scope[root] if root in scope else frame.f_globals.get(root, _MISSING_NAME)
        if value is _MISSING_NAME:
            raise ChainError(f"'{root}' is not a local or global of {frame.f_code.co_qualname}; its locals: "
                             + ", ".join(list(scope)[:30]))
        path = root
        for name in parts[1:]:
            value = static_attr(value, name, path)
            path += "." + name
        return value

    def write_in(self, frame: "FrameType", name: str, value: object) -> object:
        """Set local `name` of a paused frame to `value`; the previous value. In 3.13 frame.f_locals writes through;
        before, the frame's fast locals are updated from it (PyFrame_LocalsToFast)."""
        code = frame.f_code
        if not name.isidentifier() or name not in (*code.co_varnames, *code.co_cellvars, *code.co_freevars):
            raise ValueError(f"'{name[:80]}' is not a local of {code.co_qualname}: its locals are "
                             + ", ".join((*code.co_varnames, *code.co_cellvars, *code.co_freevars)[:30]))
        scope = frame.f_locals
        previous = scope.get(name, _MISSING_NAME)
        if previous is _MISSING_NAME:
            raise ValueError(f"'{name}' of {code.co_qualname} has no value yet here: it is written only once bound")
        scope[name] = value
        if sys.version_info < (3, 13):
            import ctypes  # only where a write needs it

            ctypes.pythonapi.PyFrame_LocalsToFast(ctypes.py_object(frame), ctypes.c_int(0))
        return previous

    def release(self, forget: bool = False) -> None:
        """Every paused thread goes on and no step goes on; with `forget`, no breakpoint is left either."""
        for tid in list(self.paused):
            pause = self.paused.pop(tid, None)
            if pause is not None:
                pause.go("continue")
        if self.steps:
            self.steps.clear()
            self.into = False
            self.t.backend.steps_cleared()
        if forget and self.by_id:
            self.update([], list(self.by_id))

    def prune(self) -> None:
        """(the helper, while steps exist) Drop the steps that can no longer end: their thread has no Python frame
        left, or (over, out) none of the frames they end in is running any more."""
        running = sys._current_frames()
        for ident, step in list(self.steps.items()):
            top = running.get(ident)
            if top is not None and step.kind != "into":
                outermost = next(reversed(step.frames.values()), None)
                while top is not None and top is not outermost:
                    top = top.f_back
            if top is None and self.steps.pop(ident, None) is not None:
                self.into = any(s.kind == "into" for s in self.steps.values())
                self.t.backend.end_step(step)

    def after_fork(self) -> None:
        """In a forked child: only the forking thread exists (it was running, not paused)."""
        self.paused.clear()
        self.steps = {ident: step for ident, step in self.steps.items() if ident == _ident()}
        self.into = any(step.kind == "into" for step in self.steps.values())
        self._lock, self._counts = _thread.allocate_lock(), _thread.allocate_lock()

    def _running_frames(self) -> "list[FrameType]":
        frames: list[FrameType] = []
        for top in sys._current_frames().values():
            frame: FrameType | None = top
            while frame is not None:
                if frame.f_code.co_filename != _OWN_FILE:
                    frames.append(frame)
                frame = frame.f_back
        return frames

    # ---- sites (called by the backends) ----

    def discover(self, code: "CodeType") -> Site | None:
        """The breakpoints of a code object (found once, then kept), None when it holds none."""
        key = id(code)
        site = self.sites.get(key)
        if site is not None or not self.armed or key in self.plain:
            return site
        if self._file_lines(code.co_filename) is None and code.co_qualname not in self.entries:
            return None
        with self._lock:
            site = self._site(code)
        if site is not None:
            self.t.backend.watch(code)
        return site

    def _file_lines(self, filename: str) -> dict[int, list[Break]] | None:
        names = self.by_filename  # filled as code objects are seen
        try:
            return names[filename]
        except KeyError:
            files = self.files
            found = names[filename] = files.get(filename) or files.get(_absolute(filename))
            return found

    def _site(self, code: "CodeType") -> Site | None:
        """(under the lock) The site of `code`, recorded in sites or in plain."""
        file_lines = self._file_lines(code.co_filename)
        lines: dict[int, list[Break]] = {}
        if file_lines:
            own = {line for _, _, line in code.co_lines()}
            lines = {line: bps for line, bps in file_lines.items() if line in own}
        entry = [bp for bp in self.entries.get(code.co_qualname, ())
                 if bp.line == code.co_firstlineno and bp.file in (code.co_filename, _absolute(code.co_filename))]
        if not lines and not entry:
            if file_lines is not None or code.co_qualname in self.entries:
                self.plain[id(code)] = code
            return None
        site = self.sites[id(code)] = Site(code, lines, entry)
        return site

    def wants_lines(self, frame: "FrameType") -> bool:
        """Whether line events in `frame` are still needed (3.11: a frame's local trace function)."""
        site = self.sites.get(id(frame.f_code))
        return (site is not None and bool(site.lines)) or _ident() in self.steps

    # ---- hits (called by the backends, on the thread that hits) ----

    def line(self, frame: "FrameType", line: int) -> None:
        """A line starts in `frame`: its breakpoints, else the end of this thread's step."""
        ident = _ident()
        if ident in self.t.quiet:
            return
        step = self._step(ident) if self.steps else None
        site = self.sites.get(id(frame.f_code))
        bps = site.lines.get(line) if site is not None else None
        if bps is not None and self._hit(frame, bps, step, False):
            return
        if step is not None and step.ends_at(frame):
            self._pause(frame, None, 0, step, None, False)

    def entered(self, frame: "FrameType", site: Site) -> None:
        """A code object with entry breakpoints starts (its arguments bound, before its first line)."""
        ident = _ident()
        if ident not in self.t.quiet:
            self._hit(frame, site.entry, self._step(ident) if self.steps else None, True)

    def started(self, code: "CodeType") -> None:
        """A code object starts or resumes while some thread steps into: this one's next line is in it."""
        step = self._step(_ident())
        if step is not None and step.kind == "into" and code.co_filename != _OWN_FILE:
            self.t.backend.step_into(code)

    def _step(self, ident: int) -> Step | None:
        """This thread's step; one left by an ended thread whose ident this one reuses is dropped."""
        step = self.steps.get(ident)
        if step is not None and getattr(self._local, "step", None) is not step:
            self._end_step(ident)
            return None
        return step

    def _hit(self, frame: "FrameType", bps: list[Break], step: Step | None, entry: bool) -> bool:
        """Evaluate the breakpoints of one site; True when one of them stopped the thread."""
        stop: Break | None = None
        hit, error = 0, None
        local: object = None
        for bp in bps:
            failure = None
            if bp.condition is not None:
                if local is None:
                    local = frame.f_locals
                try:
                    if not eval(bp.condition, frame.f_globals, local):  # type: ignore[arg-type]
                        continue
                except Exception as exc:
                    failure = f"{tname(type(exc))}: {exc_message(exc, 200)}"
            with self._counts:
                if failure is None:
                    bp.hits += 1
                count = bp.hits
            if failure is None and bp.limit is not None and count != bp.limit:
                continue
            if bp.log is not None:
                if local is None:
                    local = frame.f_locals
                self._log(bp, frame, local, failure)
            elif stop is None:
                stop, hit, error = bp, count, failure
        if stop is None:
            return False
        self._pause(frame, stop.id, hit, step, error, entry)
        return True

    def _log(self, bp: Break, frame: "FrameType", local: object, failure: str | None) -> None:
        if failure is not None:
            text = f"<condition error: {failure}>"
        else:
            text = render_template(bp.log, frame.f_globals, local)  # type: ignore[arg-type]
        tid = _native_id()
        self.t.out.log({"id": bp.id, "tid": tid, "thread": _thread_name(_ident(), tid), "text": text, "ts": _now()})

    # ---- pausing and stepping ----

    def _pause(self, frame: "FrameType", bid: str | None, hit: int, step: Step | None, error: str | None,
               entry: bool) -> None:
        ident, tid, t = _ident(), _native_id(), self.t
        if step is not None:
            self._end_step(ident)  # a stop ends the step
            self._local.step = None
        if not t.can_pause():
            return
        report = self._report(frame, tid, bid, hit, step, error, entry)
        pause = Pause(frame)
        t.flush()  # the calls that led here first
        self.paused[tid] = pause
        try:
            t.out.message(pause=report)
            while not pause.lock.acquire(timeout=0.25):  # the GIL is released while waiting
                if not t.can_pause():
                    pause.action = "continue"
                    break
        finally:
            self.paused.pop(tid, None)
        if pause.action in _STEP_KINDS and t.state == "installed":
            self.steps[ident] = self._local.step = step = Step(pause.action, frame)
            self.into = self.into or step.kind == "into"
            t.backend.begin_step(step, frame)

    def _end_step(self, ident: int) -> None:
        step = self.steps.pop(ident, None)
        if step is not None:
            self.into = any(s.kind == "into" for s in self.steps.values())
            self.t.backend.end_step(step)

    def _report(self, frame: "FrameType", tid: int, bid: str | None, hit: int, step: Step | None,
                error: str | None, entry: bool) -> dict[str, object]:
        frames: list[dict[str, object]] = []
        at: FrameType | None = frame
        while at is not None and len(frames) < _PAUSE_FRAMES:
            code = at.f_code
            if code.co_filename != _OWN_FILE:
                line = at.f_lineno
                frames.append({"function": code.co_qualname, "file": _shown(code.co_filename),
                               "line": line if line is not None else code.co_firstlineno,
                               "locals": self.t.frame_locals(at)})
            at = at.f_back
        code = frame.f_code
        return {"tid": tid, "thread": _thread_name(_ident(), tid), "breakpoint": bid or "", "hit": hit,
                "step": step.kind if step is not None else None, "conditionError": error, "entry": entry,
                "file": _shown(code.co_filename), "line": frames[0]["line"] if frames else code.co_firstlineno,
                "function": code.co_qualname, "frames": frames, "ts": _now()}


def _shown(filename: str) -> str:
    """A code object's file as reported: absolute, except names like "<string>" or "<frozen runpy>"."""
    return filename if filename.startswith("<") else _absolute(filename)
