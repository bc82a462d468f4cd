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
SummaryRow = tuple[Any, ...]
SUMMARY_COLUMNS = ("id", "ts", "kind", "func", "duration", "retval")
"""What the count tables need of an event submitted in groups (submit_groups)."""


@dataclass(frozen=True)
class ColumnGroup:
    """Event rows that fill the same columns: `values` holds len(columns) values per row, row after row (a flat
    list, so a producer builds it with one numpy `tolist()` and no Python object per row). `constants` are
    columns with the same integer value in every row; they are written into the SQL instead of bound."""

    columns: tuple[str, ...]
    constants: tuple[tuple[str, int], ...]
    values: list[Any]

    @property
    def rows(self) -> int:
        return len(self.values) // len(self.columns)


@dataclass(frozen=True)
class EventBlock:
    """`count` events of one session holding ids first_id.. (from reserve_ids), as column groups, with the
    summary of them that the count tables need (store/counts.py)."""

    session: int
    first_id: int
    count: int
    groups: Sequence[ColumnGroup]
    summary: counts.BlockSummary | None  # None: no event of the block is stored


DEFAULT_MAX_EVENTS = 200_000
_MAX_ITEMS_PER_TRANSACTION = 50_000
_IDLE_WAIT_S = 0.5
_PARTIAL_WAIT_S = 0.05
CHECKPOINT_INTERVAL_S = 0.2
WRITER_AUTOCHECKPOINT_PAGES = 8192
"""The writer checkpoints by itself only if the WAL passes this many pages (32 MiB) (see _Checkpointer)."""

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
    blocks: list[counts.BlockCells] = field(default_factory=list)  # of the trace blocks still stored, by first id

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

    def add_block(self, cells: counts.BlockCells) -> None:
        if self.blocks and self.blocks[-1].first_id > cells.first_id:
            bisect.insort(self.blocks, cells, key=lambda b: b.first_id)
        else:
            self.blocks.append(cells)

    def blocks_within(self, lo: int, hi: int) -> list[counts.BlockCells]:
        """The blocks with ids in lo..hi; those that end by `hi` are forgotten (trimming goes oldest first, so
        nothing of theirs remains)."""
        found = []
        for block in self.blocks:
            if block.first_id > hi:
                break
            if block.last_id >= lo:
                found.append(block)
        gone = 0
        while gone < len(self.blocks) and self.blocks[gone].last_id <= hi:
            gone += 1
        del self.blocks[:gone]
        return found

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


