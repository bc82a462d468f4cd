"""The JSON of debug_query's events (mcp/wire.py), from the rows the store reads: summary and verbose, per
kind."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from tests.mcp.wire_pages import query_wire
from tests.store.query_dataset import (
    EXIT,
    MAIN_EVENTS,
    MS,
    TIMEOUT,
    Data,
    S,
    run,
)

from strobe.store import sessions as store_sessions
from strobe.store.query import EventFilter, install_functions, parse_time
from strobe.store.schema import EVENT_COLUMNS, connect
from strobe.store.writer import Writer

# ---- wire format ---------------------------------------------------------------------------------


def wire(conn: sqlite3.Connection, data: Data, name: str, *, verbose: bool) -> dict[str, Any]:
    ts = next(ev.ts for ev in MAIN_EVENTS if ev.name == name)
    page = run(conn, data, EventFilter(time_from=parse_time(ts), time_to=parse_time(ts)), verbose=verbose)
    assert len(page.events) == 1
    return page.events[0]


def eid(data: Data, name: str) -> str:
    return f"{data.main_id}-{data.ids[name]}"


def test_summary_function_exit(conn: sqlite3.Connection, data: Data) -> None:
    assert wire(conn, data, "e4", verbose=False) == {
        "id": eid(data, "e4"),
        "eventType": "function_exit",
        "timestampNs": 2 * S,
        "function": "parse_args",
        "sourceFile": "/proj/src/main.c",
        "line": 20,
        "durationNs": 500 * MS,
        "returnType": "int",
    }


def test_summary_function_enter(conn: sqlite3.Connection, data: Data) -> None:
    assert wire(conn, data, "e5", verbose=False) == {
        "id": eid(data, "e5"),
        "eventType": "function_enter",
        "timestampNs": 2500 * MS,
        "function": "parse_config",
        "sourceFile": "/proj/src/config.c",
        "line": 10,
    }


def test_summary_output_event(conn: sqlite3.Connection, data: Data) -> None:
    assert wire(conn, data, "e2", verbose=False) == {
        "id": eid(data, "e2"),
        "eventType": "stdout",
        "timestampNs": 1 * S,
        "text": "starting\n",
    }


def test_summary_omits_missing_function_fields(conn: sqlite3.Connection, data: Data) -> None:
    assert wire(conn, data, "e8", verbose=False) == {
        "id": eid(data, "e8"),
        "eventType": "function_exit",
        "timestampNs": 4 * S,
        "function": "libc_helper",
        "durationNs": 2 * S,
        "returnType": "object",
    }


@pytest.mark.parametrize(
    ("name", "return_type"),
    [("e6", "int"), ("e7", "pointer"), ("e8", "object"), ("e9", "null"), ("e13", "string"), ("e14", "float")],
)
def test_return_type(conn: sqlite3.Connection, data: Data, name: str, return_type: str) -> None:
    assert wire(conn, data, name, verbose=False)["returnType"] == return_type


def test_verbose_function_exit(conn: sqlite3.Connection, data: Data) -> None:
    assert wire(conn, data, "e4", verbose=True) == {
        "id": eid(data, "e4"),
        "eventType": "function_exit",
        "timestampNs": 2 * S,
        "function": "parse_args",
        "sourceFile": "/proj/src/main.c",
        "line": 20,
        "durationNs": 500 * MS,
        "returnType": "int",
        "threadId": 1,
        "threadName": "main",
        "pid": 100,
        "parentEventId": eid(data, "e1"),
        "returnValue": 0,
        "sampled": False,
    }


def test_verbose_function_enter(conn: sqlite3.Connection, data: Data) -> None:
    assert wire(conn, data, "e5", verbose=True) == {
        "id": eid(data, "e5"),
        "eventType": "function_enter",
        "timestampNs": 2500 * MS,
        "function": "parse_config",
        "functionRaw": "_Z12parse_configv",
        "sourceFile": "/proj/src/config.c",
        "line": 10,
        "threadId": 2,
        "threadName": "worker-1",
        "pid": 100,
        "arguments": {"path": "/etc/x"},
    }


def test_verbose_decodes_json_return_value(conn: sqlite3.Connection, data: Data) -> None:
    event = wire(conn, data, "e8", verbose=True)
    assert event["returnValue"] == {"a": 1, "b": [1, 2]}
    assert event["threadName"] == "worker-2"
    assert event["pid"] == 200
    assert "parentEventId" not in event and "sampled" not in event and "arguments" not in event


def test_verbose_sampled_true_and_pointer_value(conn: sqlite3.Connection, data: Data) -> None:
    assert wire(conn, data, "e11", verbose=True)["sampled"] is True
    assert wire(conn, data, "e7", verbose=True)["returnValue"] == "0x10"


def test_verbose_null_return_value_is_omitted(conn: sqlite3.Connection, data: Data) -> None:
    event = wire(conn, data, "e9", verbose=True)
    assert "returnValue" not in event
    assert event["returnType"] == "null"


@pytest.mark.parametrize("verbose", [True, False])
def test_a_crash_shows_every_detail(conn: sqlite3.Connection, data: Data, verbose: bool) -> None:
    assert wire(conn, data, "e12", verbose=verbose) == {
        "id": eid(data, "e12"),
        "eventType": "crash",
        "timestampNs": 6 * S,
        "threadId": 7,
        "threadName": "worker-2",
        "pid": 200,
        "watchValues": {"x": 1},
        "signal": "SIGSEGV",
    }


def test_verbose_output_event(conn: sqlite3.Connection, data: Data) -> None:
    assert wire(conn, data, "e10", verbose=True) == {
        "id": eid(data, "e10"),
        "eventType": "stderr",
        "timestampNs": 5 * S,
        "text": "oops\n",
        "pid": 200,
    }


def test_wire_events_are_json_serialisable(conn: sqlite3.Connection, data: Data) -> None:
    page = run(conn, data, EventFilter(), verbose=True)
    assert len(json.loads(json.dumps(page.events))) == 14


# ---- a text return value that looks like JSON ---------------------------------------------------


def test_text_return_value_that_is_not_json(tmp_path: Path) -> None:
    db = tmp_path / "strobe.db"
    writer = Writer(db)
    writer.start()
    try:
        record = writer.call(lambda c: store_sessions.insert_session(c, "p", "/p", "/proj", 1, 0)).result(
            timeout=TIMEOUT
        )
        values: dict[str, Any] = dict.fromkeys(EVENT_COLUMNS)
        values.update(session=record.key, ts=1, kind=int(EXIT), pid=1, retval="[INFO] ready")
        writer.submit_rows([tuple(values[c] for c in EVENT_COLUMNS)])
        writer.call(lambda c: None).result(timeout=TIMEOUT)
    finally:
        writer.close()
    conn = connect(db, readonly=True)
    install_functions(conn)
    try:
        page = query_wire(conn, record.key, record.id, EventFilter(), limit=10, offset=0, verbose=True)
    finally:
        conn.close()
    assert page.events[0]["returnType"] == "string"
    assert page.events[0]["returnValue"] == "[INFO] ready"
