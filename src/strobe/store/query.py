"""Timeline queries: a typed filter in, one page of events out, read in one transaction so the page and
totalCount agree. Name filters run against the small `functions`/`threads` tables and come back as key sets;
how a filter is counted and paged is store/query_plan.py. The page: ids first, through a covering walk of
(session, ts) in order, or by sorting the matches of a selective index when there are few enough (a cost
estimate from the counts); then only the page's rows are read.
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
from strobe.store.registers import (
    RegisterPlan,
    decode_retval,
    parse_plan,
    raw_arguments,
    raw_return_type,
    register_value,
    words_of,
)
from strobe.store.schema import EventKind

__all__ = [
    "UNSET", "EventFilter", "QueryPage", "TextMatch", "TimeBound", "_compile", "_return_classes", "canonical_json",
    "install_functions", "parse_time", "query_events",
]


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
            event["returnType"] = plan.return_type if plan is not None else raw_return_type(decode_retval(retval))
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
        arguments=raw_arguments(args),
        returnValue=register_value(retval) if isinstance(retval, int) else decode_retval(retval),
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
