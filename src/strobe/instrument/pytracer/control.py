"""The tracer's control channel inside the traced interpreter: the helper thread and the host's commands.

Executed in the target after breaks.py and before tracer.py, in the same private module (tracer.py has the
module's contract and the list of commands). The tracer owns one `Control`; its helper thread runs `run()`,
which flushes the outbox on its beat and reads newline-delimited JSON commands from the control fd, and
`Tracer.command(dict)` applies one directly:

    tracer.control.apply({"cmd": "eval", "id": 5, "exprs": ["app.config.timeout"]})   # reply through the sink
"""

import os
import select
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .reprs import ChainError, Renderer, exc_message, parse_chain, read_chain, tname
    from .tracer import Tracer, _depth, _ident

_COMMANDS = ("targets", "depth", "watches", "eval", "flush", "breakpoints", "resume", "set", "stop")


class Control:
    """The host's side of a tracer: commands in, replies out (through the tracer's outbox)."""

    def __init__(self, tracer: "Tracer") -> None:
        self.t = tracer

    def run(self) -> None:
        """The helper thread: flush batches on their beat, read and apply the host's commands until stopped."""
        self.t.quiet.add(_ident())
        sys.settrace(None)
        out, pending = self.t.out, b""
        while self.t.state != "stopped":
            try:
                fds = [out.wake_r]
                if self.t._reading and self.t._control_fd is not None:
                    fds.append(self.t._control_fd)
                steps = self.t.breaks.steps
                ready = select.select(fds, [], [], min(self.t._interval, 0.25) if steps else self.t._interval)[0]
                if out.wake_r in ready:
                    out.drain_wake()
                if self.t._reading and self.t._control_fd in ready:
                    pending = self._read_commands(pending)
                if out.pending():
                    self.t.flush()
                if steps:
                    self.t.breaks.prune()
            except Exception as exc:
                out.error("helper", exc)
                if self.t._reading:  # a broken control fd: keep flushing, stop reading
                    self.t._host_gone()
        if out is self.t.out:
            out.close()

    def _read_commands(self, pending: bytes) -> bytes:
        try:
            data = os.read(self.t._control_fd, 65536)  # type: ignore[arg-type]
        except BlockingIOError:
            return pending
        if not data:  # the host closed its end
            self.t._host_gone()
            return b""
        *lines, pending = (pending + data).split(b"\n")
        for line in lines:
            if line.strip():
                try:
                    command = self.t.out.loads(line.decode())
                except Exception as exc:
                    self.t.out.note("command", f"not a JSON command ({tname(type(exc))}): {line[:200]!r}")
                    continue
                self.apply(command)  # type: ignore[arg-type]
        if len(pending) > 1 << 20:
            self.t.out.note("command", "a command line longer than 1 MiB was dropped")
            pending = b""
        return pending

    def apply(self, cmd: dict[str, object]) -> None:
        """Apply one host command; the reply (when it has an "id") goes through the sink. Never raises."""
        rid = cmd.get("id") if isinstance(cmd, dict) else None
        reply = self.t.out.reply
        try:
            name = cmd.get("cmd") if isinstance(cmd, dict) else None
            if name == "targets":
                count = self.t._set_targets(cmd.get("targets", []))
                status = {"error": self.t.unavailable} if self.t.unavailable else {"ok": True}
                reply(rid, targets=count, backend=self.t.backend.name, **status)
            elif name == "depth":
                self.t._render = Renderer(_depth(cmd.get("depth"))).render
                reply(rid, ok=True)
            elif name == "watches":
                reply(rid, ok=True, errors=self._set_watches(cmd.get("watches", [])))
            elif name == "eval":
                reply(rid, values=self._eval(cmd.get("exprs", []), cmd.get("tid"), cmd.get("frame")))
            elif name == "set":
                frame = self.t.breaks.frame_of(cmd.get("tid"), cmd.get("frame", 0))
                value = cmd.get("value")
                if value is not None and type(value) not in (int, float, str, bool):
                    raise ValueError("value must be a number, a string, a bool or null")
                previous = self.t.breaks.write_in(frame, str(cmd.get("local")), value)
                reply(rid, previous=self.t._render(previous), value=self.t._render(value))
            elif name == "flush":
                self.t.flush()
                reply(rid, flushed=True)
            elif name == "breakpoints":
                failed = self.t.breaks.update(cmd.get("set", []), cmd.get("remove", []))
                status = {"error": self.t.unavailable} if self.t.unavailable else {"ok": True}
                reply(rid, failed=failed, **status)
            elif name == "resume":
                self.t.breaks.resume(cmd.get("tid"), cmd.get("action", "continue"))
                reply(rid, ok=True)
            elif name == "stop":
                self.t.stop()
                reply(rid, stopped=True)
            else:
                raise ValueError(f"unknown command {str(name)[:40]!r}: one of " + ", ".join(_COMMANDS))
        except Exception as exc:
            if rid is None:
                self.t.out.error("command", exc)
            else:
                reply(rid, error=exc_message(exc))

    def _set_watches(self, watches: object) -> list[list[object]]:
        chains, errors = [], []
        for watch in watches if isinstance(watches, list) else [watches]:
            wid = watch.get("id") if isinstance(watch, dict) else None
            try:
                if type(wid) is not int:
                    raise ChainError(f"watch {str(watch)[:200]}: needs id (int) and expr (str)")
                chains.append((str(wid), parse_chain(watch.get("expr"))))  # type: ignore[union-attr]
            except ChainError as exc:
                errors.append([wid, str(exc)])
        self.t._watches = chains
        return errors

    def _eval(self, exprs: object, tid: object = None, index: object = None) -> list[list[object]]:
        """Dotted names read statically: from loaded modules, or (`tid`) from frame `index` of a paused thread."""
        if not isinstance(exprs, list) or len(exprs) > 100:
            raise ValueError("exprs must be a list of at most 100 dotted names")
        frame = None if tid is None else self.t.breaks.frame_of(tid, 0 if index is None else index)
        values: list[list[object]] = []
        for expr in exprs:
            try:
                parts = parse_chain(expr)
                found = read_chain(parts) if frame is None else self.t.breaks.read_in(frame, parts)
                values.append([expr, self.t._render(found)])
            except ChainError as exc:
                values.append([expr, {"__error__": str(exc)}])
            except Exception as exc:
                values.append([expr, {"__error__": "unreadable: " + tname(type(exc))}])
        return values
