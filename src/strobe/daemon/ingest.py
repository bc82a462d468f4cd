"""From the agent's binary trace batches to event rows: per-thread call stacks give each event its
parent, thread names come from /proc, and ring drops and sampling are counted, never hidden.

Runs on the ingest thread, one batch at a time per session, in arrival order."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import numpy as np

from strobe.instrument.records import FLAG_SAMPLED, KIND_ENTER, KIND_EXIT, NO_PARENT, decode
from strobe.store.writer import Writer

log = logging.getLogger(__name__)



MAX_QUEUED_RECORDS = 1_000_000  # ~72 MB of raw batches waiting to be decoded
MAX_PENDING_ROWS = 150_000  # decoded rows waiting for the writer


class IngestWorker:
    """The thread that decodes trace batches, so Frida's threads only enqueue. Memory stays bounded: the
    thread waits while the writer is behind, and batches arriving while too many records are queued are
    refused (the caller counts them as dropped)."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[[], None], int] | None] = queue.SimpleQueue()
        self._queued_records = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="strobe-ingest", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], None], records: int = 0) -> bool:
        """Queue a job carrying `records` trace records; False (not queued) when the queue is full."""
        with self._lock:
            if records and self._queued_records + records > MAX_QUEUED_RECORDS:
                return False
            self._queued_records += records
        self._queue.put((job, records))
        return True

    async def barrier(self) -> None:
        """Resolves once every job submitted before it has run."""
        done: Future[None] = Future()
        self._queue.put((lambda: done.set_result(None), 0))
        await asyncio.wrap_future(done)

    def close(self, timeout: float = 10.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            job, records = item
            try:
                job()
            except Exception:
                log.exception("ingest: a trace batch could not be stored")
            finally:
                with self._lock:
                    self._queued_records -= records


@dataclass
class HookedSlot:
    db_key: int  # functions.key
    params: int


_ENTER_COLUMNS = ("id", "session", "ts", "kind", "pid", "tid", "func", "parent", "sampled", "args")
_EXIT_COLUMNS = ("id", "session", "ts", "kind", "pid", "tid", "func", "parent", "duration", "retval", "sampled")


@dataclass
class _SeqMap:
    """Where each batch's records went: sequence numbers (64-bit, unwrapped) to event ids."""

    starts: list[int] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    next_seq: int | None = None

    def add(self, first_seq32: int, count: int, first_id: int) -> int:
        previous = first_seq32 if self.next_seq is None else self.next_seq
        start = previous + ((first_seq32 - previous) & 0xFFFF_FFFF)
        self.starts.append(start)
        self.ids.append(first_id)
        self.counts.append(count)
        self.next_seq = start + count
        return start

    def resolve(self, parents32: np.ndarray, last_seq: int) -> np.ndarray:
        """Event ids for parent sequence numbers (which never follow their child); -1 where unknown."""
        seq = last_seq - ((last_seq - parents32.astype(np.int64)) & 0xFFFF_FFFF)
        starts = np.asarray(self.starts, dtype=np.int64)
        k = np.searchsorted(starts, seq, side="right") - 1
        valid = (parents32 != NO_PARENT) & (k >= 0)
        k = np.where(valid, k, 0)
        offset = seq - starts[k]
        valid &= offset < np.asarray(self.counts, dtype=np.int64)[k]
        return np.where(valid, np.asarray(self.ids, dtype=np.int64)[k] + offset, -1)


@dataclass
class TraceIngest:
    writer: Writer
    session: int
    pid: int
    start_ns: int
    slots: dict[int, HookedSlot] = field(default_factory=dict)
    dropped: int = 0  # as reported by the agent (its ring was full)
    refused: int = 0  # batches' records the daemon could not queue
    sampled_out: int = 0
    events: int = 0
    _named_threads: dict[int, str] = field(default_factory=dict)
    _seqs: _SeqMap = field(default_factory=_SeqMap)
    _keys: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    _params: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    def hook(self, slot: int, db_key: int, params: int) -> None:
        """Say what a function slot means before the agent can report calls of it."""
        self.slots[slot] = HookedSlot(db_key, params)
        if slot >= len(self._keys):
            size = max(slot + 1, 2 * len(self._keys), 64)
            self._keys = np.resize(self._keys, size)
            self._params = np.resize(self._params, size)
        self._keys[slot] = db_key
        self._params[slot] = min(max(params, 0), 6)

    def on_batch(
        self, data: bytes, count: int, dropped: int, sampled_out: int, threads: list[tuple[int, str]] | None = None,
        first_seq: int = 0,
    ) -> None:
        records = decode(data, count)
        if threads:
            self._name_threads(threads)
        self.writer.wait_for_room(MAX_PENDING_ROWS)
        first_id = self.writer.reserve_ids(count)
        start = self._seqs.add(first_seq, count, first_id)
        parents = self._seqs.resolve(records["parent"], start + count - 1)
        self.writer.submit_parts(self.session, first_id, count, self._parts(records, first_id, parents))
        self.events += count
        if dropped != self.dropped or sampled_out != self.sampled_out:
            self.dropped, self.sampled_out = max(self.dropped, dropped), max(self.sampled_out, sampled_out)
            self.store_counters()

    def refuse(self, count: int) -> None:
        """A batch the daemon had no room for: its records are counted as dropped, never silently lost."""
        self.refused += count
        self.store_counters()

    def store_counters(self) -> None:
        self.writer.call(self._store_counters(self.dropped + self.refused, self.sampled_out))

    def _parts(
        self, records: np.ndarray, first_id: int, parents: np.ndarray
    ) -> list[tuple[tuple[str, ...], list[tuple[Any, ...]]]]:
        """Rows for enters and exits, built column-wise: no Python work per record but the final zip."""
        n = len(records)
        funcs = records["func"].astype(np.int64)
        known = funcs < len(self._keys)
        keys = np.where(known, self._keys[np.where(known, funcs, 0)], -1)
        ids = np.arange(first_id, first_id + n, dtype=np.int64)
        ts = records["ts"].astype(np.int64) - self.start_ns
        parent_col = _nullable(parents, parents >= 0)
        key_col = _nullable(keys, keys >= 0)
        sampled = (records["flags"] & FLAG_SAMPLED) != 0
        sampled_col: np.ndarray | None = _nullable(np.ones(n, dtype=np.int64), sampled) if sampled.any() else None
        tids = records["tid"].astype(np.int64)
        regs = records["a"]
        session, pid = self.session, self.pid
        parts: list[tuple[tuple[str, ...], list[tuple[Any, ...]]]] = []
        for kind, columns in ((KIND_ENTER, _ENTER_COLUMNS), (KIND_EXIT, _EXIT_COLUMNS)):
            chosen = np.flatnonzero(records["kind"] == kind)
            if not len(chosen):
                continue
            m = len(chosen)
            common = [
                ids[chosen].tolist(), repeat(session, m), ts[chosen].tolist(), repeat(int(kind), m), repeat(pid, m),
                tids[chosen].tolist(), key_col[chosen].tolist(), parent_col[chosen].tolist(),
            ]
            sampled_values = sampled_col[chosen].tolist() if sampled_col is not None else repeat(None, m)
            if kind == KIND_ENTER:
                args = self._arguments(regs[chosen], funcs[chosen], known[chosen])
                rows = list(zip(*common, sampled_values, args, strict=False))
            else:
                rows = list(zip(*common, regs[chosen, 1].tolist(), regs[chosen, 0].tolist(), sampled_values,
                                strict=False))
            parts.append((columns, rows))
        return parts

    def _arguments(self, regs: np.ndarray, funcs: np.ndarray, known: np.ndarray) -> list[bytes | None]:
        """Each enter's argument registers as a blob, trimmed to its function's parameter count."""
        counts = np.where(known, self._params[np.where(known, funcs, 0)], 6)
        out: np.ndarray = np.full(len(regs), None, dtype=object)
        regs = np.ascontiguousarray(regs)
        for n in np.unique(counts).tolist():
            if n == 0:
                continue
            rows = np.flatnonzero(counts == n)
            blobs = np.ascontiguousarray(regs[rows, :n]).view(np.dtype((np.void, 8 * n))).ravel()
            out[rows] = [bytes(b) for b in blobs.tolist()]
        result: list[bytes | None] = out.tolist()
        return result

    def _store_counters(self, dropped: int, sampled_out: int) -> Callable[[Any], None]:
        session = self.session

        def store(conn: Any) -> None:
            conn.execute(
                "UPDATE sessions SET dropped = ?, sampled_out = ? WHERE key = ?", (dropped, sampled_out, session)
            )

        return store

    def _name_threads(self, threads: list[tuple[int, str]]) -> None:
        """Thread names noted by the agent when a thread first calls a traced function."""
        names = [(self.session, self.pid, tid, name or None) for tid, name in threads
                 if self._named_threads.get(tid) != name]
        if not names:
            return
        self._named_threads.update((tid, name) for tid, name in threads)

        def store(conn: Any) -> None:
            conn.executemany("INSERT OR REPLACE INTO threads (session, pid, tid, name) VALUES (?, ?, ?, ?)", names)

        self.writer.call(store)


def _nullable(values: np.ndarray, present: np.ndarray) -> np.ndarray:
    """An object column: the value where present, None elsewhere."""
    out = values.astype(object)
    out[~present] = None
    return out
