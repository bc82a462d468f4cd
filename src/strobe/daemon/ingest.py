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
from typing import Any

import numpy as np

from strobe.instrument.records import FLAG_SAMPLED, KIND_ENTER, decode
from strobe.store.schema import EventKind
from strobe.store.writer import Writer

log = logging.getLogger(__name__)

MAX_STACK_DEPTH = 4096
_EXIT_SEARCH_DEPTH = 64


class IngestWorker:
    """The thread that decodes trace batches, so Frida's threads only enqueue."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="strobe-ingest", daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        self._queue.put(job)

    async def barrier(self) -> None:
        """Resolves once every job submitted before it has run."""
        done: Future[None] = Future()
        self._queue.put(lambda: done.set_result(None))
        await asyncio.wrap_future(done)

    def close(self, timeout: float = 10.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            try:
                job()
            except Exception:
                log.exception("ingest: a trace batch could not be stored")


@dataclass
class HookedSlot:
    db_key: int  # functions.key
    params: int


@dataclass
class TraceIngest:
    writer: Writer
    session: int
    pid: int
    start_ns: int
    slots: dict[int, HookedSlot] = field(default_factory=dict)
    stacks: dict[int, list[tuple[int, int]]] = field(default_factory=dict)  # tid -> [(slot, enter id)]
    dropped: int = 0
    sampled_out: int = 0
    sampled_events: int = 0
    events: int = 0
    _named_threads: dict[int, str] = field(default_factory=dict)

    def on_batch(
        self, data: bytes, count: int, dropped: int, sampled_out: int, threads: list[tuple[int, str]] | None = None
    ) -> None:
        records = decode(data, count)
        if threads:
            self._name_threads(threads)
        first = self.writer.reserve_ids(count)
        rows = self._rows(records, first)
        self.writer.submit_identified(self.session, first, rows)
        self.events += count
        if dropped != self.dropped or sampled_out != self.sampled_out:
            self.dropped, self.sampled_out = max(self.dropped, dropped), max(self.sampled_out, sampled_out)
            self.writer.call(self._store_counters(self.dropped, self.sampled_out))

    def _rows(self, records: np.ndarray, first: int) -> list[tuple[Any, ...]]:
        session, pid, slots, stacks = self.session, self.pid, self.slots, self.stacks
        ts = (records["ts"].astype(np.int64) - self.start_ns).tolist()
        tids = records["tid"].tolist()
        funcs = records["func"].tolist()
        kinds = records["kind"].tolist()
        sampled_flags = (records["flags"] & FLAG_SAMPLED).tolist()
        regs = np.ascontiguousarray(records["a"])
        raw = regs.tobytes()
        ret = regs[:, 0].tolist()
        duration = regs[:, 1].tolist()
        rows: list[tuple[Any, ...]] = []
        append = rows.append
        enter, exit_ = int(EventKind.FUNCTION_ENTER), int(EventKind.FUNCTION_EXIT)
        for i in range(len(tids)):
            event_id = first + i
            tid = tids[i]
            slot = funcs[i]
            hooked = slots.get(slot)
            key = hooked.db_key if hooked is not None else None
            stack = stacks.get(tid)
            if stack is None:
                stack = stacks[tid] = []
            sampled = 1 if sampled_flags[i] else None
            if sampled:
                self.sampled_events += 1
            if kinds[i] == KIND_ENTER:
                parent = stack[-1][1] if stack else None
                if len(stack) >= MAX_STACK_DEPTH:
                    del stack[0]
                stack.append((slot, event_id))
                nargs = min(hooked.params, 6) if hooked is not None else 6
                args = raw[i * 48 : i * 48 + 8 * nargs] if nargs else None
                append((event_id, session, ts[i], enter, pid, tid, key, parent, None, None, sampled, None, args, None))
            else:
                parent = stack[-1][1] if stack else None
                for depth in range(len(stack) - 1, max(-1, len(stack) - 1 - _EXIT_SEARCH_DEPTH), -1):
                    if stack[depth][0] == slot:
                        parent = stack[depth - 1][1] if depth > 0 else None
                        del stack[depth:]
                        break
                append(
                    (event_id, session, ts[i], exit_, pid, tid, key, parent, duration[i], ret[i], sampled, None,
                     None, None)
                )
        return rows

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
