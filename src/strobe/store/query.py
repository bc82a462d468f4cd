"""Timeline queries: a typed filter in, one page of event rows (`EventRow`: the stored columns, typed) out,
read in one transaction so the page and totalCount agree. Name filters run against the small
`functions`/`threads` tables and come back as key sets; how a filter is counted and paged is
store/query_plan.py. The page: ids first, through a covering walk of (session, ts) in order, or by sorting the
matches of a selective index when there are few enough (a cost estimate from the counts); then only the
page's rows are read. What the client sees of a row is shaped in mcp/wire.py.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from strobe.store import counts
from strobe.store.filters import UNSET, EventFilter, TextMatch, TimeBound, parse_time
from strobe.store.query_plan import _compile, _count, _postings_matches, _return_classes, canonical_json
from strobe.store.registers import RegisterPlan, parse_plan
from strobe.store.schema import EventKind

__all__ = [
    "UNSET", "EventFilter", "EventRow", "QueryPage", "TextMatch", "TimeBound", "_compile", "_return_classes",
    "canonical_json", "install_functions", "parse_time", "query_events",
]


@dataclass(frozen=True)
class EventRow:
    """One stored event as read: its columns, its function's and thread's names, and the function's parsed
    register plan (store/registers.py). Rendering it for a client is mcp/wire.py's job."""

    id: int
    ts: int
    kind: EventKind
    pid: int | None
    tid: int | None
    parent: int | None  # the id of the enclosing call's enter event
    duration: int | None
    retval: int | float | str | None  # a raw register (native), or text (JSON for structured values)
    sampled: bool | None
    text: str | None  # an output line
    args: bytes | str | None  # raw argument registers (native), or JSON text (arguments, snapshot values)
    extra: dict[str, Any] | None  # crash details, watch values, followed pointers
    function: str | None
    function_raw: str | None
    source_file: str | None
    line: int | None
    thread_name: str | None
    plan: RegisterPlan | None
    runtime: str = "native"  # whose values args and retval are: a RuntimeKind value (the function's, else native)
    unfollowed: bool = False  # recorded past its function's follow limit: its pointers show addresses


@dataclass(frozen=True)
class QueryPage:
    events: list[EventRow]
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


_COLUMNS = """
SELECT e.id, e.ts, e.kind, e.pid, e.tid, e.parent, e.duration, e.retval, e.sampled, e.text, e.args, e.extra,
       f.name, f.raw, f.file, f.line, t.name, f.signature, f.runtime
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
    flt: EventFilter,
    *,
    limit: int,
    offset: int,
) -> QueryPage:
    """One page of a session's matching events, oldest first (ts, then id), and how many match in all.
    The count and the page are read in one transaction, so they agree even while the writer commits.
    The rows are typed; mcp/wire.py renders them."""
    own_transaction = not conn.in_transaction
    if own_transaction:
        conn.execute("BEGIN")
    try:
        page = _query(conn, session, flt, limit=limit, offset=offset)
    except BaseException:
        if own_transaction and conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    if own_transaction:
        conn.execute("COMMIT")
    return page


def _query(conn: sqlite3.Connection, session: int, flt: EventFilter, *, limit: int, offset: int) -> QueryPage:
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
    events = [_row(row, plans) for row in rows]
    pids = [int(r[0]) for r in conn.execute("SELECT pid FROM processes WHERE session = ? ORDER BY pid", (session,))]
    return QueryPage(events, total, offset + len(events) < total, pids if len(pids) > 1 else [])


def _json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


_KIND_OF = {int(k): k for k in EventKind}


def _row(row: tuple[Any, ...], plans: dict[str, RegisterPlan | None]) -> EventRow:
    (eid, ts, kind, pid, tid, parent, duration, retval, sampled, text, args, extra,
     fname, fraw, ffile, fline, tname, fsignature, fruntime) = row
    fields = _json(extra)
    return EventRow(
        id=eid, ts=ts, kind=_KIND_OF.get(kind) or EventKind(kind),  # raises on a kind this version does not know
        pid=pid, tid=tid, parent=parent, duration=duration, retval=retval,
        sampled=None if sampled is None else bool(sampled & 1), unfollowed=bool(sampled and sampled & 2), text=text,
        args=args,
        extra=fields if isinstance(fields, dict) else None,
        function=fname, function_raw=fraw, source_file=ffile, line=fline, thread_name=tname,
        plan=_plan(fsignature, plans), runtime=fruntime or "native",
    )


def _plan(text: str | None, plans: dict[str, RegisterPlan | None]) -> RegisterPlan | None:
    """The parsed register plan of a function (parsed once per query)."""
    if text is None:
        return None
    if text not in plans:
        plans[text] = parse_plan(text)
    return plans[text]
