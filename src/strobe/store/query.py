"""Timeline queries: a typed filter in, SQL built from it, wire-shaped events out.

Name filters run against the small `functions`/`threads` tables and come back as key sets. A query is
planned in two halves, read in one transaction so they agree:

- totalCount: from the count tables (store/counts.py) when the filter is only kind/function/source
  file, or only a time range (whole ~67 ms buckets summed, the partial buckets at the ends counted
  through the (session, ts) index); otherwise counted through the most selective index that fits
  (duration class, return-value class, rare kinds) or the (session, ts) index.
- the page: ids first, through a covering walk of (session, ts) in order, or by sorting the matches of
  a selective index when there are few enough (a cost estimate from the counts); then only the page's
  rows are read.
"""

from __future__ import annotations

import json
import re
import sqlite3
import struct
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np

from strobe.store import counts
from strobe.store.registers import RegisterPlan, parse_plan, words_of
from strobe.store.schema import TIME_BUCKET_SHIFT, EventKind

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


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_EXIT = int(EventKind.FUNCTION_EXIT)


@dataclass
class _Plan:
    """A filter compiled to SQL, plus what the planner needs to count and page it cheaply."""

    clauses: list[str]
    params: list[Any]
    empty: bool = False  # provably matches nothing
    countable: bool = False  # only kind / function / source file: countable from event_counts
    counts_kind: int | None = None
    counts_func: tuple[str, list[Any]] | None = None
    time_only: bool = False  # only a time range: countable from event_time_counts
    ts_from: int | None = None
    ts_to: int | None = None
    kind_index: bool = False  # a rare kind: events_by_kind holds its events in time order
    min_duration: int | None = None  # `duration >= min_duration` can be answered from the postings
    returns: list[Any] | None = None  # return value alternatives (the postings answer them)
    returns_null: bool = False  # return value NULL (idem)
    residual: bool = False  # clauses the postings cannot answer: check their candidates in SQL

    @property
    def where(self) -> str:
        return " AND ".join(self.clauses)


def _compile(conn: sqlite3.Connection, session: int, flt: EventFilter) -> _Plan:
    plan = _Plan(["e.session = ?"], [session])
    clauses, params = plan.clauses, plan.params
    kind = flt.kind
    returns = flt.return_is_null is not None or flt.return_equals is not UNSET
    if returns:
        if kind is not None and kind is not EventKind.FUNCTION_EXIT:
            plan.empty = True
        kind = EventKind.FUNCTION_EXIT
    if kind is not None:
        clauses.append(f"e.kind = {int(kind)}")  # a literal, so the partial index can apply
        if int(kind) > _EXIT:
            clauses.append(f"e.kind > {_EXIT}")
            plan.kind_index = True
    func_clauses: list[str] = []
    func_params: list[Any] = []
    if flt.function is not None:
        func_clauses += _text_clause("name", flt.function, func_params)
    if flt.source_file is not None:
        func_clauses += _text_clause("file", flt.source_file, func_params)
    if func_clauses:
        subquery = f"SELECT key FROM functions WHERE {' AND '.join(func_clauses)}"
        clauses.append(f"e.func IN ({subquery})")
        params += func_params
        plan.counts_func = (subquery, func_params)
    plan.countable = (
        not returns and flt.thread_name_contains is None and flt.time_from is None and flt.time_to is None
        and flt.min_duration_ns is None and flt.pid is None
    )
    plan.counts_kind = None if kind is None else int(kind)
    if flt.thread_name_contains is not None:
        clauses.append(
            "(e.pid, e.tid) IN (SELECT pid, tid FROM threads WHERE session = ? AND instr(name, ?) > 0)"
        )
        params += [session, flt.thread_name_contains]
    if flt.return_is_null is not None:
        clauses.append("e.retval IS NULL" if flt.return_is_null else "e.retval IS NOT NULL")
        plan.returns_null = flt.return_is_null
    if flt.return_equals is not UNSET:
        alternatives: list[Any] = []
        clauses.append(_return_equals_clause(flt.return_equals, alternatives))
        params += alternatives
        if flt.return_equals is None:
            plan.returns_null = True
        else:
            plan.returns = alternatives
    if plan.returns is not None and flt.return_is_null:
        plan.empty = True  # NULL and equal to a value
    ns = flt.min_duration_ns
    if ns is not None:
        if ns > _INT64_MAX:  # beyond any stored integer (and beyond what SQLite can bind)
            plan.empty = True
        clauses.append("e.duration >= ?")
        params.append(min(max(ns, _INT64_MIN), _INT64_MAX))
        if isinstance(ns, int) and not isinstance(ns, bool) and ns <= _INT64_MAX:
            plan.min_duration = ns
    if flt.pid is not None:
        clauses.append("e.pid = ?")
        params.append(flt.pid)
    if flt.time_from is not None or flt.time_to is not None:
        latest = 0
        if (flt.time_from and flt.time_from.relative) or (flt.time_to and flt.time_to.relative):
            row = conn.execute("SELECT max(ts) FROM events WHERE session = ?", (session,)).fetchall()
            latest = int(row[0][0] or 0)
        lo = None if flt.time_from is None else flt.time_from.resolve(latest)
        hi = None if flt.time_to is None else flt.time_to.resolve(latest)
        if (lo is not None and lo > _INT64_MAX) or (hi is not None and hi < _INT64_MIN) or (
            lo is not None and hi is not None and lo > hi
        ):
            plan.empty = True
        plan.ts_from = None if lo is None or lo <= _INT64_MIN else lo
        plan.ts_to = None if hi is None or hi >= _INT64_MAX else hi
        if plan.ts_from is not None:
            clauses.append("e.ts >= ?")
            params.append(plan.ts_from)
        if plan.ts_to is not None:
            clauses.append("e.ts <= ?")
            params.append(plan.ts_to)
        plan.time_only = (
            kind is None and not func_clauses and flt.thread_name_contains is None and flt.min_duration_ns is None
            and flt.pid is None
        )
    # What the postings of one dimension (plus the time range) cannot decide on their own.
    by_returns = plan.returns is not None or plan.returns_null
    plan.residual = bool(
        func_clauses or flt.thread_name_contains is not None or flt.pid is not None
        or (flt.kind is not None and not (by_returns and flt.kind is EventKind.FUNCTION_EXIT))
        or (flt.return_is_null is False) or (by_returns and flt.min_duration_ns is not None)
        or (flt.min_duration_ns is not None and plan.min_duration is None)
    )
    return plan


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


