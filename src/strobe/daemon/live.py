"""A live session: a session whose processes this daemon traces and has not yet seen all end.

It holds the session-wide state (its record, its process tree, its trace patterns and function slots, watches,
argument types, polls) and is the launcher's ProcessObserver for every process of the session. Observer
callbacks run on Frida's threads: they only enqueue (the ingest thread) or hand over to the event loop, where
`SessionEvents` (daemon/lifecycle.py, daemon/children.py) handles what happened.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from strobe.daemon.argtypes import ArgumentTypes
from strobe.daemon.breakpoint_state import SessionBreakpoints, logpoint_row
from strobe.daemon.ingest import IngestWorker, SlotTable
from strobe.daemon.memory import SessionPolls, snapshot_row
from strobe.daemon.process import ProcessImage, TracedProcess
from strobe.daemon.runtimes.cpython import batch_size, breaks_message, is_reply, tracer_state
from strobe.daemon.stdin import StdinFeed
from strobe.daemon.tracing import SessionTrace
from strobe.daemon.watches import Watch, WatchSpec
from strobe.instrument.protocol import (
    CrashReport,
    LogpointBatch,
    LogpointHit,
    PauseReport,
    PollComplete,
    PyState,
    SamplingStateChange,
    TraceBatch,
    VariableSnapshot,
)
from strobe.instrument.records import RECORD_SIZE
from strobe.settings import Settings
from strobe.store.schema import EventKind
from strobe.store.sessions import SessionRecord
from strobe.store.writer import Writer

log = logging.getLogger(__name__)


class SessionEvents(Protocol):
    """What a live session hands to the event loop."""

    def process_gone(self, live: LiveSession, handle: Any, reason: str) -> None: ...

    def crashed(self, live: LiveSession, pid: int, report: CrashReport, stack: bytes) -> None: ...

    def paused(self, live: LiveSession, pid: int, report: PauseReport, stack: bytes) -> None: ...

    def python_paused(self, live: LiveSession, pid: int, report: dict[str, Any]) -> None: ...

    def child_added(self, live: LiveSession, handle: Any, origin: str, parent: int, path: str) -> None: ...


@dataclass(eq=False)
class LiveSession:
    record: SessionRecord
    writer: Writer
    ingest_worker: IngestWorker
    loop: asyncio.AbstractEventLoop
    events: SessionEvents
    settings: Settings
    owns_output: bool = True  # False when attached to a process whose pipes another reader has (test runs)
    attached: bool = False  # a process Strobe did not start (debug_launch {pid}): stop detaches, never kills
    start_ns: int = 0
    processes: dict[int, TracedProcess] = field(default_factory=dict)  # the root and every followed child
    trace: SessionTrace = field(default_factory=lambda: SessionTrace(SlotTable()))
    types: ArgumentTypes | None = None
    watches: list[Watch] = field(default_factory=list)  # read in processes running the root's image
    closers: list[Callable[[], None]] = field(default_factory=list)  # run once it has ended (a runtime's directory)
    stdin: StdinFeed | None = None  # the program's stdin when the launch gave one (daemon/stdin.py)
    pending_watches: list[WatchSpec] = field(default_factory=list)  # set once the launched process exec()s
    polls: SessionPolls = field(default_factory=SessionPolls)
    breakpoints: SessionBreakpoints = field(default_factory=SessionBreakpoints)
    trace_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    stopping: bool = False
    settling: bool = False
    streams_closed: threading.Event = field(default_factory=threading.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    crash_reports: set[asyncio.Task[Any]] = field(default_factory=set)  # being stored (daemon/crash_store.py)
    output_bytes: int = 0  # what the program has written to stdout/stderr so far (debug_stacks: is it progressing)
    _closed_fds: set[int] = field(default_factory=set)

    @property
    def pid(self) -> int:
        return self.record.pid

    @property
    def root(self) -> TracedProcess:
        return self.processes[self.record.pid]

    @property
    def image(self) -> ProcessImage:
        """What the launched process runs (a new image after it exec()s)."""
        return self.root.image

    @property
    def serialization_depth(self) -> int:
        return self.types.depth if self.types is not None else 3

    def live_processes(self) -> list[TracedProcess]:
        return [process for process in self.processes.values() if not process.ended]

    def hooked_names(self) -> dict[int, str]:
        return {slot: f.name for process in self.processes.values() for slot, f in process.hooked.items()}

    def sampled_function_names(self) -> list[str]:
        names = self.hooked_names()
        return sorted({names[slot] for slot, on in self.trace.sampling.items() if on and slot in names})

    # ---- ProcessObserver (Frida's threads) -------------------------------------------------------

    def on_output(self, pid: int, fd: int, data: bytes) -> None:
        kind = EventKind.STDOUT if fd == 1 else EventKind.STDERR
        self.output_bytes += len(data)
        self.writer.submit_output(self.record.key, pid, kind, data, time.monotonic_ns() - self.start_ns)
        if not data:
            self._closed_fds.add(fd)
            if len(self._closed_fds) >= 2:
                self.streams_closed.set()

    def on_exit_code(self, pid: int, code: int) -> None:
        process = self.processes.get(pid)
        if process is not None:
            process.exit_code = code

    def on_detached(self, handle: Any, reason: str) -> None:
        self.loop.call_soon_threadsafe(self.events.process_gone, self, handle, reason)

    def on_child(self, handle: Any, origin: str, parent_pid: int, path: str) -> None:
        self.loop.call_soon_threadsafe(self.events.child_added, self, handle, origin, parent_pid, path)

    def on_crash(self, pid: int, report: CrashReport, stack: bytes) -> None:
        self.loop.call_soon_threadsafe(self.events.crashed, self, pid, report, stack)

    def on_paused(self, pid: int, report: PauseReport, stack: bytes) -> None:
        self.loop.call_soon_threadsafe(self.events.paused, self, pid, report, stack)

    def on_logpoints(self, pid: int, batch: LogpointBatch) -> None:
        rows = [logpoint_row(self.record.key, pid, hit, self.start_ns) for hit in batch.hits]
        if rows:
            self.writer.submit_rows(rows)
        if batch.dropped:
            log.warning("session %s: pid %d: %d logpoint lines dropped by the agent (too many too fast)",
                        self.record.id, pid, batch.dropped)

    def on_trace_batch(self, pid: int, batch: TraceBatch, data: bytes) -> None:
        process = self.processes.get(pid)
        if process is None:
            return
        ingest = process.ingest
        queued = self.ingest_worker.submit(
            lambda: ingest.on_batch(data, batch.count, batch.dropped, batch.sampledOut, batch.threads,
                                    batch.firstSeq, batch.watchValues, batch.followValues, batch.watchVersion),
            batch.count,
        )
        if not queued:
            log.warning("session %s: ingest queue full; %d trace records dropped", self.record.id, batch.count)
            self.ingest_worker.submit(lambda: ingest.refuse(batch.count))

    def on_py_batch(self, pid: int, data: bytes) -> None:
        process = self.processes.get(pid)
        if process is not None and is_reply(data):
            tracer_state(process.handle).resolve(data)
            return
        if process is not None and (message := breaks_message(data)) is not None:
            if isinstance(message.get("pause"), dict):
                self.loop.call_soon_threadsafe(self.events.python_paused, self, pid, message["pause"])
            else:
                self._python_logpoints(pid, message)
            return
        on_batch = getattr(process.ingest, "on_py_batch", None) if process is not None else None
        if process is None or on_batch is None:
            log.info("session %s: a Python tracer batch from pid %d, which is not traced as Python", self.record.id,
                     pid)
            return
        ingest, count = process.ingest, batch_size(data)
        # bounded like native records, by their count or their bytes (a JSON event is ~2-4x a native record's size)
        weight = max(count, 1, len(data) // RECORD_SIZE)
        if not self.ingest_worker.submit(lambda: on_batch(data), weight):
            log.warning("session %s: ingest queue full; %d Python events of pid %d dropped", self.record.id, count,
                        pid)
            self.ingest_worker.submit(lambda: ingest.refuse(count))

    def _python_logpoints(self, pid: int, message: dict[str, Any]) -> None:
        hits: list[LogpointHit] = []
        for line in message.get("logpoints", []):
            try:
                ts = int(line["ts"])
                hits.append(LogpointHit(id=str(line["id"]), tid=int(line["tid"]), text=str(line["text"]),
                                        threadName=line.get("thread"), sec=ts // 1_000_000_000,
                                        nsec=ts % 1_000_000_000))
            except (KeyError, TypeError, ValueError):
                log.info("session %s: a malformed Python logpoint line: %.200r", self.record.id, line)
        self.on_logpoints(pid, LogpointBatch(type="logpoints", hits=hits, dropped=int(message.get("dropped") or 0)))

    def on_py_state(self, pid: int, state: PyState) -> None:
        if state.state == "unsupported":
            log.warning("session %s: pid %d: the Python tracer could not be installed: %s", self.record.id, pid,
                        state.error)
        else:
            log.info("session %s: pid %d: Python tracer %s", self.record.id, pid, state.state)
        process = self.processes.get(pid)
        if process is not None:
            tracer = tracer_state(process.handle)
            tracer.state, tracer.error = state.state, state.error

    def on_sampling_change(self, pid: int, change: SamplingStateChange) -> None:
        if pid == self.pid:
            self.trace.sampling[change.funcId] = change.enabled
            log.info("session %s: sampling %s for function slot %d", self.record.id,
                     "on" if change.enabled else "off", change.funcId)

    def on_snapshot(self, pid: int, snapshot: VariableSnapshot, data: bytes) -> None:
        ts = snapshot.sec * 1_000_000_000 + snapshot.nsec - self.start_ns
        key, writer, polls = self.record.key, self.writer, self.polls

        def store() -> None:
            values = polls.on_snapshot(snapshot, data)
            if values is not None:
                writer.submit_rows([snapshot_row(key, pid, ts, values)])

        self.ingest_worker.submit(store)

    def on_poll_complete(self, pid: int, done: PollComplete) -> None:
        self.polls.on_complete(done)
