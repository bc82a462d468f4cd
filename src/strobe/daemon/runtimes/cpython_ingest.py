"""From the Python tracer's JSON batches (src/strobe/instrument/pytracer/tracer.py) to event rows.

An event is `[kind, fid, ts_ns, tid, seq, parent_seq, payload]`: 1 enter ({"args": [[name, value], ...]} or
{"resumed": true} for a generator or coroutine resuming), 2 return ({"return": v} or {"yielded": v}), 3 unwind
({"exception": {type, message, line}}), 9 an uncaught exception (the crash event). Sequence numbers are the
process's; enters are remembered by seq until their call ends, so a child's parent and a return's enter become
event ids. Timestamps are CLOCK_MONOTONIC like the daemon's. Runs on the ingest thread.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import orjson

from strobe.daemon.ingest import MAX_PENDING_ROWS, TraceIngest
from strobe.store.batches import ColumnGroup
from strobe.store.schema import EventKind

log = logging.getLogger(__name__)

ENTER, RETURN, UNWIND, CRASH = 1, 2, 3, 9
_KINDS = (ENTER, RETURN, UNWIND, CRASH)  # another kind (a newer tracer's) is skipped
ENTER_KIND, EXIT_KIND, CRASH_KIND = int(EventKind.FUNCTION_ENTER), int(EventKind.FUNCTION_EXIT), int(EventKind.CRASH)
ENTER_COLUMNS = ("id", "ts", "tid", "func", "parent", "args", "extra")
EXIT_COLUMNS = ("id", "ts", "tid", "func", "parent", "duration", "retval", "extra")
CRASH_COLUMNS = ("id", "ts", "tid", "extra")
WATCH_ID_STRIDE = 1 << 16  # a Python watch's tracer id: watch set version * stride + its id in the set
MAX_OPEN_CALLS = 100_000  # enters remembered for their children and returns (threads that died mid-call leak)
_BACKTRACE_SHOWN = 50


def _json(value: Any) -> str:
    """Compact JSON text (orjson: ~80 ns for an argument list, where json.JSONEncoder takes ~1 us)."""
    return orjson.dumps(value).decode()


def stored_value(value: Any) -> Any:
    """A rendered return or yielded value as the `retval` column keeps it, so that debug_query's returnValue
    filter finds it like a native one: None as NULL, numbers as numbers, anything else as JSON text (a bool
    as 'true'/'false', a string quoted)."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
        return value
    if isinstance(value, float):
        return value
    return _json(value)


def crash_fields(payload: dict[str, Any]) -> dict[str, Any]:
    """An uncaught exception as a crash event's fields: the exception, the innermost frame and its locals, and
    the traceback innermost first (like a native crash's backtrace)."""
    frames = [f for f in payload.get("traceback", []) if isinstance(f, dict)][::-1][:_BACKTRACE_SHOWN]
    kind, message = str(payload.get("type", "?")), str(payload.get("message", ""))
    fields: dict[str, Any] = {"runtime": str(payload.get("runtime", "cpython")), "exceptionType": kind,
                              "exceptionMessage": message, "threadName": payload.get("thread")}
    where = ""
    if frames:
        top = frames[0]
        fields.update(function=top.get("function"), sourceFile=top.get("file"), line=top.get("line"))
        fields["locals"] = top.get("locals", {})
        where = f" in {top.get('function')} ({os.path.basename(str(top.get('file')))}:{top.get('line')})"
    fields["backtrace"] = frames
    fields["text"] = f"Uncaught {kind}: {message}{where}"
    return {k: v for k, v in fields.items() if v is not None}


