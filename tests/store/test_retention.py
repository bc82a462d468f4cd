"""Retention: ended sessions past 7 days or over the size cap are purged oldest first; the file shrinks."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.store.test_sessions import add_events, insert, processes

from strobe.store import retention
from strobe.store import sessions as ss
from strobe.store.schema import connect
from strobe.store.sessions import SessionStatus

DAY_MS = 24 * 3600 * 1000


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    c = connect(tmp_path / "strobe.db")
    try:
        yield c
    finally:
        c.close()


def _fill(conn: sqlite3.Connection, session: int, rows: int, first_id: int) -> None:
    conn.executemany("INSERT INTO events (id, session, ts, kind, text) VALUES (?, ?, ?, 3, ?)",
                     [(first_id + i, session, i, "x" * 1000) for i in range(rows)])


def test_sessions_ended_more_than_seven_days_ago_are_purged(conn: sqlite3.Connection) -> None:
    now = 100 * DAY_MS
    old = insert(conn, "old", pid=1)
    edge = insert(conn, "edge", pid=2)
    running = insert(conn, "running", pid=4)
    ss.finish_process(conn, old.key, 1, SessionStatus.EXITED, 0, now - 8 * DAY_MS)
    ss.retain_session(conn, edge.key, now - 6 * DAY_MS)
    add_events(conn, old.key, 4, first_id=1)
    add_events(conn, running.key, 2, first_id=10)
    purged = retention.purge(conn, now, max_bytes=1 << 40)
    assert [(p.id, p.why) for p in purged] == [("old", "older than 7 days")]
    assert ss.count_events(conn, old.key) == 0 and processes(conn, old.key) == []
    assert [r.id for r in ss.list_sessions(conn)] == ["edge", "running"]
    assert ss.count_events(conn, running.key) == 2


def test_over_the_size_cap_the_oldest_ended_sessions_go_first_never_a_running_one(conn: sqlite3.Connection) -> None:
    now = 10 * DAY_MS
    sessions = [insert(conn, f"s{i}", pid=i + 1) for i in range(4)]
    empty = retention.used_bytes(conn)
    for i, session in enumerate(sessions):
        _fill(conn, session.key, 400, first_id=1 + i * 1000)  # ~400 KB each
    for i, ended in ((2, now - 3000), (0, now - 2000), (1, now - 1000)):  # s2 ended first, s3 still runs
        ss.finish_process(conn, sessions[i].key, i + 1, SessionStatus.EXITED, 0, ended)
    each = (retention.used_bytes(conn) - empty) // 4
    cap = retention.used_bytes(conn) - each * 3 // 2  # room for all but one and a half
    purged = retention.purge(conn, now, max_bytes=cap)
    assert [(p.id, p.why) for p in purged] == [("s2", "over storage.maxBytes"), ("s0", "over storage.maxBytes")]
    assert retention.used_bytes(conn) <= cap
    assert [r.id for r in ss.list_sessions(conn)] == ["s1", "s3"]
    everything = retention.purge(conn, now, max_bytes=1)
    assert [p.id for p in everything] == ["s1"]  # s3 is running: never purged, even over the cap
    assert [r.id for r in ss.list_sessions(conn)] == ["s3"]


def test_shrink_gives_deleted_sessions_space_back_to_the_disk(conn: sqlite3.Connection, tmp_path: Path) -> None:
    assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == retention.INCREMENTAL
    session = insert(conn, "big", pid=1)
    _fill(conn, session.key, 5000, first_id=1)  # ~5 MB
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = os.path.getsize(tmp_path / "strobe.db")
    ss.delete_session(conn, session.key)
    released = retention.shrink(tmp_path / "strobe.db")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    after = os.path.getsize(tmp_path / "strobe.db")
    assert released > 4_000_000
    assert before - after > 4_000_000


def test_a_store_from_before_incremental_vacuum_is_converted_once(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    legacy = sqlite3.connect(path)
    legacy.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    legacy.commit()
    legacy.close()
    conn = connect(path)
    try:
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == retention.INCREMENTAL
    finally:
        conn.close()