def _sum(conn: sqlite3.Connection, sql: str, params: list[Any]) -> int:
    return int(conn.execute(sql, params).fetchall()[0][0] or 0)


def _session_total(conn: sqlite3.Connection, session: int) -> int:
    return _sum(conn, "SELECT sum(n) FROM event_counts WHERE session = ?", [session])


def _count(conn: sqlite3.Connection, session: int, plan: _Plan, exact_counts: bool) -> int:
    if plan.empty:
        return 0
    if exact_counts and plan.countable:
        sql = "SELECT sum(n) FROM event_counts WHERE session = ?"
        params: list[Any] = [session]
        if plan.counts_kind is not None:
            sql += " AND kind = ?"
            params.append(plan.counts_kind)
        if plan.counts_func is not None:
            sql += f" AND func IN ({plan.counts_func[0]})"
            params += plan.counts_func[1]
        return _sum(conn, sql, params)
    if exact_counts and plan.time_only:
        return _count_time_range(conn, session, plan.ts_from, plan.ts_to)
    hint = "INDEXED BY events_by_kind" if plan.kind_index and exact_counts else ""  # (a current writer made it)
    return _sum(conn, f"SELECT count(*) FROM events e {hint} WHERE {plan.where}", plan.params)


def _count_time_range(conn: sqlite3.Connection, session: int, lo: int | None, hi: int | None) -> int:
    """Events with lo <= ts <= hi: whole time buckets from event_time_counts, the partial buckets at either
    end from the (session, ts) index."""
    shift = TIME_BUCKET_SHIFT

    def exact(a: int, b: int) -> int:
        return _sum(
            conn, "SELECT count(*) FROM events INDEXED BY events_by_time WHERE session = ? AND ts BETWEEN ? AND ?",
            [session, a, b],
        )

    if lo is None and hi is None:
        return _session_total(conn, session)
    if lo is not None and hi is not None and lo >> shift == hi >> shift:
        return exact(lo, hi)
    total = 0
    first_full, last_full = _INT64_MIN, _INT64_MAX
    if lo is not None:
        total += exact(lo, (((lo >> shift) + 1) << shift) - 1)
        first_full = (lo >> shift) + 1
    if hi is not None:
        total += exact((hi >> shift) << shift, hi)
        last_full = (hi >> shift) - 1
    if first_full <= last_full:
        total += _sum(
            conn, "SELECT sum(n) FROM event_time_counts WHERE session = ? AND bucket BETWEEN ? AND ?",
            [session, first_full, last_full],
        )
    return total


# ---- duration and return-value filters: from the postings -----------------------------------------


def _duration_classes(plan: _Plan) -> list[int]:
    assert plan.min_duration is not None
    first = counts.duration_class(plan.min_duration) if plan.min_duration >= 0 else 0
    return [*range(first, counts.duration_class(_INT64_MAX) + 1), counts.SQL_CLASS]


