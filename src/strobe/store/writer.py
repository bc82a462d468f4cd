"""The single writer: every change to the store goes through this thread, in submission order.

Producers (Frida callbacks, the ingest path, tool handlers) only enqueue. The thread drains whatever
has accumulated, writes it in one transaction, then trims sessions over their FIFO limit. Output
chunks are assembled into lines here, so callbacks stay cheap. `call()` runs a function on the
writer's connection after everything submitted before it, which is how session rows and status
changes stay ordered with the events they describe.

Its parts live beside it: what producers submit and how it is inserted (store/batches.py), which events each
session keeps (store/fifo.py), losses not yet stored (store/losses.py), disk space (store/space.py), the
checkpointing thread (store/checkpointer.py).
"""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from strobe.store import counts
from strobe.store import sessions as store_sessions
from strobe.store.batches import (
    INSERT_ROW,
    SUMMARY_COLUMNS,
    ColumnGroup,
    EventBlock,
    EventRow,
    SummaryRow,
    insert_group,
)
from strobe.store.checkpointer import Checkpointer
from strobe.store.fifo import (
    DEFAULT_MAX_EVENTS,
    DEFAULT_MAX_OUTPUT,
    OUTPUT_LANE,
    OUTPUT_LANE_KINDS,
    TRACE_LANE,
    FifoKey,
    SessionFifo,
    lane_of,
)
from strobe.store.losses import Losses
from strobe.store.output import OutputAssembler
from strobe.store.schema import EventKind, connect
from strobe.store.space import LOW_WATER_BYTES, Reserve, is_out_of_space

log = logging.getLogger(__name__)

T = TypeVar("T")
_MAX_ITEMS_PER_TRANSACTION = 50_000
DELETE_CHUNK = 20_000
"""Events deleted per transaction when a session is deleted (Writer.delete_session)."""
_MAX_OUTPUT_BYTES_PER_TRANSACTION = 4 << 20
MAX_QUEUED_OUTPUT_BYTES = 16 << 20
"""Output waiting for the writer beyond this blocks the thread that reads the program's pipes (Frida's), so a
program that writes faster than the store keeps up waits in write() instead of growing the daemon's memory."""
OUTPUT_WAIT_S = 10.0
"""How long a producer of output waits for room before its chunk is dropped (and counted as lost)."""
_IDLE_WAIT_S = 0.5
_PARTIAL_WAIT_S = 0.05
WRITER_AUTOCHECKPOINT_PAGES = 8192
"""The writer checkpoints by itself only if the WAL passes this many pages (32 MiB) (see store/checkpointer.py)."""

