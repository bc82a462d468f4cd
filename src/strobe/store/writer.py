"""The single writer: every change to the store goes through this thread, in submission order.

Producers (Frida callbacks, the ingest path, tool handlers) only enqueue. The thread drains whatever
has accumulated, writes it in one transaction, then trims sessions over their FIFO limit. Output
chunks are assembled into lines here, so callbacks stay cheap. `call()` runs a function on the
writer's connection after everything submitted before it, which is how session rows and status
changes stay ordered with the events they describe.
"""

from __future__ import annotations

import bisect
import functools
import logging
import queue
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from strobe.store import counts
from strobe.store.output import OutputAssembler
from strobe.store.schema import EVENT_COLUMNS, EventKind, connect

log = logging.getLogger(__name__)

T = TypeVar("T")
EventRow = tuple[Any, ...]
"""One event in EVENT_COLUMNS order, without its id."""
IdentifiedRow = tuple[Any, ...]
"""One event as (id, *EVENT_COLUMNS)."""
RowGroup = tuple[tuple[str, ...], Sequence[tuple[Any, ...]]]
"""Rows that all fill the same columns (named first)."""

DEFAULT_MAX_EVENTS = 200_000
_MAX_ITEMS_PER_TRANSACTION = 50_000
_IDLE_WAIT_S = 0.5
_PARTIAL_WAIT_S = 0.05

_INSERT = (
    f"INSERT INTO events (id, {', '.join(EVENT_COLUMNS)}) "
    f"VALUES ({', '.join('?' * (len(EVENT_COLUMNS) + 1))})"
)


@dataclass
class _SessionFifo:
    """Which id ranges a session owns, oldest first, so trimming deletes by primary-key range."""

    limit: int = DEFAULT_MAX_EVENTS
    count: int = 0
    ranges: deque[list[int]] = field(default_factory=deque)

    def add(self, first_id: int, n: int) -> None:
        """Record ids first_id..first_id+n-1. Ids are reserved before they are written, so a block can
        arrive after a higher one; ranges stay sorted so the oldest ids are trimmed first."""
        self.count += n
        new = [first_id, first_id + n - 1]
        if not self.ranges or self.ranges[-1][1] < first_id:
            last = self.ranges[-1] if self.ranges else None
            if last is not None and last[1] + 1 == first_id:
                last[1] = new[1]
            else:
                self.ranges.append(new)
            return
        position = bisect.bisect_left([r[0] for r in self.ranges], first_id)
        self.ranges.insert(position, new)

    def take_excess(self) -> list[tuple[int, int]]:
        """Id ranges to delete so that `count` is back at `limit`."""
        excess = self.count - self.limit
        doomed: list[tuple[int, int]] = []
        while excess > 0 and self.ranges:
            lo, hi = self.ranges[0]
            size = hi - lo + 1
            if size <= excess:
                doomed.append((lo, hi))
                self.ranges.popleft()
                excess -= size
                self.count -= size
            else:
                doomed.append((lo, lo + excess - 1))
                self.ranges[0][0] = lo + excess
                self.count -= excess
                excess = 0
        return doomed


