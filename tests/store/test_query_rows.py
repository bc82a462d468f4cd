"""What a timeline query returns: each event's stored columns, typed, with its function's and thread's names
and its function's parsed register plan; no JSON shaping (that is mcp/wire.py's, tests/mcp/test_wire.py)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.store.query_dataset import CRASH, ENTER, EXIT, MS, Data, S

from strobe.store.functions import insert_functions, set_signatures
from strobe.store.query import EventFilter, EventRow, parse_time, query_events
from strobe.store.registers import RegisterPlan
from strobe.store.schema import EventKind, connect
from strobe.store.sessions import insert_session


def row(conn: sqlite3.Connection, data: Data, ts: int) -> EventRow:
    page = query_events(conn, data.main_key, EventFilter(time_from=parse_time(ts), time_to=parse_time(ts)),
                        limit=10, offset=0)
    assert len(page.events) == 1
    return page.events[0]


def test_rows_are_the_stored_columns_typed(conn: sqlite3.Connection, data: Data) -> None:
    assert row(conn, data, 2 * S) == EventRow(
        id=data.ids["e4"], ts=2 * S, kind=EXIT, pid=100, tid=1, parent=data.ids["e1"], duration=500 * MS,
        retval=0, sampled=False, text=None, args=None, extra=None, function="parse_args", function_raw=None,
        source_file="/proj/src/main.c", line=20, thread_name="main", plan=None,
    )
    enter = row(conn, data, 2500 * MS)
    assert (enter.kind, enter.args, enter.function_raw) == (ENTER, '{"path":"/etc/x"}', "_Z12parse_configv")
    crash = row(conn, data, 6 * S)
    assert (crash.kind, crash.extra, crash.thread_name) == (CRASH, {"signal": "SIGSEGV", "watchValues": {"x": 1}},
                                                            "worker-2")


def test_a_query_parses_each_register_plan_once(tmp_path: Path) -> None:
    conn = connect(tmp_path / "strobe.db")
    try:
        session = insert_session(conn, "prog", "/p/prog", "/p", 100, 1_000)
        typed, plain = insert_functions(conn, [("typed", None, None, None, 0, None),
                                               ("plain", None, None, None, 0, None)])
        set_signatures(conn, [(typed, json.dumps({"params": [], "returns": {"type": "void"}}))])
        conn.executemany(
            "INSERT INTO events (session, ts, kind, pid, tid, func) VALUES (?, ?, ?, 100, 1, ?)",
            [(session.key, ts, int(kind), func) for ts, kind, func in [
                (1, EventKind.FUNCTION_ENTER, typed), (2, EventKind.FUNCTION_EXIT, typed),
                (3, EventKind.FUNCTION_ENTER, plain)]],
        )
        rows = query_events(conn, session.key, EventFilter(), limit=10, offset=0).events
    finally:
        conn.close()
    assert isinstance(rows[0].plan, RegisterPlan) and rows[0].plan.return_type == "void"
    assert rows[1].plan is rows[0].plan
    assert rows[2].plan is None