def _return_classes(plan: _Plan) -> list[int]:
    classes: set[int] = set()
    for value in plan.returns or ():
        if isinstance(value, str):
            classes.add(counts.RETURN_TEXT)
            continue
        classes.add(counts.RETURN_REAL)  # a real can equal a number of any type
        integral = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        if integral and _INT64_MIN <= value < 2**63:
            classes.add(counts.return_class(int(value)))
    return sorted(classes)


def _by_sql(conn: sqlite3.Connection, plan: _Plan, ids: np.ndarray) -> np.ndarray:
    """Which of these candidate ids match the whole filter, decided by SQLite."""
    if not len(ids):
        return np.zeros(0, bool)
    found = conn.execute(  # CROSS JOIN: walk the candidates, never the session
        f"SELECT e.id FROM json_each(?) AS j CROSS JOIN events AS e ON e.id = j.value WHERE {plan.where}",
        [counts.ids_json(ids), *plan.params],
    ).fetchall()
    return np.isin(ids, np.array([r[0] for r in found], dtype=np.int64))


def _postings_matches(conn: sqlite3.Connection, session: int, plan: _Plan) -> tuple[np.ndarray, np.ndarray]:
    """(ids, ts) of the matching events, in (ts, id) order, from the postings of the smaller dimension."""
    sources: list[tuple[int, int, list[int]]] = []  # (events, dim, classes)
    by_returns = plan.returns is not None or plan.returns_null
    for dim, classes in (
        (counts.DIM_DURATION, _duration_classes(plan) if plan.min_duration is not None else None),
        (counts.DIM_RETURN, ([counts.RETURN_NULL] if plan.returns_null else _return_classes(plan))
         if by_returns else None),
    ):
        if classes is not None:
            size = _sum(conn, f"SELECT sum(n) FROM event_postings WHERE session = ? AND dim = ? "
                              f"AND cls IN ({', '.join(map(str, classes))})", [session, dim])
            sources.append((size, dim, classes))
    _, dim, classes = min(sources)
    found = counts.load(conn, session, dim, classes)
    ids, ts = found.ids, found.ts
    keep = np.ones(len(ids), bool)
    if plan.ts_from is not None:
        keep &= ts >= plan.ts_from
    if plan.ts_to is not None:
        keep &= ts <= plan.ts_to
    residual = plan.residual or len(sources) > 1
    if dim == counts.DIM_DURATION:
        assert plan.min_duration is not None
        keep &= ~found.valued | (found.values >= plan.min_duration)
        unvalued = keep & ~found.valued  # durations SQLite must compare
    elif plan.returns_null:
        unvalued = np.zeros(len(ids), bool)  # the NULL class: all of them are NULL
    else:
        wanted = [int(v) for v in plan.returns or () if not isinstance(v, str)
                  and (isinstance(v, int) or v.is_integer()) and _INT64_MIN <= v < 2**63]
        keep &= ~found.valued | np.isin(found.values, np.array(wanted, dtype=np.int64))
        unvalued = keep & ~found.valued
    if residual:
        keep[keep] = _by_sql(conn, plan, ids[keep])
    elif unvalued.any():
        keep[unvalued] = _by_sql(conn, plan, ids[unvalued])
    ids, ts = ids[keep], ts[keep]
    order = np.lexsort((ids, ts))
    return ids[order], ts[order]


# ---- pages ---------------------------------------------------------------------------------------

_COLUMNS = """
SELECT e.id, e.ts, e.kind, e.pid, e.tid, e.parent, e.duration, e.retval, e.sampled, e.text, e.args, e.extra,
       f.name, f.raw, f.file, f.line, t.name, f.signature
"""
_JOINS = """
LEFT JOIN functions f ON f.key = e.func
LEFT JOIN threads t ON t.session = e.session AND t.pid = e.pid AND t.tid = e.tid
"""
_SELECT = _COLUMNS + """
FROM (SELECT e.id FROM events e INDEXED BY {index} WHERE {where} ORDER BY e.ts, e.id LIMIT ? OFFSET ?) AS p
JOIN events e ON e.id = p.id""" + _JOINS + "ORDER BY e.ts, e.id"
_SELECT_IDS = _COLUMNS + "FROM events e" + _JOINS + "WHERE e.id IN (SELECT value FROM json_each(?)) ORDER BY e.ts, e.id"


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
    """One page of a session's matching events, oldest first (ts, then id), and how many match in all.
    The count and the page are read in one transaction, so they agree even while the writer commits."""
    own_transaction = not conn.in_transaction
    if own_transaction:
        conn.execute("BEGIN")
    try:
        page = _query(conn, session, session_id, flt, limit=limit, offset=offset, verbose=verbose)
    except BaseException:
        if own_transaction and conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    if own_transaction:
        conn.execute("COMMIT")
    return page