class Writer:
    def __init__(self, db_path: Path) -> None:
        self._db_path = db_path
        self._queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="strobe-writer", daemon=True)
        self._fifos: dict[int, _SessionFifo] = {}
        self._assemblers: dict[tuple[int, int, int], OutputAssembler] = {}
        self._next_id = 1
        self._id_lock = threading.Lock()
        self._pending_rows = 0  # trace rows queued but not yet written, for backpressure
        self._room = threading.Condition()
        self._conn: sqlite3.Connection | None = None
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        self.rows_written = 0

    # ---- producer side (any thread) -------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        self._started.wait()
        if self._start_error is not None:
            raise self._start_error

    def reserve_ids(self, n: int) -> int:
        """Reserve n consecutive event ids (for producers that link events to each other by id)."""
        with self._id_lock:
            first = self._next_id
            self._next_id += n
            return first

    def submit_rows(self, rows: Sequence[EventRow]) -> None:
        """Store events; ids are assigned now, in submission order."""
        by_session: dict[int, list[EventRow]] = {}
        for row in rows:
            by_session.setdefault(row[0], []).append(row)
        for session, session_rows in by_session.items():
            first = self.reserve_ids(len(session_rows))
            self._queue.put(
                ("rows", session, first, [(first + i, *row) for i, row in enumerate(session_rows)])
            )

    def submit_parts(self, session: int, first_id: int, count: int, parts: Sequence[RowGroup]) -> None:
        """Store `count` events of one session holding ids first_id.. (from reserve_ids), given as groups of
        rows that each name their own columns (so absent values cost nothing to bind)."""
        if count:
            with self._room:
                self._pending_rows += count
            self._queue.put(("parts", session, first_id, count, parts))

    def wait_for_room(self, max_pending_rows: int, timeout: float = 30.0) -> bool:
        """Block a producer while more than `max_pending_rows` of its rows wait to be written, so a flood of
        events queues as compact batches upstream instead of as Python rows here. False on timeout."""
        with self._room:
            return self._room.wait_for(lambda: self._pending_rows <= max_pending_rows, timeout)

    def submit_identified(self, session: int, first_id: int, rows: Sequence[IdentifiedRow]) -> None:
        """Store events of one session carrying ids first_id.. first_id+len(rows)-1 from reserve_ids()."""
        if rows:
            self._queue.put(("rows", session, first_id, rows))

    def submit_output(self, session: int, pid: int, kind: EventKind, data: bytes, ts_ns: int) -> None:
        """A chunk of a target's stdout/stderr; empty `data` means that stream has ended."""
        self._queue.put(("out", session, pid, int(kind), data, ts_ns, time.monotonic_ns()))

    def set_limit(self, session: int, limit: int) -> None:
        self._queue.put(("limit", session, limit))

    def call(self, fn: Callable[[sqlite3.Connection], T]) -> Future[T]:
        """Run `fn(conn)` in the writer after everything submitted so far; resolves once committed."""
        future: Future[T] = Future()
        self._queue.put(("call", fn, future))
        return future

    def forget_session(self, session: int) -> None:
        """Drop in-memory state for a deleted session (its rows are deleted by a `call`)."""
        self._queue.put(("forget", session))

    def close(self, timeout: float = 10.0) -> None:
        if self._thread.is_alive():
            self._queue.put(("stop",))
            self._thread.join(timeout)

    # ---- writer thread ---------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._conn = connect(self._db_path)
            counts.prepare(self._conn)
            row = self._conn.execute("SELECT max(id) FROM events").fetchone()
            self._next_id = (row[0] or 0) + 1
        except BaseException as exc:  # reported to start()
            self._start_error = exc
            self._started.set()
            return
        self._started.set()
        conn = self._conn
        stopping = False
        while not stopping:
            wait = _PARTIAL_WAIT_S if any(a.has_partial for a in self._assemblers.values()) else _IDLE_WAIT_S
            items: list[tuple[Any, ...]] = []
            try:
                items.append(self._queue.get(timeout=wait))
                while len(items) < _MAX_ITEMS_PER_TRANSACTION:
                    items.append(self._queue.get_nowait())
            except queue.Empty:
                pass
            stopping = any(item[0] == "stop" for item in items)
            try:
                self._write(conn, items, flush_all=stopping)
            except Exception as exc:
                log.exception("store writer: a transaction failed; its events are lost")
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                self._resync(conn)
                lost_rows = sum(item[3] for item in items if item[0] == "parts")
                with self._room:
                    self._pending_rows -= lost_rows
                    self._room.notify_all()
                for item in items:
                    if item[0] == "call" and not item[2].done():
                        item[2].set_exception(exc)
        conn.close()

    def _write(self, conn: sqlite3.Connection, items: list[tuple[Any, ...]], *, flush_all: bool) -> None:
        pending: list[EventRow] = []
        settled: list[tuple[Future[Any], Any, BaseException | None]] = []
        written_parts = 0
        conn.execute("BEGIN")
        for item in items:
            tag = item[0]
            if tag == "rows":
                _, session, first, rows = item
                conn.executemany(_INSERT, rows)
                counts.record(conn, session, counts.IDENTIFIED_COLUMNS, rows)
                self._fifo(session).add(first, len(rows))
                self.rows_written += len(rows)
            elif tag == "parts":
                _, session, first, count, parts = item
                for columns, rows in parts:
                    conn.executemany(_insert_for(columns), rows)
                    counts.record(conn, session, columns, rows)
                self._fifo(session).add(first, count)
                self.rows_written += count
                written_parts += count
            elif tag == "out":
                _, session, pid, kind, data, ts_ns, mono = item
                key = (session, pid, kind)
                assembler = self._assemblers.get(key)
                if assembler is None:
                    assembler = self._assemblers[key] = OutputAssembler()
                pieces = assembler.feed(data, ts_ns, mono) if data else assembler.flush()
                pending.extend(_output_rows(session, pid, kind, pieces))
            elif tag == "call":
                self._insert(conn, pending)
                pending = []
                fn, future = item[1], item[2]
                conn.execute("SAVEPOINT call")
                try:
                    result = fn(conn)
                except BaseException as exc:
                    conn.execute("ROLLBACK TO call")
                    settled.append((future, None, exc))
                else:
                    settled.append((future, result, None))
                conn.execute("RELEASE call")
            elif tag == "limit":
                self._fifo(item[1]).limit = item[2]
            elif tag == "forget":
                self._insert(conn, pending)
                pending = []
                self._fifos.pop(item[1], None)
                counts.forget_session(conn, item[1])
                for key in [k for k in self._assemblers if k[0] == item[1]]:
                    del self._assemblers[key]
        now = time.monotonic_ns()
        for (session, pid, kind), assembler in self._assemblers.items():
            pieces = assembler.flush() if flush_all else assembler.flush_if_stale(now)
            pending.extend(_output_rows(session, pid, kind, pieces))
        self._insert(conn, pending)
        self._trim(conn)
        conn.execute("COMMIT")
        if written_parts:
            with self._room:
                self._pending_rows -= written_parts
                self._room.notify_all()
        for future, result, error in settled:
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

    def _resync(self, conn: sqlite3.Connection) -> None:
        """After a rollback, rebuild the id counter and FIFO ranges from what the store really holds."""
        row = conn.execute("SELECT max(id) FROM events").fetchone()
        with self._id_lock:
            self._next_id = max(self._next_id, (row[0] or 0) + 1)
        for session, fifo in self._fifos.items():
            ids = sorted(r[0] for r in conn.execute("SELECT id FROM events WHERE session = ?", (session,)))
            fifo.ranges.clear()
            fifo.count = 0
            for event_id in ids:
                fifo.add(event_id, 1)

    def _fifo(self, session: int) -> _SessionFifo:
        fifo = self._fifos.get(session)
        if fifo is None:
            fifo = self._fifos[session] = _SessionFifo()
        return fifo

    def _insert(self, conn: sqlite3.Connection, rows: list[EventRow]) -> None:
        if not rows:
            return
        # Give each session's rows one contiguous id range so FIFO trimming is a primary-key range delete.
        by_session: dict[int, list[EventRow]] = {}
        for row in rows:
            by_session.setdefault(row[0], []).append(row)
        for session, session_rows in by_session.items():
            first = self.reserve_ids(len(session_rows))
            identified = [(first + i, *row) for i, row in enumerate(session_rows)]
            conn.executemany(_INSERT, identified)
            counts.record(conn, session, counts.IDENTIFIED_COLUMNS, identified)
            self._fifo(session).add(first, len(session_rows))
        self.rows_written += len(rows)

    def _trim(self, conn: sqlite3.Connection) -> None:
        for session, fifo in self._fifos.items():
            if fifo.count <= fifo.limit:
                continue
            dropped = 0
            for lo, hi in fifo.take_excess():
                counts.forget_range(conn, lo, hi)
                conn.execute("DELETE FROM events WHERE id BETWEEN ? AND ?", (lo, hi))
                dropped += hi - lo + 1
            conn.execute("UPDATE sessions SET trimmed = trimmed + ? WHERE key = ?", (dropped, session))


@functools.lru_cache(maxsize=16)
def _insert_for(columns: tuple[str, ...]) -> str:
    unknown = set(columns) - {"id", *EVENT_COLUMNS}
    if unknown:
        raise ValueError(f"not event columns: {sorted(unknown)}")
    return f"INSERT INTO events ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


def _output_rows(session: int, pid: int, kind: int, pieces: list[tuple[int, str]]) -> list[EventRow]:
    return [
        (session, ts, kind, pid, None, None, None, None, None, None, text, None, None) for ts, text in pieces
    ]