class _Checkpointer:
    """Copies the write-ahead log back into the database on a thread and connection of its own, so the writer's
    commits never wait for it (done inside COMMIT it took ~6% of the writer's time under a flood). The writer
    pokes it after each commit; it checkpoints at most every CHECKPOINT_INTERVAL_S. SQLite's own automatic
    checkpoint stays on in the writer, at a higher threshold, in case this thread falls behind."""

    def __init__(self, db_path: Path) -> None:
        self._db_path = db_path
        self._poked = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="strobe-checkpoint", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        self._poked.set()

    def close(self, timeout: float) -> None:
        self._stopping.set()
        self._poked.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self._db_path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error:
            log.exception("store checkpointer: cannot open the store; the writer checkpoints instead")
            return
        try:
            while not self._stopping.is_set():
                self._poked.wait()
                self._poked.clear()
                if self._stopping.is_set():
                    break
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error:
                    log.exception("store checkpointer: checkpoint failed")
                self._stopping.wait(CHECKPOINT_INTERVAL_S)  # pacing: each checkpoint ends with an fsync
        finally:
            conn.close()


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

    def submit_block(self, block: EventBlock) -> None:
        """Store a block of trace events (the ingest's fast path: many rows per INSERT statement, absent values
        never bound, summaries precomputed)."""
        if block.count:
            with self._room:
                self._pending_rows += block.count
            self._queue.put(("block", block))

    def wait_for_room(self, max_pending_rows: int, timeout: float = 30.0) -> bool:
        """Block a producer while more than `max_pending_rows` of its rows wait to be written, so a flood of
        events queues as compact batches upstream instead of as Python rows here. False on timeout."""
        with self._room:
            return self._room.wait_for(lambda: self._pending_rows <= max_pending_rows, timeout)

    def submit_groups(self, session: int, first_id: int, groups: Sequence[ColumnGroup],
                      summary: Sequence[SummaryRow]) -> None:
        """Store events of one session carrying ids first_id.. from reserve_ids(), as column groups (many rows per
        INSERT statement), with one SUMMARY_COLUMNS row per event for the count tables (counts.record). They
        count as pending rows (wait_for_room) until written, like blocks."""
        if summary:
            with self._room:
                self._pending_rows += len(summary)
            self._queue.put(("groups", session, first_id, groups, summary))

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
        conn.execute(f"PRAGMA wal_autocheckpoint = {WRITER_AUTOCHECKPOINT_PAGES}")
        checkpointer = _Checkpointer(self._db_path)
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
                if items:
                    checkpointer.poke()
            except Exception as exc:
                log.exception("store writer: a transaction failed; its events are lost")
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                self._resync(conn)
                lost_rows = sum(item[1].count if item[0] == "block" else len(item[4]) for item in items
                                if item[0] in ("block", "groups"))
                with self._room:
                    self._pending_rows -= lost_rows
                    self._room.notify_all()
                for item in items:
                    if item[0] == "call" and not item[2].done():
                        item[2].set_exception(exc)
        checkpointer.close(timeout=10.0)
        conn.close()  # the last connection out checkpoints the rest

    def _write(self, conn: sqlite3.Connection, items: list[tuple[Any, ...]], *, flush_all: bool) -> None:
        pending: list[EventRow] = []
        settled: list[tuple[Future[Any], Any, BaseException | None]] = []
        written_blocks = 0
        conn.execute("BEGIN")
        for item in items:
            tag = item[0]
            if tag == "rows":
                _, session, first, rows = item
                conn.executemany(_INSERT, rows)
                counts.record(conn, session, counts.IDENTIFIED_COLUMNS, rows)
                self._fifo(session).add(first, len(rows))
                self.rows_written += len(rows)
            elif tag == "groups":
                _, session, first, groups, summary = item
                for group in groups:
                    _insert_group(conn, group)
                counts.record(conn, session, SUMMARY_COLUMNS, summary)
                self._fifo(session).add(first, len(summary))
                self.rows_written += len(summary)
                written_blocks += len(summary)
            elif tag == "block":
                block: EventBlock = item[1]
                for group in block.groups:
                    _insert_group(conn, group)
                fifo = self._fifo(block.session)
                if block.summary is not None:
                    counts.record_summary(conn, block.summary)
                    fifo.add_block(block.summary.cells)
                fifo.add(block.first_id, block.count)
                self.rows_written += block.count
                written_blocks += block.count
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
        if written_blocks:
            with self._room:
                self._pending_rows -= written_blocks
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
            fifo.blocks.clear()  # the events are read back when trimmed
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
                counts.forget_range(conn, lo, hi, fifo.blocks_within(lo, hi))
                conn.execute("DELETE FROM events WHERE id BETWEEN ? AND ?", (lo, hi))
                dropped += hi - lo + 1
            conn.execute("UPDATE sessions SET trimmed = trimmed + ? WHERE key = ?", (dropped, session))


_ROWS_PER_STATEMENT = 64
"""Rows per multi-row INSERT: SQLite's per-statement work (and a release of the GIL) is paid once per this many
rows instead of once per row. The tail of a group goes in statements of 32, 16, ... 1 rows."""


def _insert_group(conn: sqlite3.Connection, group: ColumnGroup) -> None:
    values, width = group.values, len(group.columns)
    done, rows = 0, group.rows
    size = _ROWS_PER_STATEMENT
    while done < rows:
        while size > rows - done:
            size //= 2
        sql = _multi_insert(group.columns, group.constants, size)
        while rows - done >= size:
            conn.execute(sql, values[done * width:(done + size) * width])
            done += size


@functools.lru_cache(maxsize=256)
def _multi_insert(columns: tuple[str, ...], constants: tuple[tuple[str, int], ...], rows: int) -> str:
    names = [*columns, *(name for name, _ in constants)]
    unknown = set(names) - {"id", *EVENT_COLUMNS}
    if unknown or len(set(names)) != len(names):
        raise ValueError(f"not distinct event columns: {names}")
    row = "(" + ", ".join(["?"] * len(columns) + [str(int(value)) for _, value in constants]) + ")"
    return f"INSERT INTO events ({', '.join(names)}) VALUES {', '.join([row] * rows)}"


def _output_rows(session: int, pid: int, kind: int, pieces: list[tuple[int, str]]) -> list[EventRow]:
    return [
        (session, ts, kind, pid, None, None, None, None, None, None, text, None, None) for ts, text in pieces
    ]
