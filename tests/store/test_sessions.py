"""Session and process rows (strobe.store.sessions), on a direct connection to a store in tmp_path."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strobe.mcp import wire
from strobe.store import sessions as ss
from strobe.store.schema import EVENT_COLUMNS, EventKind, connect
from strobe.store.sessions import SessionRecord, SessionStatus


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    c = connect(tmp_path / "strobe.db")
    try:
        yield c
    finally:
        c.close()


def insert(
    conn: sqlite3.Connection, base: str = "prog", pid: int = 100, started: int = 1_000
) -> SessionRecord:
    return ss.insert_session(conn, base, f"/bin/{base}", "/proj", pid, started)


def add_events(conn: sqlite3.Connection, session: int, n: int, first_id: int) -> None:
    rows = []
    for i in range(n):
        values: dict[str, Any] = dict.fromkeys(EVENT_COLUMNS)
        values.update(session=session, ts=i, kind=int(EventKind.STDOUT), pid=100, text=f"{i}\n")
        rows.append((first_id + i, *(values[c] for c in EVENT_COLUMNS)))
    conn.executemany(
        f"INSERT INTO events (id, {', '.join(EVENT_COLUMNS)}) VALUES ({', '.join('?' * 14)})", rows
    )


def add_thread(conn: sqlite3.Connection, session: int, tid: int) -> None:
    conn.execute("INSERT INTO threads (session, pid, tid, name) VALUES (?, 100, ?, 't')", (session, tid))


def processes(conn: sqlite3.Connection, session: int) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT pid, status, exit_code, started_at, ended_at FROM processes WHERE session = ? ORDER BY pid",
        (session,),
    ).fetchall()


# ---- insert_session ------------------------------------------------------------------------------


def test_insert_session_creates_running_session_and_process(conn: sqlite3.Connection) -> None:
    record = ss.insert_session(conn, "server-2026-02-05-14h32", "/proj/server", "/proj", 4242, 1_700_000)
    assert record == SessionRecord(
        key=record.key,
        id="server-2026-02-05-14h32",
        binary_path="/proj/server",
        project_root="/proj",
        pid=4242,
        started_at=1_700_000,
        ended_at=None,
        status=SessionStatus.RUNNING,
        exit_code=None,
        retained=False,
        trimmed=0,
    )
    assert processes(conn, record.key) == [(4242, "running", None, 1_700_000, None)]
    assert ss.get_session(conn, "server-2026-02-05-14h32") == record
    assert ss.get_session_by_key(conn, record.key) == record


def test_insert_session_collision_suffixes(conn: sqlite3.Connection) -> None:
    ids = [insert(conn, "prog").id for _ in range(4)]
    assert ids == ["prog", "prog-2", "prog-3", "prog-4"]
    assert len({r.key for r in ss.list_sessions(conn)}) == 4


def test_insert_session_fills_first_free_suffix(conn: sqlite3.Connection) -> None:
    insert(conn, "prog")
    insert(conn, "prog")
    insert(conn, "prog")
    conn.execute("DELETE FROM sessions WHERE id = 'prog-2'")
    assert insert(conn, "prog").id == "prog-2"
    assert insert(conn, "prog").id == "prog-4"


def test_insert_session_base_that_looks_like_a_suffixed_id(conn: sqlite3.Connection) -> None:
    assert insert(conn, "prog").id == "prog"
    assert insert(conn, "prog-2").id == "prog-2"
    assert insert(conn, "prog").id == "prog-3"
    assert insert(conn, "prog-2").id == "prog-2-2"


def test_insert_session_ids_are_case_sensitive(conn: sqlite3.Connection) -> None:
    assert insert(conn, "Prog").id == "Prog"
    assert insert(conn, "prog").id == "prog"
    assert insert(conn, "prog").id == "prog-2"
    assert insert(conn, "Prog").id == "Prog-2"


@pytest.mark.parametrize(
    ("base", "lookalikes"),
    [
        ("a_b", ["aXb", "aXb-2", "a-b-2"]),  # '_' is LIKE's single-character wildcard
        ("50%", ["50", "50abc", "50x-2", "50%x"]),  # '%' is LIKE's any-string wildcard
        ("a\\b", ["a\\\\b", "ab-2"]),  # the escape character itself
    ],
)
def test_insert_session_wildcards_do_not_collide(
    conn: sqlite3.Connection, base: str, lookalikes: list[str]
) -> None:
    for other in lookalikes:
        assert insert(conn, other).id == other
    assert insert(conn, base).id == base
    assert insert(conn, base).id == f"{base}-2"
    assert insert(conn, base).id == f"{base}-3"


# ---- finish_process ------------------------------------------------------------------------------


def test_finish_process_sets_status_exit_code_and_end(conn: sqlite3.Connection) -> None:
    record = insert(conn, pid=100, started=1_000)
    ss.finish_process(conn, record.key, 100, SessionStatus.EXITED, 3, 5_000)
    after = ss.get_session_by_key(conn, record.key)
    assert after is not None
    assert (after.status, after.exit_code, after.ended_at) == (SessionStatus.EXITED, 3, 5_000)
    assert processes(conn, record.key) == [(100, "exited", 3, 1_000, 5_000)]


def test_a_crashed_process_keeps_its_signal(conn: sqlite3.Connection) -> None:
    record = insert(conn, pid=100, started=1_000)
    ss.finish_process(conn, record.key, 100, SessionStatus.CRASHED, None, 5_000, "SIGSEGV")
    after = ss.get_session_by_key(conn, record.key)
    assert after is not None and (after.status, after.signal) == (SessionStatus.CRASHED, "SIGSEGV")
    assert wire.session(after)["status"] == "crashed" and wire.session(after)["signal"] == "SIGSEGV"
    assert "signal" not in wire.session(record)
    row = conn.execute("SELECT status, signal FROM processes WHERE session = ?", (record.key,)).fetchone()
    assert row == ("crashed", "SIGSEGV")


def test_a_store_without_signal_columns_gains_them(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE sessions (key INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, "
                "binary_path TEXT NOT NULL, project_root TEXT NOT NULL, pid INTEGER NOT NULL, "
                "started_at INTEGER NOT NULL, ended_at INTEGER, status TEXT NOT NULL, exit_code INTEGER, "
                "retained INTEGER NOT NULL DEFAULT 0, trimmed INTEGER NOT NULL DEFAULT 0)")
    old.execute("CREATE TABLE processes (session INTEGER NOT NULL, pid INTEGER NOT NULL, status TEXT NOT NULL, "
                "exit_code INTEGER, started_at INTEGER NOT NULL, ended_at INTEGER, PRIMARY KEY (session, pid)) "
                "WITHOUT ROWID")
    old.execute("INSERT INTO sessions (id, binary_path, project_root, pid, started_at, status) "
                "VALUES ('kept', '/bin/kept', '/proj', 7, 1, 'exited')")
    old.commit()
    old.close()
    c = connect(path)
    try:
        kept = ss.get_session(c, "kept")
        assert kept is not None and kept.signal is None and kept.status is SessionStatus.EXITED
    finally:
        c.close()


def test_finish_child_process_leaves_session_running(conn: sqlite3.Connection) -> None:
    record = insert(conn, pid=100)
    conn.execute(
        "INSERT INTO processes (session, pid, status, started_at) VALUES (?, 101, 'running', 1100)",
        (record.key,),
    )
    ss.finish_process(conn, record.key, 101, SessionStatus.EXITED, 0, 2_000)
    after = ss.get_session_by_key(conn, record.key)
    assert after is not None
    assert (after.status, after.exit_code, after.ended_at) == (SessionStatus.RUNNING, None, None)
    assert processes(conn, record.key) == [
        (100, "running", None, 1_000, None),
        (101, "exited", 0, 1_100, 2_000),
    ]


def test_finish_process_does_not_override_a_finished_session(conn: sqlite3.Connection) -> None:
    record = insert(conn, pid=100)
    ss.finish_process(conn, record.key, 100, SessionStatus.STOPPED, None, 2_000)
    ss.finish_process(conn, record.key, 100, SessionStatus.EXITED, 0, 3_000)
    after = ss.get_session_by_key(conn, record.key)
    assert after is not None
    assert (after.status, after.exit_code, after.ended_at) == (SessionStatus.STOPPED, None, 2_000)


def test_finish_process_touches_only_its_session(conn: sqlite3.Connection) -> None:
    a = insert(conn, "a", pid=100)
    b = insert(conn, "b", pid=100)
    ss.finish_process(conn, a.key, 100, SessionStatus.EXITED, 1, 2_000)
    other = ss.get_session_by_key(conn, b.key)
    assert other is not None and other.status is SessionStatus.RUNNING
    assert processes(conn, b.key) == [(100, "running", None, 1_000, None)]


# ---- retain_session ------------------------------------------------------------------------------


def test_retain_running_session_stops_it(conn: sqlite3.Connection) -> None:
    record = insert(conn)
    ss.retain_session(conn, record.key, 9_000)
    after = ss.get_session_by_key(conn, record.key)
    assert after is not None
    assert (after.status, after.retained, after.ended_at) == (SessionStatus.STOPPED, True, 9_000)


def test_retain_exited_session_keeps_status_and_end(conn: sqlite3.Connection) -> None:
    record = insert(conn, pid=100)
    ss.finish_process(conn, record.key, 100, SessionStatus.EXITED, 0, 5_000)
    ss.retain_session(conn, record.key, 9_000)
    after = ss.get_session_by_key(conn, record.key)
    assert after is not None
    assert (after.status, after.retained, after.ended_at, after.exit_code) == (
        SessionStatus.EXITED,
        True,
        5_000,
        0,
    )


# ---- delete_session ------------------------------------------------------------------------------


def test_delete_session_removes_everything_it_captured(conn: sqlite3.Connection) -> None:
    gone = insert(conn, "gone")
    kept = insert(conn, "kept")
    add_events(conn, gone.key, 5, first_id=1)
    add_events(conn, kept.key, 3, first_id=100)
    add_thread(conn, gone.key, 1)
    add_thread(conn, kept.key, 1)
    assert ss.delete_session(conn, gone.key) == 5
    assert ss.get_session_by_key(conn, gone.key) is None
    assert ss.count_events(conn, gone.key) == 0
    assert conn.execute("SELECT count(*) FROM threads WHERE session = ?", (gone.key,)).fetchone()[0] == 0
    assert processes(conn, gone.key) == []
    # The other session is untouched.
    assert ss.count_events(conn, kept.key) == 3
    assert conn.execute("SELECT count(*) FROM threads WHERE session = ?", (kept.key,)).fetchone()[0] == 1
    assert ss.session_pids(conn, kept.key) == [100]
    assert [r.id for r in ss.list_sessions(conn)] == ["kept"]


def test_delete_session_without_events_returns_zero(conn: sqlite3.Connection) -> None:
    record = insert(conn)
    assert ss.delete_session(conn, record.key) == 0
    assert ss.list_sessions(conn) == []


# ---- close_orphaned_sessions ---------------------------------------------------------------------


def test_close_orphaned_sessions(conn: sqlite3.Connection) -> None:
    a = insert(conn, "a", pid=1)
    b = insert(conn, "b", pid=2)
    done = insert(conn, "done", pid=3)
    ss.finish_process(conn, done.key, 3, SessionStatus.EXITED, 0, 2_000)
    assert sorted(ss.close_orphaned_sessions(conn, 7_000)) == ["a", "b"]
    for key in (a.key, b.key):
        record = ss.get_session_by_key(conn, key)
        assert record is not None
        assert (record.status, record.retained, record.ended_at) == (SessionStatus.STOPPED, True, 7_000)
    assert processes(conn, a.key) == [(1, "stopped", None, 1_000, 7_000)]
    finished = ss.get_session_by_key(conn, done.key)
    assert finished is not None
    assert (finished.status, finished.retained, finished.ended_at) == (SessionStatus.EXITED, False, 2_000)
    assert processes(conn, done.key) == [(3, "exited", 0, 1_000, 2_000)]
    assert ss.close_orphaned_sessions(conn, 8_000) == []


# ---- reads ---------------------------------------------------------------------------------------


def test_list_sessions_ordered_by_start_then_key(conn: sqlite3.Connection) -> None:
    insert(conn, "late", started=300)
    insert(conn, "early-1", started=100)
    insert(conn, "mid", started=200)
    insert(conn, "early-2", started=100)
    assert [r.id for r in ss.list_sessions(conn)] == ["early-1", "early-2", "mid", "late"]


def test_get_session_missing(conn: sqlite3.Connection) -> None:
    assert ss.get_session(conn, "nope") is None
    assert ss.get_session_by_key(conn, 12345) is None


def test_session_pids_in_start_order(conn: sqlite3.Connection) -> None:
    record = insert(conn, pid=500, started=1_000)
    conn.execute(
        "INSERT INTO processes (session, pid, status, started_at) VALUES (?, 90, 'running', 2000)",
        (record.key,),
    )
    conn.execute(
        "INSERT INTO processes (session, pid, status, started_at) VALUES (?, 95, 'running', 2000)",
        (record.key,),
    )
    assert ss.session_pids(conn, record.key) == [500, 90, 95]


def test_followed_children_and_how_each_process_ended(conn: sqlite3.Connection) -> None:
    record = insert(conn, pid=500, started=1_000)
    ss.add_process(conn, record.key, 510, 500, "/bin/prog", 2_000)
    ss.add_process(conn, record.key, 520, 510, "/bin/helper", 3_000)
    ss.set_process_binary(conn, record.key, 510, "/bin/other")  # 510 exec()ed
    ss.finish_process(conn, record.key, 520, SessionStatus.CRASHED, None, 4_000, "SIGSEGV")
    ss.finish_process(conn, record.key, 510, SessionStatus.EXITED, 3, 4_500)
    # A child's end leaves the session running: the session follows its launched process.
    assert ss.get_session_by_key(conn, record.key).status is SessionStatus.RUNNING  # type: ignore[union-attr]
    wires = [wire.process(p) for p in ss.session_processes(conn, [record.key])[record.key]]
    assert wires == [
        {"pid": 500, "status": "running", "binaryPath": "/bin/prog"},
        {"pid": 510, "status": "exited", "parentPid": 500, "binaryPath": "/bin/other", "exitCode": 3},
        {"pid": 520, "status": "crashed", "parentPid": 510, "binaryPath": "/bin/helper", "exitCode": None,
         "signal": "SIGSEGV"},
    ]
    # The same pid seen again (an exec reported as a new child): the row is reused, running again.
    ss.add_process(conn, record.key, 520, 510, "/bin/again", 5_000)
    again = ss.session_processes(conn, [record.key])[record.key][2]
    assert (again.status, again.binary_path, again.signal) == (SessionStatus.RUNNING, "/bin/again", None)


# ---- to_wire -------------------------------------------------------------------------------------


def _record(**over: Any) -> SessionRecord:
    fields: dict[str, Any] = dict(
        key=1,
        id="prog",
        binary_path="/bin/prog",
        project_root="/proj",
        pid=10,
        started_at=100,
        ended_at=None,
        status=SessionStatus.RUNNING,
        exit_code=None,
        retained=False,
        trimmed=0,
    )
    fields.update(over)
    return SessionRecord(**fields)


def test_to_wire_running() -> None:
    assert wire.session(_record()) == {
        "sessionId": "prog",
        "binaryPath": "/bin/prog",
        "pid": 10,
        "startedAt": 100,
        "endedAt": None,
        "status": "running",
    }


def test_to_wire_exited() -> None:
    assert wire.session(_record(status=SessionStatus.EXITED, exit_code=2, ended_at=500)) == {
        "sessionId": "prog",
        "binaryPath": "/bin/prog",
        "pid": 10,
        "startedAt": 100,
        "endedAt": 500,
        "status": "exited",
        "exitCode": 2,
    }


def test_to_wire_stopped_retained() -> None:
    shown = wire.session(_record(status=SessionStatus.STOPPED, ended_at=500, retained=True, trimmed=7))
    assert shown == {
        "sessionId": "prog",
        "binaryPath": "/bin/prog",
        "pid": 10,
        "startedAt": 100,
        "endedAt": 500,
        "status": "stopped",
        "exitCode": None,
        "retained": True,
    }


def test_to_wire_from_store(conn: sqlite3.Connection) -> None:
    record = insert(conn, "prog", pid=7, started=1_234)
    ss.finish_process(conn, record.key, 7, SessionStatus.EXITED, 1, 2_000)
    stored = ss.get_session(conn, "prog")
    assert stored is not None
    assert wire.session(stored) == {
        "sessionId": "prog",
        "binaryPath": "/bin/prog",
        "pid": 7,
        "startedAt": 1_234,
        "endedAt": 2_000,
        "status": "exited",
        "exitCode": 1,
    }
