"""From the agent's binary trace batches to event rows: per-thread call stacks give each event its
parent, thread names come from /proc, and ring drops and sampling are counted, never hidden.

Runs on the ingest thread, one batch at a time per session, in arrival order."""

from __future__ import annotations

import asyncio
import json
import logging
import queue
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from strobe.instrument.records import (
    FLAG_EXT,
    FLAG_FOLLOWED,
    FLAG_JS_WATCH,
    FLAG_NATIVE_WATCH,
    FLAG_SAMPLED,
    FLAG_UNFOLLOWED,
    KIND_ENTER,
    KIND_EXIT,
    KIND_WATCH,
    NO_PARENT,
    RETURN_WORDS,
    WIDE_WORDS,
    carried_tail,
    decode,
    wide_words,
)
from strobe.store import counts
from strobe.store.batches import ColumnGroup, EventBlock
from strobe.store.writer import Writer

log = logging.getLogger(__name__)

MAX_QUEUED_RECORDS = 750_000  # ~54 MB of raw batches waiting to be decoded (3 s of a 250k events/s flood)
MAX_PENDING_ROWS = 50_000  # decoded rows waiting for the writer (~230 bytes each as Python values; ~0.15 s of work)


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
        if self.starts and start == self.starts[-1] + self.counts[-1] and first_id == self.ids[-1] + self.counts[-1]:
            self.counts[-1] += count  # contiguous with the previous batch in both numberings: one range
        else:
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


class WatchValues(Protocol):
    """Decodes what the agent captured for watches (daemon.watches.WatchDecoder)."""

    def native(self, mask: int, words: Any) -> dict[str, Any]: ...

    def js(self, values: Any) -> dict[str, Any]: ...

    def python(self, wid: int, slot: int, value: Any) -> tuple[str, Any] | None: ...


class WatchVersions:
    """The watch sets sent to a session's processes, by version. The host picks a version before it sends a set
    and the agent stamps it on every batch recorded under that set, so a batch is decoded with its own watches
    even when it arrives before the agent's reply. Version 0: no watches. One per session, shared by the ingests
    of its processes (a forked child records under its parent's set until it is sent its own)."""

    def __init__(self) -> None:
        self._sets: dict[int, WatchValues | None] = {0: None}
        self._next = 1

    def add(self, decoder: WatchValues | None) -> int:
        """Register a set; returns the version to send with it."""
        version = self._next
        self._next += 1
        self._sets[version] = decoder
        return version

    def get(self, version: int) -> WatchValues | None:
        """The decoder of a batch stamped `version`; None when it carries no watches (or a version never sent)."""
        return self._sets.get(version)


class FollowedValues(Protocol):
    """Decodes pointers the agent followed at call time (daemon.follow.FollowDecoder)."""

    def decode(self, func_id: int, version: int, captured: Any) -> dict[str, Any]: ...


MAX_NOTES = 10
MAX_NOTE_CHARS = 600
_REPEATS = re.compile(r" \(×\d+\)$")


class SlotTable:
    """What each function slot (the agent's function id) means: its `functions` row and how many argument
    registers its calls keep. One per session, shared by the ingests of all its processes (slots are
    session-wide and never reused)."""

    def __init__(self) -> None:
        self.slots: dict[int, HookedSlot] = {}
        self.keys = np.zeros(0, dtype=np.int64)
        self.params = np.zeros(0, dtype=np.int64)
        self.notes: list[str] = []  # what the session's in-process tracers reported (a file running untraced: why)

    def note(self, text: str) -> None:
        """Keep a tracer's report for the agent (debug_trace's warnings, a traced test run's traceWarnings): the
        first MAX_NOTES distinct ones, a repeat count left out."""
        text = _REPEATS.sub("", text)[:MAX_NOTE_CHARS]
        if text not in self.notes and len(self.notes) < MAX_NOTES:
            self.notes.append(text)

    def hook(self, slot: int, db_key: int, params: int) -> None:
        self.slots[slot] = HookedSlot(db_key, params)
        if slot >= len(self.keys):
            size = max(slot + 1, 2 * len(self.keys), 64)
            self.keys = np.concatenate([self.keys, np.full(size - len(self.keys), -1, np.int64)])
            self.params = np.concatenate([self.params, np.full(size - len(self.params), 6, np.int64)])
        self.keys[slot] = db_key
        self.params[slot] = min(max(params, 0), 6)