class PythonIngest(TraceIngest):
    """The Python tracer's batches of one process (and, being a TraceIngest, its native trace batches too: a
    CPython process can have C functions hooked)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._open: dict[int, int] = {}  # enter seq -> event id, until the call ends

    def on_py_batch(self, data: bytes) -> None:
        try:
            message = orjson.loads(data)  # ~1.6x json's speed
        except ValueError:  # orjson.JSONDecodeError
            log.warning("pid %d: a Python tracer batch is not JSON (%d bytes); dropped", self.pid, len(data))
            return
        if not isinstance(message, dict):
            return
        if "reply" in message:
            if "error" in message:
                log.warning("pid %d: the Python tracer refused command %s: %s", self.pid, message.get("reply"),
                            message.get("error"))
            return
        threads = message.get("threads")
        if threads:
            self._name_threads([(int(tid), str(name)) for tid, name in threads])
        for error in message.get("errors") or ():
            log.warning("pid %d: in-process tracer: %s", self.pid, error)
            self.table.note(str(error))
        events = [event for event in message.get("events") or () if event[0] in _KINDS]
        if events:
            self._store(events)
        dropped = int(message.get("dropped") or 0)
        if dropped > self.dropped:
            self.dropped = dropped
            self.store_counters()

    def _store(self, events: list[list[Any]]) -> None:
        """The events as three column groups (enters, exits, crashes: many rows per INSERT statement) and one
        summary row each for the count tables."""
        first = self.writer.reserve_ids(len(events))
        table, start, opened = self.table.slots, self.start_ns, self._open
        enters: list[Any] = []  # ENTER_COLUMNS, row after row
        exits: list[Any] = []  # EXIT_COLUMNS
        crashes: list[Any] = []  # CRASH_COLUMNS
        summary: list[tuple[Any, ...]] = []
        for eid, (kind, fid, ts, tid, seq, parent_seq, payload) in enumerate(events, first):
            ts -= start
            slot = table.get(fid)
            func = slot.db_key if slot is not None else None
            if kind == ENTER:
                args = payload.get("args")
                extra: dict[str, Any] | None = {"resumed": True} if "resumed" in payload else None
                if "watches" in payload:
                    watched = self._watch_values(payload["watches"], fid)
                    if watched:
                        extra = {**(extra or {}), "watchValues": watched}
                enters += (eid, ts, tid, func, opened.get(parent_seq), None if args is None else _json(args),
                           None if extra is None else _json(extra))
                summary.append((eid, ts, ENTER_KIND, func, None, None))
                opened[seq] = eid
                if len(opened) > MAX_OPEN_CALLS:
                    del opened[next(iter(opened))]
            elif kind == CRASH:
                crashes += (eid, ts, tid, _json(crash_fields(payload)))
                summary.append((eid, ts, CRASH_KIND, None, None, None))
            else:
                opened.pop(payload.get("enter"), None)
                exit_extra: dict[str, Any] = {}
                retval = None
                if kind == UNWIND:
                    exit_extra["exception"] = payload.get("exception")
                elif "yielded" in payload:
                    exit_extra["yielded"] = True
                    retval = stored_value(payload["yielded"])
                else:
                    retval = stored_value(payload.get("return"))
                if "watches" in payload:
                    watched = self._watch_values(payload["watches"], fid)
                    if watched:
                        exit_extra["watchValues"] = watched
                duration = payload.get("duration")
                exits += (eid, ts, tid, func, opened.get(parent_seq), duration, retval,
                          _json(exit_extra) if exit_extra else None)
                summary.append((eid, ts, EXIT_KIND, func, duration, retval))
        constants = (("session", self.session), ("pid", self.pid))
        groups = [ColumnGroup(columns, (*constants, ("kind", kind)), values) for columns, kind, values in (
            (ENTER_COLUMNS, ENTER_KIND, enters), (EXIT_COLUMNS, EXIT_KIND, exits), (CRASH_COLUMNS, CRASH_KIND, crashes))
            if values]
        self.writer.wait_for_room(MAX_PENDING_ROWS)
        self.writer.submit_groups(self.session, first, groups, summary)
        self.events += len(events)

    def _watch_values(self, captured: dict[str, Any], slot: int) -> dict[str, Any]:
        """{label: value} of the watches the tracer read at a call, by the watch set each id was sent in."""
        out: dict[str, Any] = {}
        for key, value in captured.items():
            number = int(key)
            decoder = self.watches.get(number // WATCH_ID_STRIDE)
            found = decoder.python(number % WATCH_ID_STRIDE, slot, value) if decoder is not None else None
            if found is not None:
                out[found[0]] = found[1]
        return out
