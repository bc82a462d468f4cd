"""A filter compiled to SQL, and the two halves of a query planned from it (see store/query.py):

- totalCount: from the count tables (store/counts.py) when the filter is only kind/function/source
  file, or only a time range (whole ~67 ms buckets summed, the partial buckets at the ends counted
  through the (session, ts) index); otherwise counted through the most selective index that fits
  (duration class, return-value class, rare kinds) or the (session, ts) index.
- the matches of a selective index (durations, return values) from the postings, when there are few enough.

    plan = compile_filter(conn, session_key, EventFilter(min_duration_ns=1_000_000))
    total = count(conn, session_key, plan, counts.maintained(conn))
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass
from typing import Any

import numpy as np

from strobe.store import counts
from strobe.store.filters import UNSET, EventFilter, TextMatch
from strobe.store.schema import TIME_BUCKET_SHIFT, EventKind


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
        params.extend([int(value), "true" if value else "false"])  # a native bool, a Python one (JSON text)
        return "e.retval IN (?, ?)"
    if isinstance(value, int | float):
        params.append(value)
        return "e.retval = ?"
    if isinstance(value, str):
        alternatives = [value, json.dumps(value, ensure_ascii=False)]  # as text, and a Python str (JSON text)
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


compile_filter = _compile
count = _count
postings_matches = _postings_matches
