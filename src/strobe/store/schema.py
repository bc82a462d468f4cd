"""Table layout and connection set-up.

Rows are narrow and mostly integers so the single writer can keep up with tracing: names live once in
`functions`, thread names once in `threads`, and JSON payloads are only stored where they exist.
Event ids are global integers assigned by the writer; the agent-facing id is "{sessionId}-{id}".
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from enum import IntEnum
from pathlib import Path

from strobe.paths import private_opener

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2


class EventKind(IntEnum):
    FUNCTION_ENTER = 1
    FUNCTION_EXIT = 2
    STDOUT = 3
    STDERR = 4
    CRASH = 5
    VARIABLE_SNAPSHOT = 6
    PAUSE = 7  # a thread stopped at a breakpoint
    LOGPOINT = 8  # a logpoint's line

    @property
    def wire_name(self) -> str:
        return self.name.lower()

    @classmethod
    def from_wire(cls, name: str) -> EventKind:
        return cls[name.upper()]


OUTPUT_KINDS = (EventKind.STDOUT, EventKind.STDERR)

TIME_BUCKET_SHIFT = 26
"""event_time_counts buckets are 2**26 ns (~67 ms) of session time."""

_DDL = """
CREATE TABLE IF NOT EXISTS test_durations (  -- passed/failed tests' durations: debug_test's baselines
    framework TEXT NOT NULL,
    name TEXT NOT NULL,
    duration_ms REAL NOT NULL,
    at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS test_durations_by_test ON test_durations (framework, name, at);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions (
    key INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: late rows of a deleted session stay orphans
    id TEXT NOT NULL UNIQUE,
    binary_path TEXT NOT NULL,
    project_root TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at INTEGER NOT NULL,          -- unix time, milliseconds
    ended_at INTEGER,
    status TEXT NOT NULL,                 -- running | exited | stopped | crashed
    exit_code INTEGER,
    signal TEXT,                          -- crashed: the fatal signal
    retained INTEGER NOT NULL DEFAULT 0,
    trimmed INTEGER NOT NULL DEFAULT 0,   -- events dropped by the per-session FIFO limit
    dropped INTEGER NOT NULL DEFAULT 0,   -- trace events lost because the agent's ring was full
    sampled_out INTEGER NOT NULL DEFAULT 0,  -- calls of hot functions skipped by sampling (enter+exit)
    output_trimmed INTEGER NOT NULL DEFAULT 0,  -- output lines, crashes, snapshots dropped by their own FIFO limit
    lost INTEGER NOT NULL DEFAULT 0,      -- events the store could not write (a full disk, a failed write)
    attached INTEGER NOT NULL DEFAULT 0   -- 1: a process Strobe attached to (debug_launch with pid), not started
);
CREATE TABLE IF NOT EXISTS processes (
    session INTEGER NOT NULL,
    pid INTEGER NOT NULL,
    status TEXT NOT NULL,
    exit_code INTEGER,
    signal TEXT,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    parent_pid INTEGER,                   -- a followed child's parent; NULL for the launched process
    binary_path TEXT,                     -- the image it runs (a child that exec()ed: the new one)
    PRIMARY KEY (session, pid)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS functions (
    key INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    raw TEXT,
    file TEXT,
    line INTEGER,
    params INTEGER,                       -- formal parameters, to trim raw argument registers
    signature TEXT,                       -- JSON register plan (daemon/signatures.py), set after hooking
    runtime TEXT                          -- NULL: native code; else whose values these are ('cpython')
);
CREATE TABLE IF NOT EXISTS threads (
    session INTEGER NOT NULL,
    pid INTEGER NOT NULL,
    tid INTEGER NOT NULL,
    name TEXT,
    PRIMARY KEY (session, pid, tid)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY,
    session INTEGER NOT NULL,
    ts INTEGER NOT NULL,                  -- ns since session start
    kind INTEGER NOT NULL,                -- EventKind
    pid INTEGER,
    tid INTEGER,
    func INTEGER,                         -- functions.key
    parent INTEGER,                       -- events.id of the caller's enter event
    duration INTEGER,
    retval,                               -- integer, text or JSON text
    sampled INTEGER,                      -- bits: 1 sampled, 2 pointers not followed (past the follow limit)
    text TEXT,                            -- stdout/stderr line
    args,                                 -- BLOB of raw argument registers, or JSON text
    extra TEXT                            -- JSON: watch values, crash details, snapshots
);
CREATE INDEX IF NOT EXISTS events_by_time ON events (session, ts);
-- Read-side structures (see store/query.py, which plans around them, and store/counts.py, which keeps
-- the summary tables exact). Every index costs each insert, so there is one more only, for the rare
-- non-function events; durations and return values are summarised per written batch instead.
CREATE INDEX IF NOT EXISTS events_by_kind ON events (session, kind, ts) WHERE kind > {EXIT};
CREATE TABLE IF NOT EXISTS event_counts (   -- events per (session, kind, function); func -1: none
    session INTEGER NOT NULL,
    kind INTEGER NOT NULL,
    func INTEGER NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (session, kind, func)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS event_time_counts (   -- events per (session, ts >> TIME_BUCKET_SHIFT)
    session INTEGER NOT NULL,
    bucket INTEGER NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (session, bucket)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS event_postings (   -- durations and return values by class, per written batch
    session INTEGER NOT NULL,
    dim INTEGER NOT NULL,                 -- 1: duration, 2: return value of an exit
    cls INTEGER NOT NULL,                 -- value class (store/counts.py)
    first_id INTEGER NOT NULL,
    last_id INTEGER NOT NULL,
    n INTEGER NOT NULL,
    ids BLOB NOT NULL,                    -- int64 event ids, ascending
    ts BLOB NOT NULL,                     -- their int64 timestamps
    vals BLOB                             -- their int64 values; NULL: compare in SQL
);
CREATE INDEX IF NOT EXISTS event_postings_by_class ON event_postings (session, dim, cls);
CREATE INDEX IF NOT EXISTS event_postings_by_id ON event_postings (session, first_id);
"""

_DDL = _DDL.format(EXIT=int(EventKind.FUNCTION_EXIT))

# Column order of an event row as submitted to the writer (the writer prepends the id).
EVENT_COLUMNS = (
    "session", "ts", "kind", "pid", "tid", "func", "parent", "duration",
    "retval", "sampled", "text", "args", "extra",
)


READER_MMAP_BYTES = 1 << 30
READER_CACHE_KIB = 8 * 1024
WRITER_CACHE_KIB = 8 * 1024


# The sqlite3 module binds int, float, str and bytearray directly, but looks every other value up as an adaptable
# object first (two failed attribute lookups, each formatting an AttributeError): that doubled the cost of binding a
# row with a NULL or a blob. Registered adapters are found by a dict lookup instead; these two return their
# argument unchanged (dict.get(None) is None; both are C calls), so what is stored does not change.
_NOTHING: dict[None, None] = {}
sqlite3.register_adapter(type(None), _NOTHING.get)
sqlite3.register_adapter(bytes, bytes)

WAL_LIMIT_BYTES = 64 << 20
"""The write-ahead log is truncated back to this size once checkpointed (it never stays larger)."""
VACUUM_ON_OPEN_MAX_BYTES = 1 << 30
"""A store made before incremental vacuum is rewritten once (VACUUM) to gain it, if it is at most this big."""

STATEMENT_CACHE = 256
"""Prepared statements kept per connection (the writer's multi-row inserts come in a few shapes and sizes)."""


def connect(path: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """Open the store with the pragmas every connection needs; the writer also creates the schema.

    The file is created 0600 before SQLite opens it: SQLite gives its -wal and -shm files the database's mode."""
    if str(path) != ":memory:":
        os.close(private_opener(str(path), os.O_RDWR | os.O_CREAT))
        for companion in ("-wal", "-shm"):  # left by a version that created them 0644
            with contextlib.suppress(FileNotFoundError):
                os.close(private_opener(f"{path}{companion}", os.O_RDONLY))
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0,
                           cached_statements=STATEMENT_CACHE)
    conn.execute("PRAGMA busy_timeout = 30000")
    if readonly:
        conn.execute("PRAGMA query_only = 1")
        # Readers map the file instead of copying pages into a per-connection cache (there is one reading
        # connection per worker thread, so their caches stay small and the OS page cache is shared).
        conn.execute(f"PRAGMA mmap_size = {READER_MMAP_BYTES}")
        conn.execute(f"PRAGMA cache_size = -{READER_CACHE_KIB}")
        return conn
    if conn.execute("PRAGMA page_count").fetchone()[0] == 0:  # a new store: free pages can go back to the disk
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")
    conn.execute(f"PRAGMA cache_size = -{WRITER_CACHE_KIB}")  # the summaries and insertion points stay cached
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.executescript(_DDL)
    _add_missing_columns(conn)
    _make_shrinkable(conn)
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
    )
    return conn


# Columns added after version 1; an older store gains them in place (nothing is lost).
_ADDED_COLUMNS = (
    ("sessions", "dropped", "INTEGER NOT NULL DEFAULT 0"),
    ("sessions", "sampled_out", "INTEGER NOT NULL DEFAULT 0"),
    ("functions", "params", "INTEGER"),
    ("functions", "signature", "TEXT"),
    ("sessions", "signal", "TEXT"),
    ("processes", "signal", "TEXT"),
    ("processes", "parent_pid", "INTEGER"),
    ("processes", "binary_path", "TEXT"),
    ("functions", "runtime", "TEXT"),
    ("sessions", "output_trimmed", "INTEGER NOT NULL DEFAULT 0"),
    ("sessions", "lost", "INTEGER NOT NULL DEFAULT 0"),
    ("sessions", "attached", "INTEGER NOT NULL DEFAULT 0"),
)


def _make_shrinkable(conn: sqlite3.Connection) -> None:
    """A store made before incremental auto-vacuum gains it by a one-time VACUUM when that is cheap enough (it
    rewrites the file and needs as much free disk again); a bigger one keeps its size until it is deleted."""
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2:
        return
    pages, size = conn.execute("PRAGMA page_count").fetchone()[0], conn.execute("PRAGMA page_size").fetchone()[0]
    if pages * size > VACUUM_ON_OPEN_MAX_BYTES:
        log.warning("store: %s is %d MiB and predates incremental vacuum: deleting sessions frees space inside it "
                    "but does not shrink the file (delete the file to start afresh)", path_of(conn), pages * size >> 20)
        return
    try:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("VACUUM")
    except sqlite3.Error as exc:
        log.warning("store: could not convert %s to incremental vacuum: %s", path_of(conn), exc)


def path_of(conn: sqlite3.Connection) -> str:
    return str(conn.execute("PRAGMA database_list").fetchone()[2])


def _add_missing_columns(conn: sqlite3.Connection) -> None:
    for table, column, declaration in _ADDED_COLUMNS:
        existing = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if column not in existing:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
