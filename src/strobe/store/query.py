"""Timeline queries: a typed filter in, SQL built from it, wire-shaped events out.

Name filters run against the small `functions`/`threads` tables and come back as key sets, so the
events table is only ever scanned through its (session, ts) index.
"""

from __future__ import annotations

import json
import re
import sqlite3
import struct
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from strobe.store.schema import EventKind

_TIME_RE = re.compile(r"^\s*(-)?\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s|m|h)?\s*$")
_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "m": 60_000_000_000,
            "h": 3_600_000_000_000}

UNSET: Any = object()


@dataclass(frozen=True)
class TimeBound:
    """A point on the session's clock: absolute ns since start, or relative to the latest event."""

    ns: int
    relative: bool

    def resolve(self, latest_ns: int) -> int:
        return latest_ns + self.ns if self.relative else self.ns


def parse_time(value: int | str) -> TimeBound:
    """`123456` or `"2s"` are absolute (since session start); `"-5s"`, `"-500ms"` count back from the
    latest event. Units: ns, us, ms, s, m, h (default ns)."""
    if isinstance(value, int):
        if value < 0:
            return TimeBound(value, relative=True)
        return TimeBound(value, relative=False)
    match = _TIME_RE.match(value)
    if match is None:
        raise ValueError(
            f"'{value}' is not a time: use nanoseconds since session start (e.g. 1500000000), a duration "
            "since start like \"2s\", or a time relative to the latest event like \"-5s\", \"-500ms\", \"-1m\""
        )
    sign, number, unit = match.groups()
    ns = int(Decimal(number) * _UNIT_NS[unit or "ns"])
    return TimeBound(-ns if sign else ns, relative=bool(sign))


@dataclass(frozen=True)
class TextMatch:
    equals: str | None = None
    contains: str | None = None
    matches: str | None = None  # regular expression (Python syntax), searched anywhere


@dataclass(frozen=True)
class EventFilter:
    kind: EventKind | None = None
    function: TextMatch | None = None
    source_file: TextMatch | None = None
    return_equals: Any = UNSET
    return_is_null: bool | None = None
    thread_name_contains: str | None = None
    time_from: TimeBound | None = None
    time_to: TimeBound | None = None
    min_duration_ns: int | None = None
    pid: int | None = None


@dataclass(frozen=True)
class QueryPage:
    events: list[dict[str, Any]]
    total_count: int
    has_more: bool
    pids: list[int] = field(default_factory=list)


def install_functions(conn: sqlite3.Connection) -> None:
    """SQL helpers the queries rely on; call once per reading connection."""
    cache: dict[str, re.Pattern[str]] = {}

    def regexp(pattern: str, value: str | None) -> bool:
        if value is None:
            return False
        compiled = cache.get(pattern)
        if compiled is None:
            compiled = cache[pattern] = re.compile(pattern)
        return compiled.search(value) is not None

    conn.create_function("regexp", 2, regexp, deterministic=True)


def canonical_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _text_clause(column: str, match: TextMatch, params: list[Any]) -> list[str]:
    clauses: list[str] = []
    if match.equals is not None:
        clauses.append(f"{column} = ?")
        params.append(match.equals)
    if match.contains is not None:
        clauses.append(f"instr({column}, ?) > 0")
        params.append(match.contains)
    if match.matches is not None:
        clauses.append(f"regexp(?, {column})")
        params.append(match.matches)
    return clauses


def _where(conn: sqlite3.Connection, session: int, flt: EventFilter) -> tuple[str, list[Any]]:
    clauses = ["e.session = ?"]
    params: list[Any] = [session]
    if flt.kind is not None:
        clauses.append("e.kind = ?")
        params.append(int(flt.kind))
    func_clauses: list[str] = []
    func_params: list[Any] = []
    if flt.function is not None:
        func_clauses += _text_clause("name", flt.function, func_params)
    if flt.source_file is not None:
        func_clauses += _text_clause("file", flt.source_file, func_params)
    if func_clauses:
        clauses.append(f"e.func IN (SELECT key FROM functions WHERE {' AND '.join(func_clauses)})")
        params += func_params
    if flt.thread_name_contains is not None:
        clauses.append(
            "(e.pid, e.tid) IN (SELECT pid, tid FROM threads WHERE session = ? AND instr(name, ?) > 0)"
        )
        params += [session, flt.thread_name_contains]
    if flt.return_is_null is not None or flt.return_equals is not UNSET:
        clauses.append("e.kind = ?")
        params.append(int(EventKind.FUNCTION_EXIT))
    if flt.return_is_null is not None:
        clauses.append("e.retval IS NULL" if flt.return_is_null else "e.retval IS NOT NULL")
    if flt.return_equals is not UNSET:
        clauses.append(_return_equals_clause(flt.return_equals, params))
    if flt.min_duration_ns is not None:
        clauses.append("e.duration >= ?")
        params.append(flt.min_duration_ns)
    if flt.pid is not None:
        clauses.append("e.pid = ?")
        params.append(flt.pid)
    if flt.time_from is not None or flt.time_to is not None:
        latest = 0
        if (flt.time_from and flt.time_from.relative) or (flt.time_to and flt.time_to.relative):
            row = conn.execute("SELECT max(ts) FROM events WHERE session = ?", (session,)).fetchone()
            latest = int(row[0] or 0)
        if flt.time_from is not None:
            clauses.append("e.ts >= ?")
            params.append(flt.time_from.resolve(latest))
        if flt.time_to is not None:
            clauses.append("e.ts <= ?")
            params.append(flt.time_to.resolve(latest))
    return " AND ".join(clauses), params


