"""Retention: ended sessions past 7 days or over the size cap are purged oldest first; the file shrinks."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.store.test_sessions import insert

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


def test_sessions_ended_more_than_seven_days_ago_expire(conn: sqlite3.Connection) -> None:
    now = 100 * DAY_MS
    old = insert(conn, "old", pid=1)
    edge = insert(conn, "edge", pid=2)
    insert(conn, "running", pid=4)
    older = insert(conn, "older", pid=5)
    ss.finish_process(conn, old.key, 1, SessionStatus.EXITED, 0, now - 8 * DAY_MS)
    ss.retain_session(conn, edge.key, now - 6 * DAY_MS)
    ss.finish_process(conn, older.key, 5, SessionStatus.EXITED, 0, now - 9 * DAY_MS)
    assert [(p.id, p.why) for p in retention.expired(conn, now)] == [("older", "older than 7 days"),
                                                                     ("old", "older than 7 days")]


def test_over_the_size_cap_the_oldest_ended_session_goes_first_never_a_running_one(conn: sqlite3.Connection) -> None:
    now = 10 * DAY_MS
    sessions = [insert(conn, f"s{i}", pid=i + 1) for i in range(4)]
    empty = retention.used_bytes(conn)
    for i, session in enumerate(sessions):
        _fill(conn, session.key, 400, first_id=1 + i * 1000)
    for i, ended in ((2, now - 3000), (0, now - 2000), (1, now - 1000)):  # s2 ended first, s3 still runs
        ss.finish_process(conn, sessions[i].key, i + 1, SessionStatus.EXITED, 0, ended)
    each = (retention.used_bytes(conn) - empty) // 4
    cap = retention.used_bytes(conn) - each * 3 // 2  # room for all but one and a half
    gone = []
    while (victim := retention.next_over_cap(conn, cap)) is not None:
        gone.append((victim.id, victim.why))
        ss.delete_session(conn, victim.key)
    assert gone == [("s2", "over storage.maxBytes"), ("s0", "over storage.maxBytes")]
    assert retention.used_bytes(conn) <= cap
    while (victim := retention.next_over_cap(conn, 1)) is not None:
        ss.delete_session(conn, victim.key)
    assert [r.id for r in ss.list_sessions(conn)] == ["s3"]  # running: never purged, even over the cap


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
