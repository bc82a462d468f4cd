"""Session and process rows. Write functions take the writer's connection (run them via Writer.call);
read functions take any connection."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class SessionStatus(StrEnum):
    RUNNING = "running"
    EXITED = "exited"
    STOPPED = "stopped"
    CRASHED = "crashed"


@dataclass(frozen=True)
class SessionRecord:
    key: int
    id: str
    binary_path: str
    project_root: str
    pid: int
    started_at: int
    ended_at: int | None
    status: SessionStatus
    exit_code: int | None
    retained: bool
    trimmed: int
    dropped: int = 0
    sampled_out: int = 0
    signal: str | None = None  # crashed: the fatal signal ("SIGSEGV")
    output_trimmed: int = 0  # output lines, crashes and snapshots dropped by their own FIFO limit
    lost: int = 0  # events the store could not write (a full disk)
    attached: bool = False  # a process Strobe attached to (debug_launch {pid}) rather than started


_COLUMNS = (
    "key, id, binary_path, project_root, pid, started_at, ended_at, status, exit_code, retained, trimmed, "
    "dropped, sampled_out, signal, output_trimmed, lost, attached"
)


def _record(row: tuple[Any, ...]) -> SessionRecord:
    (key, sid, binary, root, pid, started, ended, status, code, retained, trimmed, dropped, sampled_out, signal,
     output_trimmed, lost, attached) = row
    return SessionRecord(
        key=key, id=sid, binary_path=binary, project_root=root, pid=pid, started_at=started, ended_at=ended,
        status=SessionStatus(status), exit_code=code, retained=bool(retained), trimmed=trimmed,
        dropped=dropped, sampled_out=sampled_out, signal=signal, output_trimmed=output_trimmed, lost=lost,
        attached=bool(attached),
    )


# ---- writes (writer thread) ----------------------------------------------------------------------


def insert_session(
    conn: sqlite3.Connection, base_id: str, binary_path: str, project_root: str, pid: int, started_at: int,
    attached: bool = False,
) -> SessionRecord:
    """Insert a running session under `base_id`, or `base_id-2`, `-3`… if that id is taken."""
    taken = {
        row[0]
        for row in conn.execute(
            "SELECT id FROM sessions WHERE id = ? OR id LIKE ? ESCAPE '\\'",
            (base_id, _like_prefix(base_id) + "-%"),
        )
    }
    session_id = base_id
    n = 2
    while session_id in taken:
        session_id = f"{base_id}-{n}"
        n += 1
    cursor = conn.execute(
        "INSERT INTO sessions (id, binary_path, project_root, pid, started_at, status, attached) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (session_id, binary_path, project_root, pid, started_at, SessionStatus.RUNNING.value, int(attached)),
    )
    key = cursor.lastrowid
    assert key is not None
    conn.execute(
        "INSERT INTO processes (session, pid, status, started_at, binary_path) VALUES (?, ?, ?, ?, ?)",
        (key, pid, SessionStatus.RUNNING.value, started_at, binary_path),
    )
    record = get_session_by_key(conn, key)
    assert record is not None
    return record


def add_process(
    conn: sqlite3.Connection, session: int, pid: int, parent_pid: int, binary_path: str, started_at: int
) -> None:
    """A followed child (fork, posix_spawn) joined the session; an exec() keeps the row and changes its binary."""
    conn.execute(
        "INSERT INTO processes (session, pid, status, started_at, parent_pid, binary_path) VALUES (?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (session, pid) DO UPDATE SET binary_path = excluded.binary_path, status = excluded.status, "
        "exit_code = NULL, signal = NULL, ended_at = NULL",
        (session, pid, SessionStatus.RUNNING.value, started_at, parent_pid or None, binary_path),
    )


def set_process_binary(conn: sqlite3.Connection, session: int, pid: int, binary_path: str) -> None:
    conn.execute("UPDATE processes SET binary_path = ? WHERE session = ? AND pid = ?", (binary_path, session, pid))


def finish_process(
    conn: sqlite3.Connection, session: int, pid: int, status: SessionStatus, exit_code: int | None, ended_at: int,
    signal: str | None = None,
) -> None:
    """A process of the session ended; the session's own status follows its launched process."""
    conn.execute(
        "UPDATE processes SET status = ?, exit_code = ?, ended_at = ?, signal = ? WHERE session = ? AND pid = ?",
        (status.value, exit_code, ended_at, signal, session, pid),
    )
    conn.execute(
        "UPDATE sessions SET status = ?, exit_code = ?, ended_at = ?, signal = ? "
        "WHERE key = ? AND pid = ? AND status = ?",
        (status.value, exit_code, ended_at, signal, session, pid, SessionStatus.RUNNING.value),
    )