def _return_equals_clause(value: Any, params: list[Any]) -> str:
    if value is None:
        return "e.retval IS NULL"
    if isinstance(value, bool):
        params.append(int(value))
        return "e.retval = ?"
    if isinstance(value, int | float):
        params.append(value)
        return "e.retval = ?"
    if isinstance(value, str):
        alternatives = [value]
        if re.fullmatch(r"0[xX][0-9a-fA-F]+", value):
            alternatives.append(int(value, 16))  # type: ignore[arg-type]
            alternatives.append(hex(int(value, 16)))
        elif re.fullmatch(r"-?\d+", value):
            alternatives.append(int(value))  # type: ignore[arg-type]
        params.extend(alternatives)
        return f"e.retval IN ({', '.join('?' * len(alternatives))})"
    params.append(canonical_json(value))
    return "e.retval = ?"


_SELECT = """
SELECT e.id, e.ts, e.kind, e.pid, e.tid, e.parent, e.duration, e.retval, e.sampled, e.text, e.args, e.extra,
       f.name, f.raw, f.file, f.line, t.name
FROM events e
LEFT JOIN functions f ON f.key = e.func
LEFT JOIN threads t ON t.session = e.session AND t.pid = e.pid AND t.tid = e.tid
WHERE {where}
ORDER BY e.ts, e.id
LIMIT ? OFFSET ?
"""


def query_events(
    conn: sqlite3.Connection,
    session: int,
    session_id: str,
    flt: EventFilter,
    *,
    limit: int,
    offset: int,
    verbose: bool,
) -> QueryPage:
    where, params = _where(conn, session, flt)
    total = int(conn.execute(f"SELECT count(*) FROM events e WHERE {where}", params).fetchone()[0])
    rows = conn.execute(_SELECT.format(where=where), [*params, limit, offset]).fetchall()
    events = [_to_wire(row, session_id, verbose) for row in rows]
    pids = [int(r[0]) for r in conn.execute("SELECT pid FROM processes WHERE session = ? ORDER BY pid", (session,))]
    return QueryPage(events, total, offset + len(events) < total, pids if len(pids) > 1 else [])


def _json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


_HEX_FROM = 1 << 32


def register_value(value: int) -> int | str:
    """A raw register as the agent sees it: small values as integers, large ones (pointers) in hex."""
    if -_HEX_FROM < value < _HEX_FROM:
        return value
    return hex(value & 0xFFFF_FFFF_FFFF_FFFF)


def _arguments(args: Any) -> Any:
    if isinstance(args, bytes):
        return [register_value(v) for v in struct.unpack(f"<{len(args) // 8}q", args)]
    return _json(args)


def _return_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, int):
        return "int" if -_HEX_FROM < value < _HEX_FROM else "pointer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "pointer" if value.startswith("0x") else "string"
    return "object"


def _decode_retval(value: Any) -> Any:
    """Structured return values are stored as JSON text; other text is returned as it is."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _to_wire(row: tuple[Any, ...], session_id: str, verbose: bool) -> dict[str, Any]:
    (eid, ts, kind, pid, tid, parent, duration, retval, sampled, text, args, extra,
     fname, fraw, ffile, fline, tname) = row
    kind = EventKind(kind)
    event: dict[str, Any] = {"id": f"{session_id}-{eid}", "eventType": kind.wire_name, "timestampNs": ts}
    if kind in (EventKind.FUNCTION_ENTER, EventKind.FUNCTION_EXIT):
        event.update(function=fname, sourceFile=ffile, line=fline, durationNs=duration)
        if kind is EventKind.FUNCTION_EXIT:
            event["returnType"] = _return_type(_decode_retval(retval))
    if text is not None:
        event["text"] = text
    if verbose:
        extra_fields = _json(extra) or {}
        event.update(
            functionRaw=fraw,
            threadId=tid,
            threadName=tname,
            pid=pid,
            parentEventId=None if parent is None else f"{session_id}-{parent}",
            arguments=_arguments(args),
            returnValue=register_value(retval) if isinstance(retval, int) else _decode_retval(retval),
            watchValues=extra_fields.pop("watchValues", None),
            sampled=None if sampled is None else bool(sampled),
        )
        event.update(extra_fields)
    return {k: v for k, v in event.items() if v is not None}