def _query(
    conn: sqlite3.Connection, session: int, session_id: str, flt: EventFilter, *, limit: int, offset: int,
    verbose: bool,
) -> QueryPage:
    exact_counts = counts.maintained(conn)
    plan = _compile(conn, session, flt)
    rows: list[tuple[Any, ...]] = []
    if not plan.empty and exact_counts and (plan.min_duration is not None or plan.returns is not None
                                            or plan.returns_null):
        ids, _ = _postings_matches(conn, session, plan)
        total = len(ids)
        page_ids = ids[max(offset, 0):] if limit < 0 else ids[max(offset, 0):max(offset, 0) + limit]
        if len(page_ids):
            rows = conn.execute(_SELECT_IDS, [counts.ids_json(page_ids)]).fetchall()
    else:
        total = _count(conn, session, plan, exact_counts)
        if total > offset and limit != 0:
            index = "events_by_kind" if plan.kind_index and exact_counts else "events_by_time"
            rows = conn.execute(_SELECT.format(index=index, where=plan.where), [*plan.params, limit, offset]).fetchall()
    plans: dict[str, RegisterPlan | None] = {}
    events = [_to_wire(row, session_id, verbose, plans) for row in rows]
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


_KINDS = {int(k): (k.wire_name, k in (EventKind.FUNCTION_ENTER, EventKind.FUNCTION_EXIT),
                  k is EventKind.FUNCTION_EXIT) for k in EventKind}


def _plan(text: str | None, plans: dict[str, RegisterPlan | None]) -> RegisterPlan | None:
    """The parsed register plan of a function (parsed once per query)."""
    if text is None:
        return None
    if text not in plans:
        plans[text] = parse_plan(text)
    return plans[text]


def _to_wire(
    row: tuple[Any, ...], session_id: str, verbose: bool, plans: dict[str, RegisterPlan | None]
) -> dict[str, Any]:
    (eid, ts, kind, pid, tid, parent, duration, retval, sampled, text, args, extra,
     fname, fraw, ffile, fline, tname, fsignature) = row
    info = _KINDS.get(kind)
    if info is None:
        info = _KINDS[int(EventKind(kind))]  # raises on a kind this version does not know
    wire_name, is_function, is_exit = info
    event: dict[str, Any] = {"id": f"{session_id}-{eid}", "eventType": wire_name, "timestampNs": ts}
    plan = _plan(fsignature, plans) if is_function else None
    if is_function:
        if fname is not None:
            event["function"] = fname
        if ffile is not None:
            event["sourceFile"] = ffile
        if fline is not None:
            event["line"] = fline
        if duration is not None:
            event["durationNs"] = duration
        if is_exit:
            event["returnType"] = plan.return_type if plan is not None else _return_type(_decode_retval(retval))
    if text is not None:
        event["text"] = text
    if kind == EventKind.CRASH:  # the point of a crash event: every detail, verbose or not
        event.update(pid=pid, threadId=tid, threadName=tname)
        event.update(_json(extra) or {})
        return {k: v for k, v in event.items() if v is not None}
    if kind == EventKind.VARIABLE_SNAPSHOT:
        event["values"] = _json(args)  # the point of a snapshot: shown without verbose too
        if not verbose:
            return event
        args = None
    if not verbose:
        return event
    extra_fields = _json(extra) or {}
    followed = extra_fields.pop("followed", None)
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
    shown = {k: v for k, v in event.items() if v is not None}
    if plan is not None:
        _typed(shown, plan, kind, args, retval, followed if isinstance(followed, dict) else {})
    return shown


def _typed(
    event: dict[str, Any], plan: RegisterPlan, kind: int, args: Any, retval: Any, followed: dict[str, Any]
) -> None:
    """Arguments and return value through the function's register plan: values in parameter order with
    their names and DWARF types; the return value by its type (none for void; a null pointer shows as null).
    Pointers the agent followed at call time (daemon/follow.py) show what they pointed to instead."""
    if kind == EventKind.FUNCTION_ENTER and (args is None or isinstance(args, bytes)):
        if plan.names:
            arguments = plan.arguments(words_of(args))
            for key, value in followed.items():
                if key.isdigit() and int(key) < len(arguments):
                    arguments[int(key)] = value
            event.update(arguments=arguments, argumentNames=plan.names, argumentTypes=plan.types)
        else:
            event.pop("arguments", None)
    elif kind == EventKind.FUNCTION_EXIT and (retval is None or isinstance(retval, int)):
        event.pop("returnValue", None)
        if plan.returns_value and retval is not None:
            event["returnValue"] = followed.get("r", plan.return_value(retval))