class Writer:
    def __init__(self, db_path: Path) -> None:
        self._db_path = db_path
        self._queue: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="strobe-writer", daemon=True)
        self._fifos: dict[FifoKey, SessionFifo] = {}
        self._limits: dict[FifoKey, int] = {}
        self._assemblers: dict[tuple[int, int, int], OutputAssembler] = {}
        self._next_id = 1
        self._id_lock = threading.Lock()
        self._pending_rows = 0  # trace rows queued but not yet written, for backpressure
        self._pending_output = 0  # output bytes queued but not yet written, for backpressure
        self._room = threading.Condition()
        self._losses = Losses()
        self._reserve = Reserve(Path(f"{db_path}-reserve"))
        self._conn: sqlite3.Connection | None = None
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        self._saved: dict[FifoKey, SessionFifo | None] = {}  # FIFOs as they were before this transaction
        self.rows_written = 0
        self.out_of_space = False
        """The last transaction failed for lack of disk space (cleared by the next one that commits)."""

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
            identified = [(first + i, *row) for i, row in enumerate(session_rows)]
            # one item per run of rows in the same lane, so each lane's FIFO gets contiguous id ranges
            lanes = [lane_of(row[2]) if len(row) > 2 else TRACE_LANE for row in session_rows]
            start = 0
            for end in range(1, len(lanes) + 1):
                if end == len(lanes) or lanes[end] != lanes[start]:
                    self._queue.put(("rows", session, first + start, identified[start:end], lanes[start]))
                    start = end

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

    def submit_output(self, session: int, pid: int, kind: EventKind, data: bytes, ts_ns: int) -> bool:
        """A chunk of a target's stdout/stderr; empty `data` means that stream has ended. While more than
        MAX_QUEUED_OUTPUT_BYTES wait to be written the caller blocks (back-pressure on the program's pipe); after
        OUTPUT_WAIT_S the chunk is dropped, counted as lost, and False returned."""
        size = len(data)
        with self._room:
            if size and not self._room.wait_for(lambda: self._pending_output <= MAX_QUEUED_OUTPUT_BYTES,
                                                OUTPUT_WAIT_S):
                self._losses.add(session, max(1, data.count(b"\n")))
                log.warning("store writer: output of session %d dropped (%d bytes): the store is not keeping up",
                            session, size)
                return False
            self._pending_output += size
        self._queue.put(("out", session, pid, int(kind), data, ts_ns, time.monotonic_ns()))
        return True

    def set_limit(self, session: int, limit: int, output_limit: int = DEFAULT_MAX_OUTPUT) -> None:
        """The session's FIFO caps: `limit` trace events, `output_limit` output lines, crashes and snapshots."""
        self._queue.put(("limit", session, limit, output_limit))

    def call(self, fn: Callable[[sqlite3.Connection], T]) -> Future[T]:
        """Run `fn(conn)` in the writer after everything submitted so far; resolves once committed."""
        future: Future[T] = Future()
        self._queue.put(("call", fn, future))
        return future

    def delete_session(self, session: int) -> Future[int]:
        """Delete a session and everything it captured, DELETE_CHUNK events per transaction with a checkpoint after
        each, so the write-ahead log stays small and a full disk can still take it (a single DELETE of a big
        session logs every page it touches). Resolves to the number of events deleted."""
        future: Future[int] = Future()
        self._queue.put(("delete", session, future))
        return future

    def forget_session(self, session: int) -> None:
        """Drop in-memory state for a deleted session (its rows are deleted by a `call`)."""
        self._queue.put(("forget", session))

    def unsaved_losses(self, session: int) -> int:
        """Events of `session` lost to failed writes that the store does not count yet (its `lost` column gets
        them with the next commit; until then, readers add this)."""
        return self._losses.unsaved(session)

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
        self._reserve.ensure()
        self._started.set()
        conn = self._conn
        conn.execute(f"PRAGMA wal_autocheckpoint = {WRITER_AUTOCHECKPOINT_PAGES}")
        checkpointer = Checkpointer(self._db_path)
        stopping = False
        while not stopping:
            wait = _PARTIAL_WAIT_S if any(a.has_partial for a in self._assemblers.values()) else _IDLE_WAIT_S
            items: list[tuple[Any, ...]] = []
            output_bytes = 0
            try:
                items.append(self._queue.get(timeout=wait))
                while len(items) < _MAX_ITEMS_PER_TRANSACTION and output_bytes < _MAX_OUTPUT_BYTES_PER_TRANSACTION:
                    item = self._queue.get_nowait()
                    items.append(item)
                    if item[0] == "out":
                        output_bytes += len(item[4])
            except queue.Empty:
                pass
            stopping = any(item[0] == "stop" for item in items)
            start = 0
            for end in [i for i, item in enumerate(items) if item[0] == "delete"] + [len(items)]:
                segment = items[start:end]
                if self._transact(conn, segment, flush_all=stopping and end == len(items)) and segment:
                    checkpointer.poke()
                if end < len(items):
                    self._delete_session(conn, items[end][1], items[end][2])
                start = end + 1
            self._release_room(items)
        checkpointer.close(timeout=10.0)
        conn.close()  # the last connection out checkpoints the rest

    def _delete_session(self, conn: sqlite3.Connection, session: int, future: Future[int]) -> None:
        deleted = 0
        try:
            while True:
                conn.execute("BEGIN")
                n = store_sessions.delete_events_chunk(conn, session, DELETE_CHUNK)
                deleted += n
                last = n < DELETE_CHUNK
                if last:
                    store_sessions.delete_session(conn, session)
                    counts.forget_session(conn, session)
                conn.execute("COMMIT")
                # copied back into the file at once, so the log starts over instead of growing by a chunk each time
                conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                if last:
                    break
        except Exception as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            log.warning("store writer: deleting session %d stopped after %d events: %s", session, deleted, exc)
            future.set_exception(exc)
            return
        for lane in (TRACE_LANE, OUTPUT_LANE):
            self._fifos.pop((session, lane), None)
            self._limits.pop((session, lane), None)
        for key in [k for k in self._assemblers if k[0] == session]:
            del self._assemblers[key]
        future.set_result(deleted)

    def _release_room(self, items: list[tuple[Any, ...]]) -> None:
        rows = sum(item[1].count if item[0] == "block" else len(item[4]) for item in items
                   if item[0] in ("block", "groups"))
        output = sum(len(item[4]) for item in items if item[0] == "out")
        if rows or output:
            with self._room:
                self._pending_rows -= rows
                self._pending_output -= output
                self._room.notify_all()

    def _transact(self, conn: sqlite3.Connection, items: list[tuple[Any, ...]], *, flush_all: bool) -> bool:
        """Write the items in one transaction. If it fails, what they carried is counted as lost, and what
        changes no events (session rows, statuses, deletions, limits) is tried again on its own, after the
        disk reserve was released if the disk is full. While the disk stays full, events are not even tried (they
        would eat the room the reserve left for the rest). True if the items were written."""
        if not self.out_of_space and self._reserve.low():
            log.error("store writer: less than %d MiB free beside the store; events are counted as lost until there "
                      "is room again", LOW_WATER_BYTES >> 20)
            self.out_of_space = True
        if self.out_of_space and not self._reserve.room_to_resume():
            for item in items:
                self._losses.add_item(item)
            self._write_control(conn, items, flush_all=flush_all)
            return False
        try:
            self._write(conn, items, flush_all=flush_all)
        except Exception as exc:
            full = is_out_of_space(exc)
            if full:
                if not self.out_of_space:
                    log.error("store writer: the disk is full (%s); events are counted as lost until space returns",
                              exc)
                self._reserve.release()
            else:
                log.exception("store writer: a transaction failed; its events are lost")
            self.out_of_space = full
            for item in items:
                self._losses.add_item(item)
            self._write_control(conn, items, flush_all=flush_all)
            return False
        if self.out_of_space:
            log.warning("store writer: writes succeed again; the disk has space")
            self.out_of_space = False
        if not self._reserve.held:
            self._reserve.ensure()
        return True

    def _write_control(self, conn: sqlite3.Connection, items: list[tuple[Any, ...]], *, flush_all: bool) -> None:
        """Write what of `items` changes no events: session rows, statuses, deletions, limits, a stream's end."""
        control = [item for item in items if item[0] in ("call", "limit", "forget")
                   or (item[0] == "out" and not item[4])]  # a stream's end still flushes its partial line
        if not control:
            return
        try:
            self._write(conn, control, flush_all=flush_all)
        except Exception as again:
            if not is_out_of_space(again):
                log.exception("store writer: the transaction's calls failed on their own too")
            for item in control:
                if item[0] == "call" and not item[2].done():
                    item[2].set_exception(again)

    def _write(self, conn: sqlite3.Connection, items: list[tuple[Any, ...]], *, flush_all: bool) -> None:
        """One transaction. On failure it is rolled back and the in-memory FIFOs are put back as they were."""
        saved: dict[FifoKey, SessionFifo | None] = {}
        self._saved = saved
        try:
            self._write_items(conn, items, flush_all=flush_all)
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            self._losses.failed()
            for key, fifo in saved.items():
                if fifo is None:
                    self._fifos.pop(key, None)
                else:
                    self._fifos[key] = fifo
            raise

    def _write_items(self, conn: sqlite3.Connection, items: list[tuple[Any, ...]], *, flush_all: bool) -> None:
        pending: list[EventRow] = []
        settled: list[tuple[Future[Any], Any, BaseException | None]] = []
        written = 0
        conn.execute("BEGIN")
        for item in items:
            tag = item[0]
            if tag == "rows":
                _, session, first, rows, lane = item
                conn.executemany(INSERT_ROW, rows)
                counts.record(conn, session, counts.IDENTIFIED_COLUMNS, rows)
                self._fifo(session, lane).add(first, len(rows))
                written += len(rows)
            elif tag == "groups":
                _, session, first, groups, summary = item
                for group in groups:
                    insert_group(conn, group)
                counts.record(conn, session, SUMMARY_COLUMNS, summary)
                self._add_summarised(session, first, summary)
                written += len(summary)
            elif tag == "block":
                block: EventBlock = item[1]
                for group in block.groups:
                    insert_group(conn, group)
                fifo = self._fifo(block.session, TRACE_LANE)
                if block.summary is not None:
                    counts.record_summary(conn, block.summary)
                    fifo.add_block(block.summary.cells)
                fifo.add(block.first_id, block.count)
                written += block.count
            elif tag == "out":
                _, session, pid, kind, data, ts_ns, mono = item
                key = (session, pid, kind)
                assembler = self._assemblers.get(key)
                if assembler is None:
                    assembler = self._assemblers[key] = OutputAssembler()
                pieces = assembler.feed(data, ts_ns, mono) if data else assembler.flush()
                pending.extend(_output_rows(session, pid, kind, pieces))
            elif tag == "call":
                written += self._insert(conn, pending)
                pending = []
                fn, future = item[1], item[2]
                conn.execute("SAVEPOINT call")
                try:
                    result = fn(conn)
                except BaseException as exc:
                    if not conn.in_transaction:  # SQLite rolled the whole transaction back (a full disk does)
                        raise
                    conn.execute("ROLLBACK TO call")
                    settled.append((future, None, exc))
                else:
                    settled.append((future, result, None))
                conn.execute("RELEASE call")
            elif tag == "limit":
                _, session, limit, output_limit = item
                for lane, value in ((TRACE_LANE, limit), (OUTPUT_LANE, output_limit)):
                    self._limits[(session, lane)] = value
                    self._fifo(session, lane).limit = value
            elif tag == "forget":
                written += self._insert(conn, pending)
                pending = []
                for lane in (TRACE_LANE, OUTPUT_LANE):
                    self._fifo(item[1], lane)  # saved, so a failed transaction puts it back
                    self._fifos.pop((item[1], lane), None)
                    self._limits.pop((item[1], lane), None)
                counts.forget_session(conn, item[1])
                for key in [k for k in self._assemblers if k[0] == item[1]]:
                    del self._assemblers[key]
        now = time.monotonic_ns()
        taken = sum(len(item[4]) for item in items if item[0] == "out")
        with self._room:
            more_queued = self._pending_output > taken
        for (session, pid, kind), assembler in self._assemblers.items():
            if flush_all:
                pieces = assembler.flush()
            elif more_queued:  # the rest of a partial line may be waiting in the queue: not stale, just behind
                continue
            else:
                pieces = assembler.flush_if_stale(now)
            pending.extend(_output_rows(session, pid, kind, pieces))
        written += self._insert(conn, pending)
        self._trim(conn)
        self._losses.save(conn)
        conn.execute("COMMIT")
        self._losses.committed()
        self.rows_written += written
        for future, result, error in settled:
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

    def _add_summarised(self, session: int, first: int, summary: Sequence[SummaryRow]) -> None:
        """Ids first.. of summarised rows, each in its kind's lane (a Python crash comes among trace events)."""
        kinds = [row[2] for row in summary]
        if OUTPUT_LANE_KINDS.isdisjoint(kinds):
            self._fifo(session, TRACE_LANE).add(first, len(summary))
            return
        for offset, kind in enumerate(kinds):
            self._fifo(session, lane_of(kind)).add(first + offset, 1)

    def _fifo(self, session: int, lane: int) -> SessionFifo:
        """The FIFO of (session, lane), saved first if this transaction has not changed it yet."""
        key = (session, lane)
        fifo = self._fifos.get(key)
        saved = self._saved
        if key not in saved:
            saved[key] = None if fifo is None else fifo.snapshot()
        if fifo is None:
            default = DEFAULT_MAX_OUTPUT if lane == OUTPUT_LANE else DEFAULT_MAX_EVENTS
            fifo = self._fifos[key] = SessionFifo(limit=self._limits.get(key, default))
        return fifo

    def _insert(self, conn: sqlite3.Connection, rows: list[EventRow]) -> int:
        """Output rows (the output lane); returns how many."""
        if not rows:
            return 0
        # Give each session's rows one contiguous id range so FIFO trimming is a primary-key range delete.
        by_session: dict[int, list[EventRow]] = {}
        for row in rows:
            by_session.setdefault(row[0], []).append(row)
        for session, session_rows in by_session.items():
            first = self.reserve_ids(len(session_rows))
            identified = [(first + i, *row) for i, row in enumerate(session_rows)]
            conn.executemany(INSERT_ROW, identified)
            counts.record(conn, session, counts.IDENTIFIED_COLUMNS, identified)
            self._fifo(session, OUTPUT_LANE).add(first, len(session_rows))
        return len(rows)

    def _trim(self, conn: sqlite3.Connection) -> None:
        for (session, lane), fifo in list(self._fifos.items()):
            if fifo.count <= fifo.limit:
                continue
            fifo = self._fifo(session, lane)  # saved before it changes
            dropped = 0
            for lo, hi in fifo.take_excess():
                counts.forget_range(conn, lo, hi, fifo.blocks_within(lo, hi))
                conn.execute("DELETE FROM events WHERE id BETWEEN ? AND ?", (lo, hi))
                dropped += hi - lo + 1
            column = "output_trimmed" if lane == OUTPUT_LANE else "trimmed"
            conn.execute(f"UPDATE sessions SET {column} = {column} + ? WHERE key = ?", (dropped, session))


def _output_rows(session: int, pid: int, kind: int, pieces: list[tuple[int, str]]) -> list[EventRow]:
    return [
        (session, ts, kind, pid, None, None, None, None, None, None, text, None, None) for ts, text in pieces
    ]
