"""A session's timeline as a neutral stream of drawable items, for the exporters (chrome_trace, html_timeline).

`read_session` opens one read transaction on the store (any connection; WAL lets it read while the daemon writes)
and `Timeline.items()` walks the session's events oldest first, turning each thread's enter/exit pairs into `Call`s
(closed when their exit arrives, so items come out in completion order), output lines into `Output`, crashes,
pauses and logpoints into `Instant`, and numeric poll snapshot values into `Sample`. Values are rendered exactly as
debug_query's verbose events show them (mcp/wire.py; calls' through export/call_values.py, which caches what each
function's events share). Memory stays bounded: only each thread's open calls are held.

    with contextlib.closing(connect(db, readonly=True)) as conn:
        timeline = read_session(conn, "server-2026-02-05-14h32")
        for item in timeline.items():
            ...
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from strobe.errors import SessionNotFound
from strobe.export.call_values import COLUMNS, LOCATION_KEYS, CallValues, Function, Row, kind_of
from strobe.mcp import wire
from strobe.store import sessions as store_sessions
from strobe.store.filters import TimeBound
from strobe.store.schema import EventKind
from strobe.store.sessions import ProcessRecord, SessionRecord

Thread = tuple[int, int]  # (pid, tid)

_DROPPED_DETAILS = ("frameMemory", "lastEvents", "registers")  # bulky crash details a picture does not need
_BATCH = 2048  # rows fetched at a time
MAX_SERIES = 16  # numeric series a snapshot contributes at most (a struct's fields flattened one level)


@dataclass(frozen=True)
class Call:
    """One function call on one thread, from its enter to its exit (or to the end of what was read)."""

    pid: int
    tid: int
    name: str
    start_ns: int
    end_ns: int
    args: dict[str, Any]  # arguments, returnValue, sourceFile, line… as debug_query shows them
    unfinished: str | None = None  # why it has no exit: still running, crashed, exit not recorded


@dataclass(frozen=True)
class Output:
    pid: int
    tid: int | None
    ts_ns: int
    stream: str  # stdout | stderr
    text: str


@dataclass(frozen=True)
class Instant:
    """A crash, a breakpoint pause or a logpoint's line: a moment with its details."""

    pid: int
    tid: int | None
    ts_ns: int
    kind: str  # crash | pause | logpoint
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Sample:
    """The numeric values of one poll target at one tick (debug_read with poll): series name → number."""

    pid: int
    ts_ns: int
    name: str
    values: dict[str, float]


Item = Call | Output | Instant | Sample


@dataclass
class _Open:
    event_id: int
    name: str
    func_key: tuple[str | None, str | None]  # (name, source file): an exit closes the innermost open call of both
    start_ns: int
    args: dict[str, Any]


