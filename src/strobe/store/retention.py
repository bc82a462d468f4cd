"""What the store keeps: ended sessions for RETENTION_MS at most, and no more than a size cap in all.

These functions only choose what goes (the daemon deletes it with Writer.delete_session). Purging never touches a
running session: a running session is bounded by its own FIFO caps instead. Deleted rows leave free pages behind;
`shrink` gives them back to the file system (the store is in incremental auto-vacuum mode, schema.connect), so the
file's size follows what it holds.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

RETENTION_MS = 7 * 24 * 3600 * 1000


@dataclass(frozen=True)
class Purged:
    key: int
    id: str
    why: str  # "older than 7 days" | "over storage.maxBytes"


def used_bytes(conn: sqlite3.Connection) -> int:
    """Bytes of the database the data occupies (free pages excluded; the write-ahead log is bounded apart)."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    return int((pages - free) * size)


def expired(conn: sqlite3.Connection, now_ms: int, retention_ms: int = RETENTION_MS) -> list[Purged]:
    """Ended sessions that ended more than `retention_ms` ago, oldest first."""
    return [Purged(key, sid, "older than 7 days") for key, sid in conn.execute(
        "SELECT key, id FROM sessions WHERE status != 'running' AND ended_at < ? ORDER BY ended_at, key",
        (now_ms - retention_ms,),
    )]


def next_over_cap(conn: sqlite3.Connection, max_bytes: int) -> Purged | None:
    """The oldest ended session, if the store holds more than `max_bytes`; None otherwise (or if every session
    left is running)."""
    if used_bytes(conn) <= max_bytes:
        return None
    row = conn.execute(
        "SELECT key, id FROM sessions WHERE status != 'running' ORDER BY coalesce(ended_at, started_at), key LIMIT 1"
    ).fetchone()
    return None if row is None else Purged(row[0], row[1], "over storage.maxBytes")


def shrink(path: Path) -> int:
    """Give the store's free pages back to the file system; returns the bytes released (0 if the store is not in
    incremental auto-vacuum mode). It opens a connection of its own (PRAGMA incremental_vacuum runs to completion
    only outside a transaction; the writer's connection is always inside one) and waits its turn for the write
    lock like any writer."""
    conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
    try:
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        if not free or conn.execute("PRAGMA auto_vacuum").fetchone()[0] != INCREMENTAL:
            return 0
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.executescript("PRAGMA incremental_vacuum")
        released = int((free - conn.execute("PRAGMA freelist_count").fetchone()[0]) * size)
        # the shorter file and an empty write-ahead log, now rather than at some later checkpoint
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return released
    finally:
        conn.close()


INCREMENTAL = 2
"""PRAGMA auto_vacuum's value for incremental mode."""