def retain_session(conn: sqlite3.Connection, session: int, ended_at: int) -> None:
    conn.execute(
        "UPDATE sessions SET retained = 1, ended_at = coalesce(ended_at, ?), "
        "status = CASE status WHEN 'running' THEN 'stopped' ELSE status END WHERE key = ?",
        (ended_at, session),
    )


def delete_events_chunk(conn: sqlite3.Connection, session: int, limit: int) -> int:
    """Delete up to `limit` of a session's events, oldest first; returns how many went (a big session is deleted
    chunk by chunk, a transaction each, so the write-ahead log never holds all of it)."""
    return conn.execute(
        "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE session = ? ORDER BY id LIMIT ?)", (session, limit)
    ).rowcount


def delete_session(conn: sqlite3.Connection, session: int) -> int:
    """Delete a session and everything it captured; returns how many events went with it."""
    deleted = conn.execute("DELETE FROM events WHERE session = ?", (session,)).rowcount
    conn.execute("DELETE FROM threads WHERE session = ?", (session,))
    conn.execute("DELETE FROM processes WHERE session = ?", (session,))
    conn.execute("DELETE FROM sessions WHERE key = ?", (session,))
    return deleted


def close_orphaned_sessions(conn: sqlite3.Connection, now: int) -> list[str]:
    """Sessions left 'running' by a daemon that died can no longer be traced: mark them stopped, kept."""
    ids = [row[0] for row in conn.execute("SELECT id FROM sessions WHERE status = 'running'")]
    conn.execute("UPDATE processes SET status = 'stopped', ended_at = ? WHERE status = 'running'", (now,))
    conn.execute(
        "UPDATE sessions SET status = 'stopped', retained = 1, ended_at = ? WHERE status = 'running'", (now,)
    )
    return ids


# ---- reads (any connection) ----------------------------------------------------------------------


def get_session(conn: sqlite3.Connection, session_id: str) -> SessionRecord | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM sessions WHERE id = ?", (session_id,)).fetchone()
    return None if row is None else _record(row)


def get_session_by_key(conn: sqlite3.Connection, key: int) -> SessionRecord | None:
    row = conn.execute(f"SELECT {_COLUMNS} FROM sessions WHERE key = ?", (key,)).fetchone()
    return None if row is None else _record(row)


def list_sessions(conn: sqlite3.Connection) -> list[SessionRecord]:
    return [_record(row) for row in conn.execute(f"SELECT {_COLUMNS} FROM sessions ORDER BY started_at, key")]


def count_events(conn: sqlite3.Connection, session: int) -> int:
    return int(conn.execute("SELECT count(*) FROM events WHERE session = ?", (session,)).fetchone()[0])


def session_pids(conn: sqlite3.Connection, session: int) -> list[int]:
    return [int(r[0]) for r in conn.execute("SELECT pid FROM processes WHERE session = ? ORDER BY started_at, pid",
                                            (session,))]


@dataclass(frozen=True)
class ProcessRecord:
    pid: int
    parent_pid: int | None
    binary_path: str | None
    status: SessionStatus
    exit_code: int | None
    signal: str | None


def session_processes(conn: sqlite3.Connection, sessions: list[int]) -> dict[int, list[ProcessRecord]]:
    """Every process of these sessions (the launched one first, then followed children in the order they came)."""
    out: dict[int, list[ProcessRecord]] = {}
    for session in sessions:
        rows = conn.execute(
            "SELECT pid, parent_pid, binary_path, status, exit_code, signal FROM processes WHERE session = ? "
            "ORDER BY parent_pid IS NOT NULL, started_at, pid", (session,)
        )
        out[session] = [ProcessRecord(pid, parent, binary, SessionStatus(status), code, signal)
                        for pid, parent, binary, status, code, signal in rows]
    return out


def _like_prefix(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