@dataclass
class Timeline:
    """One session's events, ready to walk once with `items()` (inside the read transaction `read_session` began).
    After the walk: `count` items, `truncated` when `max_items` stopped it, `threads` seen and their names."""

    conn: sqlite3.Connection
    record: SessionRecord
    processes: list[ProcessRecord]
    thread_names: dict[Thread, str]
    end_ns: int  # the session's last timestamp (of the window, when one is given): where unfinished calls end
    time_from: int | None = None
    time_to: int | None = None
    max_event_bytes: int = wire.MAX_EVENT_BYTES
    threads: set[Thread] = field(default_factory=set)
    count: int = 0
    truncated: bool = False

    def close(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("COMMIT")

    def items(self, max_items: int | None = None) -> Iterator[Item]:
        """Every item, calls closed as their exits come; at most `max_items` (then `truncated`). Calls still open at
        the end close at `end_ns` (or where the walk stopped), marked unfinished."""
        stacks: dict[Thread, list[_Open]] = {}
        values = CallValues(self.conn, self.record.id, self.max_event_bytes, self.thread_names)
        last_ts = 0
        try:
            for row in self._rows():
                if max_items is not None and self.count >= max_items:
                    self.truncated = True
                    break
                last_ts = row.ts
                items = self._item(row, stacks, values)
                if items:
                    self.count += len(items)
                    yield from items
            end = last_ts if self.truncated else max(self.end_ns, last_ts)
            reason = "export stopped at maxEvents" if self.truncated else self._unfinished_reason()
            for (pid, tid), stack in stacks.items():
                while stack:  # innermost first: each ends where its caller does
                    opened = stack.pop()
                    self.count += 1
                    yield Call(pid, tid, opened.name, opened.start_ns, max(end, opened.start_ns),
                               {**opened.args, "unfinished": reason}, reason)
        finally:
            self.close()

    def _unfinished_reason(self) -> str:
        status = self.record.status.value
        if status == "running":
            return "still running when exported"
        if status == "crashed":
            return "no exit recorded: the process crashed"
        return f"no exit recorded (session {status})"

    def _rows(self) -> Iterator[Row]:
        where, params = "e.session = ?", [self.record.key]
        if self.time_from is not None:
            where += " AND e.ts >= ?"
            params.append(self.time_from)
        if self.time_to is not None:
            where += " AND e.ts <= ?"
            params.append(self.time_to)
        cursor = self.conn.execute(f"SELECT {COLUMNS} FROM events e INDEXED BY events_by_time "
                                   f"WHERE {where} ORDER BY e.ts, e.id", params)
        while batch := cursor.fetchmany(_BATCH):
            yield from map(Row._make, batch)

    def _item(self, row: Row, stacks: dict[Thread, list[_Open]], values: CallValues) -> list[Item]:
        kind = kind_of(row.kind)
        pid = row.pid if row.pid is not None else self.record.pid
        tid = row.tid
        if tid is not None:
            self.threads.add((pid, tid))
        if kind is EventKind.FUNCTION_ENTER or kind is EventKind.FUNCTION_EXIT:
            if tid is None:
                return []
            fn = values.function(row.func)
            stack = stacks.get((pid, tid))
            if stack is None:
                stack = stacks[(pid, tid)] = []
            if kind is EventKind.FUNCTION_ENTER:
                stack.append(_Open(row.id, fn.name or "?", fn.key, row.ts, values.enter(row, fn)))
                return []
            return self._exit(row, fn, pid, tid, stack, values)
        if kind in (EventKind.STDOUT, EventKind.STDERR):
            return [Output(pid, tid, row.ts, kind.wire_name, row.text or "")]
        if kind is EventKind.VARIABLE_SNAPSHOT:
            shown = values.shown(row, kind, values.function(row.func))
            return [Sample(pid, row.ts, label, series) for label, series in counters(shown.get("values")).items()]
        if kind in (EventKind.CRASH, EventKind.PAUSE, EventKind.LOGPOINT):
            shown = values.shown(row, kind, values.function(row.func))
            details = {k: v for k, v in shown.items() if k not in _DROPPED_DETAILS and k not in ("timestampNs",)}
            return [Instant(pid, tid, row.ts, kind.wire_name, _instant_name(kind, shown), details)]
        return []

    @staticmethod
    def _exit(row: Row, fn: Function, pid: int, tid: int, stack: list[_Open], values: CallValues) -> list[Item]:
        ret, location = values.exit(row, fn)
        name, key = fn.name or "?", fn.key
        depth = next((i for i in range(len(stack) - 1, -1, -1) if stack[i].func_key == key), None)
        if depth is None:  # its enter was not read: before the window, trimmed, or hooked mid-call
            start = max(row.ts - (row.duration or 0), 0)
            where = {k: location[k] for k in LOCATION_KEYS if k in location}
            args = {**where, **ret, "id": location["id"], "enter": "not recorded"}
            return [Call(pid, tid, name, start, row.ts, args)]
        out: list[Item] = []
        while len(stack) > depth + 1:  # callees whose exits were lost end with their caller
            lost = stack.pop()
            out.append(Call(pid, tid, lost.name, lost.start_ns, max(row.ts, lost.start_ns),
                            {**lost.args, "unfinished": "exit not recorded"}, "exit not recorded"))
        opened = stack.pop()
        out.append(Call(pid, tid, name, opened.start_ns, max(row.ts, opened.start_ns), {**opened.args, **ret}))
        return out


def _instant_name(kind: EventKind, shown: dict[str, Any]) -> str:
    if kind is EventKind.CRASH:
        what = shown.get("signal") or shown.get("exceptionType") or "crash"
        where = shown.get("function")
        return f"crash: {what}" + (f" in {where}" if where else "")
    if kind is EventKind.PAUSE:
        return f"pause at {shown.get('function') or shown.get('line') or '?'}"
    return f"logpoint: {shown.get('message') or shown.get('function') or ''}"[:200]


def counters(values: Any) -> dict[str, dict[str, float]]:
    """A snapshot's numbers by target: {label: {"value": n}}, or a struct's numeric fields {label: {field: n}} (one
    level); booleans, strings, errors and deeper values are left out; at most MAX_SERIES series in all."""
    out: dict[str, dict[str, float]] = {}
    if not isinstance(values, dict):
        return out
    room = MAX_SERIES
    for label, value in values.items():
        series: dict[str, float] = {}
        if _is_number(value):
            series["value"] = float(value)
        elif isinstance(value, dict) and "error" not in value:
            series = {str(k): float(v) for k, v in value.items() if _is_number(v)}
        series = dict(list(series.items())[:room])
        if series:
            out[str(label)] = series
            room -= len(series)
        if room <= 0:
            break
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def read_session(conn: sqlite3.Connection, session_id: str, *, time_from: TimeBound | None = None,
                 time_to: TimeBound | None = None, max_event_bytes: int = wire.MAX_EVENT_BYTES) -> Timeline:
    """Begin a read transaction and describe the session: its record, processes, thread names, last timestamp.
    Raises SessionNotFound. The returned Timeline ends the transaction when its walk ends (or `close()`)."""
    conn.execute("BEGIN")
    try:
        record = store_sessions.get_session(conn, session_id)
        if record is None:
            raise SessionNotFound(session_id)
        processes = store_sessions.session_processes(conn, [record.key]).get(record.key, [])
        names = {(int(pid), int(tid)): str(name) for pid, tid, name in conn.execute(
            "SELECT pid, tid, name FROM threads WHERE session = ? AND name IS NOT NULL", (record.key,))}
        latest = conn.execute("SELECT max(ts) FROM events WHERE session = ?", (record.key,)).fetchone()[0] or 0
        lo = None if time_from is None else max(time_from.resolve(latest), 0)
        hi = None if time_to is None else time_to.resolve(latest)
        end = latest if hi is None else min(latest, hi)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return Timeline(conn, record, processes, names, end, lo, hi, max_event_bytes)