@dataclass
class TraceIngest:
    """The trace batches of one process of a session."""

    writer: Writer
    session: int
    pid: int
    start_ns: int
    table: SlotTable = field(default_factory=SlotTable)
    peers: dict[int, TraceIngest] = field(default_factory=dict)  # the session's ingests by pid (loss counters)
    dropped: int = 0  # as reported by the agent (its ring was full)
    refused: int = 0  # batches' records the daemon could not queue
    sampled_out: int = 0
    events: int = 0
    _named_threads: dict[int, str] = field(default_factory=dict)
    _seqs: _SeqMap = field(default_factory=_SeqMap)
    watches: WatchVersions = field(default_factory=WatchVersions)
    _carried_watch: tuple[WatchValues, int, list[int]] | None = None  # native values whose call opens the next batch
    _carried_ext: np.ndarray | None = None  # the last batch's closing capture/watch records (records.carried_tail)
    follow: FollowedValues | None = None

    def __post_init__(self) -> None:
        self.peers[self.pid] = self

    def sibling(self, pid: int) -> TraceIngest:
        """The ingest of another process of this session (a followed child): same slots, decoders, counters."""
        return TraceIngest(self.writer, self.session, pid, self.start_ns, self.table, self.peers,
                           watches=self.watches, follow=self.follow)

    @property
    def slots(self) -> dict[int, HookedSlot]:
        return self.table.slots

    def hook(self, slot: int, db_key: int, params: int) -> None:
        """Say what a function slot means before the agent can report calls of it."""
        self.table.hook(slot, db_key, params)

    def on_batch(
        self, data: bytes, count: int, dropped: int, sampled_out: int, threads: list[tuple[int, str]] | None = None,
        first_seq: int = 0, watch_values: list[tuple[int, dict[str, Any]]] | None = None,
        follow_values: list[tuple[int, int, dict[str, Any]]] | None = None, watch_version: int = 0,
    ) -> None:
        records = decode(data, count)
        if threads:
            self._name_threads(threads)
        self.writer.wait_for_room(MAX_PENDING_ROWS)
        first_id = self.writer.reserve_ids(count)
        start = self._seqs.add(first_seq, count, first_id)
        parents = self._seqs.resolve(records["parent"], start + count - 1)
        extras: dict[int, dict[str, Any]] = {}
        watches = self.watches.get(watch_version)
        if watches is not None:
            self._watch_extras(watches, extras, records, first_seq, watch_values)
        else:
            self._carried_watch = None
        if follow_values and self.follow is not None:
            self._follow_extras(extras, records, first_seq, follow_values)
        texts = {i: json.dumps(v, separators=(",", ":"), default=str) for i, v in extras.items() if v}
        wide = wide_words(records, self._carried_ext)
        self._carried_ext = carried_tail(records)
        self.writer.submit_block(self._block(records, first_id, parents, texts, wide))
        self.events += count
        if dropped != self.dropped or sampled_out != self.sampled_out:
            self.dropped, self.sampled_out = max(self.dropped, dropped), max(self.sampled_out, sampled_out)
            self.store_counters()

    def refuse(self, count: int) -> None:
        """A batch the daemon had no room for: its records are counted as dropped, never silently lost."""
        self.refused += count
        self.store_counters()

    def store_counters(self) -> None:
        """The session's loss counters: the sum over its processes."""
        peers = list(self.peers.values())
        self.writer.call(self._store_counters(sum(p.dropped + p.refused for p in peers),
                                              sum(p.sampled_out for p in peers)))

    def _watch_extras(
        self, watches: WatchValues, extras: dict[int, dict[str, Any]], records: np.ndarray, first_seq: int,
        js_values: list[tuple[int, dict[str, Any]]] | None,
    ) -> None:
        """`extra` fields ({"watchValues": {...}}) by position in the batch, for the calls that carry watch values:
        native ones in the KIND_WATCH record just before the call's (committed first, so a batch may end with
        one whose call opens the next batch: it is carried over), JavaScript ones in the batch header by
        sequence number."""
        values: dict[int, dict[str, Any]] = {}
        flags, kinds = records["flags"], records["kind"]
        n = len(records)
        carried, self._carried_watch = self._carried_watch, None
        if carried is not None and n and kinds[0] != KIND_WATCH and flags[0] & FLAG_NATIVE_WATCH:
            decoder, mask, words = carried
            values[0] = decoder.native(mask, words)
        for i in np.flatnonzero(kinds == KIND_WATCH).tolist():
            mask, words = int(flags[i]), records["a"][i].tolist()
            if i + 1 == n:
                self._carried_watch = (watches, mask, words)
            elif flags[i + 1] & FLAG_NATIVE_WATCH and kinds[i + 1] != KIND_WATCH:
                values.setdefault(i + 1, {}).update(watches.native(mask, words))
        for seq, captured in js_values or ():
            i = (seq - first_seq) & 0xFFFF_FFFF
            if i < n and flags[i] & FLAG_JS_WATCH:
                values.setdefault(i, {}).update(watches.js(captured))
        for i, v in values.items():
            if v:
                extras.setdefault(i, {})["watchValues"] = v

    def _follow_extras(
        self, extras: dict[int, dict[str, Any]], records: np.ndarray, first_seq: int,
        follow_values: list[tuple[int, int, dict[str, Any]]],
    ) -> None:
        """`extra` fields ({"followed": {argument index or "r": value}}) for the calls whose pointers the agent
        followed, by sequence number in the batch header."""
        assert self.follow is not None
        flags, funcs, n = records["flags"], records["func"], len(records)
        for seq, version, captured in follow_values:
            i = (seq - first_seq) & 0xFFFF_FFFF
            if i < n and flags[i] & FLAG_FOLLOWED:
                followed = self.follow.decode(int(funcs[i]), version, captured)
                if followed:
                    extras.setdefault(i, {})["followed"] = followed

    def _block(
        self, records: np.ndarray, first_id: int, parents: np.ndarray, extras: dict[int, str] | None = None,
        wide: np.ndarray | None = None,
    ) -> EventBlock:
        """The batch's rows, built column-wise: records that fill the same columns (kind; function known or
        not; parent or none; sampled or not; number of argument registers; words beyond the integer registers
        or not) form one group, whose values come out of numpy as one flat list. Nothing Python-level happens
        per record. `wide` (records.wide_words): the words of FLAG_EXT calls, stored as their args blob (an
        enter's WIDE_WORDS, an exit's RETURN_WORDS: rdx, xmm0, xmm1)."""
        n = len(records)
        funcs = records["func"].astype(np.int64)
        table_keys, table_params = self.table.keys, self.table.params
        known = funcs < len(table_keys)
        slots = np.where(known, funcs, 0)
        keys = np.where(known, table_keys[slots], -1)
        ids = np.arange(first_id, first_id + n, dtype=np.int64)
        ts = records["ts"].astype(np.int64) - self.start_ns
        kinds = records["kind"].astype(np.int64)
        regs = records["a"]
        enters, exits = kinds == KIND_ENTER, kinds == KIND_EXIT
        nargs = np.where(known, table_params[slots], 6) * enters
        sampled = (records["flags"] & FLAG_SAMPLED) != 0
        unfollowed = ((records["flags"] & FLAG_UNFOLLOWED) != 0).astype(np.int64)
        extra = np.zeros(n, dtype=np.int64)
        if extras:
            extra[list(extras)] = 1
        widened = ((records["flags"] & FLAG_EXT) != 0).astype(np.int64) if wide is not None else 0
        signature = ((kinds << 9) | (unfollowed << 8) | (widened << 7) | (extra << 6) | ((keys >= 0) << 5)
                     | ((parents >= 0) << 4) | (sampled << 3) | nargs)
        signature[~(enters | exits)] = -1  # not a kind this version stores (KIND_WATCH etc.: merged into its call)
        groups: list[ColumnGroup] = []
        for sig in np.flatnonzero(np.bincount(signature[signature >= 0], minlength=2048)).tolist():
            rows = np.flatnonzero(signature == sig)
            columns = ["id", "ts", "tid"]
            arrays = [ids[rows], ts[rows], records["tid"][rows]]
            if sig & 32:
                columns.append("func")
                arrays.append(keys[rows])
            if sig & 16:
                columns.append("parent")
                arrays.append(parents[rows])
            if sig >> 9 == KIND_EXIT:
                columns += ["duration", "retval"]
                arrays += [regs[rows, 1], regs[rows, 0]]
            width = sig & 7
            source = regs
            if sig & 128 and wide is not None:
                width, source = (RETURN_WORDS if sig >> 9 == KIND_EXIT else WIDE_WORDS), wide
            if width:
                columns.append("args")
                arrays.append(np.zeros(len(rows), np.int64))  # a place for each row's blob
            if sig & 64:
                columns.append("extra")
                arrays.append(np.zeros(len(rows), np.int64))  # a place for each row's JSON
            matrix = np.empty((len(rows), len(columns)), np.int64)
            for j, column in enumerate(arrays):
                matrix[:, j] = column
            values: list[Any] = matrix.ravel().tolist()
            if width:  # each enter's argument registers as a blob, trimmed to its function's parameter count
                blobs = np.ascontiguousarray(source[rows, :width]).view(np.dtype((np.void, 8 * width))).ravel()
                values[columns.index("args")::len(columns)] = blobs.tolist()
            if sig & 64 and extras is not None:
                values[len(columns) - 1::len(columns)] = [extras[i] for i in rows.tolist()]
            constants = [("session", self.session), ("kind", sig >> 9), ("pid", self.pid)]
            if sig & (8 | 256):  # bit 0: sampled; bit 1: its pointers were not followed (the follow limit)
                constants.append(("sampled", (1 if sig & 8 else 0) | (2 if sig & 256 else 0)))
            groups.append(ColumnGroup(tuple(columns), tuple(constants), values))
        stored = signature >= 0
        summary = counts.summarise(self.session, ids[stored], ts[stored], kinds[stored], keys[stored],
                                   exits[stored], regs[exits, 1], regs[exits, 0]) if stored.any() else None
        return EventBlock(self.session, first_id, n, groups, summary)

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
