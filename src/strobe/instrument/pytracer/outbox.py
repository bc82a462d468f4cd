"""The tracer's outgoing side: buffered events, batches and replies to the host's sink (see tracer.py).

Executed in the target after reprs.py, in the same private module. Producers (every traced thread) take no
lock: `list.append`, `l[:n]` and `del l[:n]` are each atomic under the GIL, so a flush takes the first n events
and removes exactly those while other threads keep appending. Each event is encoded to JSON when it is recorded
(~0.8 us, about what encoding it in a batch costs): buffered events are strings the cyclic GC never scans, and a
flush holds the GIL only to join them. A batch is one UTF-8 JSON object:

    {"v": 1, "n": 1, "pid": 4242, "threads": [[4242, "MainThread"]], "events": [[1, 7, ts, 4242, 1, -1, {...}]],
     "dropped": 0, "errors": [{"where": "py_start", "error": "KeyError: 'x'", "count": 2}]}

"n" is the number of events (first after "v": the host reads it without parsing the batch), "dropped" is
cumulative (events refused once `cap` were buffered), "errors" counts failures since the last batch.

Logpoint lines (breaks.py) are queued apart and leave after the events, at most 4096 a message:

    {"v": 1, "pid": 4242, "logpoints": [{"id": "bp-1#0", "tid": 4242, "thread": "MainThread", "text": "qty=3",
     "ts": 123}], "dropped": 0}

with "dropped" cumulative too (lines refused once `log_cap`, 20,000 unless configured, were queued). Other
messages (a reply, a thread's pause report) are sent at once by `message`.
"""

import os
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from .reprs import exc_message, tname

BATCH_EVENTS = 4096
LOG_CAP = 20_000


def _json_default(value: object) -> str:
    return "<unrenderable: " + tname(type(value)) + ">"


def json_codec() -> "tuple[Callable[[object], str], Callable[[str], object]]":
    """(dumps, loads) on `_json`'s C encoder and scanner: importing `json` would also import re, enum, functools
    into the program. The `json` module only if `_json` is missing or behaves unexpectedly."""
    try:
        import _json

        encoder = _json.make_encoder(None, _json_default, _json.encode_basestring_ascii, None, ":", ",",
                                     False, False, True)

        class Context:
            strict, object_hook, object_pairs_hook, memo = True, None, None, None
            parse_float, parse_int, parse_constant = float, int, float

        scanner = _json.make_scanner(Context())  # type: ignore[arg-type]  # any object with these attributes

        def dumps(value: object) -> str:
            return "".join(encoder(value, 0))

        def loads(text: str) -> object:
            value, end = scanner(text, 0)
            if text[end:].strip():
                raise ValueError("extra data after the JSON value")
            return value

        if loads(dumps({"probe": [1, "é", None]})) == {"probe": [1, "é", None]}:
            return dumps, loads
    except Exception:
        pass
    import json

    return json.JSONEncoder(default=_json_default, separators=(",", ":"), check_circular=False).encode, json.loads


def value_codec(dumps: "Callable[[object], str]") -> "Callable[[object], str]":
    """JSON text of a rendered value (reprs.Renderer's output): scalars written directly (an int, a str through
    `_json`'s C escaper), anything else through `dumps`."""
    try:
        from _json import encode_basestring_ascii as quote
    except ImportError:
        return dumps
    int_text = int.__repr__

    def value(v: object, int_type: type = int, str_type: type = str) -> str:
        t = type(v)
        if t is int_type:
            return int_text(v)
        if t is str_type:
            return quote(v)  # type: ignore[arg-type]
        if v is None:
            return "null"
        return dumps(v)

    return value


