"""The last function events of one thread before a moment (a crash event's lastEvents)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strobe.store import sessions as ss
from strobe.store.recent import last_calls
from strobe.store.schema import EVENT_COLUMNS, EventKind, connect


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    c = connect(tmp_path / "strobe.db")
    try:
        yield c
    finally:
        c.close()


def add(conn: sqlite3.Connection, eid: int, session: int, ts: int, kind: EventKind, tid: int, func: int | None) -> None:
    values: dict[str, Any] = dict.fromkeys(EVENT_COLUMNS)
    values.update(session=session, ts=ts, kind=int(kind), pid=100, tid=tid, func=func)
    conn.execute(f"INSERT INTO events (id, {', '.join(EVENT_COLUMNS)}) VALUES ({', '.join('?' * 14)})",
                 (eid, *(values[c] for c in EVENT_COLUMNS)))


def test_last_calls_of_one_thread_up_to_a_moment(conn: sqlite3.Connection) -> None:
    session = ss.insert_session(conn, "prog", "/bin/prog", "/proj", 100, 1).key
    conn.execute("INSERT INTO functions (key, name) VALUES (1, 'prepare'), (2, 'crash_worker')")
    add(conn, 1, session, 10, EventKind.FUNCTION_ENTER, 7, 1)
    add(conn, 2, session, 20, EventKind.FUNCTION_EXIT, 7, 1)
    add(conn, 3, session, 25, EventKind.STDOUT, 7, None)  # not a call
    add(conn, 4, session, 30, EventKind.FUNCTION_ENTER, 8, 1)  # another thread
    add(conn, 5, session, 40, EventKind.FUNCTION_ENTER, 7, 2)
    add(conn, 6, session, 90, EventKind.FUNCTION_EXIT, 7, 2)  # after the moment
    found = last_calls(conn, session, "prog", 100, 7, 50, 10)
    assert found == [
        {"id": "prog-1", "eventType": "function_enter", "function": "prepare", "timestampNs": 10},
        {"id": "prog-2", "eventType": "function_exit", "function": "prepare", "timestampNs": 20},
        {"id": "prog-5", "eventType": "function_enter", "function": "crash_worker", "timestampNs": 40},
    ]
    assert [e["id"] for e in last_calls(conn, session, "prog", 100, 7, 50, 2)] == ["prog-2", "prog-5"]
    assert last_calls(conn, session, "prog", 100, 9, 50, 10) == []