class Outbox:
    """Events waiting for the sink, the counters that go with them, and the wake-up pipe of the helper thread."""

    def __init__(self, sink: "Callable[[bytes], object]", cap: int, flush_at: int, log_cap: int = LOG_CAP) -> None:
        self.sink, self.cap, self.flush_at, self.log_cap = sink, cap, flush_at, log_cap
        self.dumps, self.loads = json_codec()
        self.value = value_codec(self.dumps)
        self.events: list[str] = []  # each event already JSON
        self.threads: list[list[object]] = []  # [tid, name] not sent yet
        self.logs: list[str] = []  # logpoint lines, each already JSON
        self._reset()

    def _reset(self) -> None:
        self.pid = os.getpid()
        self.errors: dict[tuple[str, str], int] = {}
        self.dropped = self._sent_dropped = 0
        self.logs_dropped = self._sent_logs_dropped = 0
        self.lock = threading.Lock()  # batches and replies leave one at a time
        self._small = threading.Lock()  # the drop counter and the error table
        self.woke = False
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)

    def emit(self, event: list[object]) -> None:
        self.emit_text(self.dumps(event))  # a str: buffered events are no work for the cyclic GC

    def emit_text(self, text: str) -> None:
        """An event already encoded (the tracer writes the common ones itself: ~3x cheaper than dumps)."""
        events = self.events
        size = len(events)
        if size >= self.cap:
            with self._small:
                self.dropped += 1
            return
        events.append(text)
        if size + 1 >= self.flush_at and not self.woke:
            self.woke = True
            self.wake()

    def log(self, line: dict[str, object]) -> None:
        """Queue one logpoint line (sent with the next flush)."""
        logs = self.logs
        if len(logs) >= self.log_cap:
            with self._small:
                self.logs_dropped += 1
            return
        logs.append(self.dumps(line))
        if len(logs) >= BATCH_EVENTS and not self.woke:
            self.woke = True
            self.wake()

    def urgent(self, event: list[object]) -> None:
        """An event that is never dropped (an uncaught exception)."""
        self.events.append(self.dumps(event))

    def wake(self) -> None:
        try:  # noqa: SIM105 (contextlib is not imported into the target)
            os.write(self.wake_w, b"!")
        except OSError:
            pass

    def drain_wake(self) -> None:
        try:
            while os.read(self.wake_r, 4096):
                pass
        except OSError:
            pass

    def pending(self) -> bool:
        return bool(self.events or self.threads or self.errors or self.logs
                    or self.logs_dropped != self._sent_logs_dropped)

    def error(self, where: str, exc: BaseException) -> None:
        """A failure inside the tracer: counted, reported in the next batch, never raised into the program."""
        try:  # noqa: SIM105
            self.note(where, tname(type(exc)) + ": " + exc_message(exc, 200))
        except Exception:
            pass

    def note(self, where: str, message: str) -> None:
        with self._small:
            key = (where, message)
            if key in self.errors or len(self.errors) < 50:
                self.errors[key] = self.errors.get(key, 0) + 1

    def flush(self) -> None:
        """Send what is buffered now, in batches of at most 4096 events. Waits at most 5 s for a flush under way."""
        if not self.lock.acquire(timeout=5):
            return
        try:
            events, threads = self.events, self.threads
            left = len(events)
            while True:
                count = min(left, BATCH_EVENTS)
                new_threads = threads[: len(threads)]
                del threads[: len(new_threads)]
                with self._small:
                    errors = [{"where": w, "error": m, "count": n} for (w, m), n in self.errors.items()]
                    self.errors, dropped = {}, self.dropped
                if not (count or new_threads or errors or dropped != self._sent_dropped):
                    break
                batch = events[:count]
                del events[:count]
                left -= count
                head = self.dumps({"v": 1, "n": count, "pid": self.pid, "threads": new_threads, "dropped": dropped,
                                   "errors": errors})
                self._send_text(head[:-1] + ',"events":[' + ",".join(batch) + "]}")
                self._sent_dropped = dropped
                if left <= 0:
                    break
            self._flush_logs()
            self.woke = False
        finally:
            self.lock.release()

    def _flush_logs(self) -> None:
        logs = self.logs
        left = len(logs)
        while left > 0 or self.logs_dropped != self._sent_logs_dropped:
            count = min(left, BATCH_EVENTS)
            lines = logs[:count]
            del logs[:count]
            left -= count
            dropped = self.logs_dropped
            self._send_text(f'{{"v":1,"pid":{self.pid},"logpoints":[' + ",".join(lines) + f'],"dropped":{dropped}}}')
            self._sent_logs_dropped = dropped

    def reply(self, rid: object, **fields: object) -> None:
        """`{"v": 1, "pid": p, "reply": rid, **fields}`; nothing when the command had no id."""
        if rid is not None:
            self.message(reply=rid, **fields)

    def message(self, **fields: object) -> None:
        """`{"v": 1, "pid": p, **fields}`, sent at once (between batches, never inside one)."""
        with self.lock:
            self._send({"v": 1, "pid": self.pid, **fields})

    def _send(self, message: dict[str, object]) -> None:
        self._send_text(self.dumps(message))

    def _send_text(self, text: str) -> None:
        try:
            self.sink(text.encode())
        except Exception as exc:
            self.error("sink", exc)

    def after_fork(self) -> None:
        """In a forked child: the parent's buffered events are the parent's to send; new locks and pipe."""
        old = (self.wake_r, self.wake_w)
        del self.events[:], self.threads[:], self.logs[:]
        self._reset()
        self.close(old)

    def close(self, fds: tuple[int, int] | None = None) -> None:
        """Close the wake pipe (or the given old one); a late wake() then fails instead of writing to a reused fd."""
        if fds is None:
            fds, self.wake_r, self.wake_w = (self.wake_r, self.wake_w), -1, -1
        for fd in fds:
            try:  # noqa: SIM105
                os.close(fd)
            except OSError:
                pass
