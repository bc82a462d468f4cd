"""SessionManager: the daemon's sessions, from launch to stop, as one facade over the collaborators that do the
work (all passed in, see SessionManager.create for the real ones):

- Launching (daemon/launching.py): spawn or attach, record, hook staged patterns, resume;
- Lifecycle (daemon/lifecycle.py): each process's end, the session settling and finishing, stop and kill;
- LiveSessions (daemon/registry.py): the live sessions by id;
- TraceRequests (daemon/trace_requests.py): debug_trace's patterns, staged per client or changed in a live session;
- ChildFollowing (daemon/children.py), Hooking (daemon/hooking.py): each process (launched or followed) gets the
  hooks and watches of its image; CrashStorage (daemon/crash_store.py), SessionReads (daemon/reads.py), TestRuns.

Everything a caller can ask about is in the store, written only through the Writer so that status changes land
after the output that preceded them. Results are typed; mcp/ shapes what the client sees.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import shutil
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strobe.daemon.breakpoints import Breaking
from strobe.daemon.children import ChildFollowing
from strobe.daemon.crash_store import CrashStorage
from strobe.daemon.frame_reads import VariableRef
from strobe.daemon.hooking import Hooking
from strobe.daemon.images import ImageLoader
from strobe.daemon.ingest import IngestWorker
from strobe.daemon.launching import Launching
from strobe.daemon.lifecycle import STOP_TIMEOUT_S, Lifecycle, now_ms
from strobe.daemon.live import LiveSession
from strobe.daemon.memory import PollState, PreparedRead
from strobe.daemon.py_breakpoints import record_python_pause
from strobe.daemon.reads import SessionReads
from strobe.daemon.registry import LiveSessions
from strobe.daemon.services import Services
from strobe.daemon.stdin import StdinFeed, StdinSource
from strobe.daemon.testruns import TestRuns
from strobe.daemon.trace_requests import DEFAULT_CLIENT, TraceRequests
from strobe.daemon.tracing import SessionTrace
from strobe.daemon.watches import WatchSpec
from strobe.daemon.writes import SessionWrites
from strobe.errors import FridaAttachFailed, ValidationError
from strobe.instrument.agent_build import AgentCache
from strobe.instrument.command import ResolvedCommand
from strobe.instrument.launcher import Launcher
from strobe.instrument.protocol import CrashReport, PauseReport
from strobe.instrument.worker import FridaWorker
from strobe.paths import StrobePaths
from strobe.settings import Settings, SettingsSource
from strobe.store import retention
from strobe.store import sessions as store_sessions
from strobe.store.query import EventFilter, QueryPage, query_events
from strobe.store.reader import Reader
from strobe.store.sessions import ProcessRecord, SessionRecord, SessionStatus
from strobe.store.writer import Writer

log = logging.getLogger(__name__)

PLAN_WAIT_S = 5.0  # how long a verbose query waits for argument types being worked out (then: raw registers)
FLUSH_TIMEOUT_S = 2.0
MAINTENANCE_INTERVAL_S = 60.0
"""How often ended sessions past their retention or over the store's size cap are purged."""


@dataclass(frozen=True)
class Launched:
    session_id: str
    pid: int
    hooked: int  # functions hooked from staged patterns before the first instruction
    warnings: list[str]


def _retain(conn: Any, key: int, ended: int) -> None:
    store_sessions.retain_session(conn, key, ended)


class _Events:
    """What live sessions hand to the event loop, each run as its own task."""

    def __init__(self, services: Services, lifecycle: Lifecycle, crashes: CrashStorage,
                 children: ChildFollowing, breaking: Breaking) -> None:
        self._services, self._lifecycle, self._crashes, self._children = services, lifecycle, crashes, children
        self._breaking = breaking

    def process_gone(self, live: LiveSession, handle: Any, reason: str) -> None:
        self._services.spawn(self._lifecycle.process_gone(live, handle, reason))

    def crashed(self, live: LiveSession, pid: int, report: CrashReport, stack: bytes) -> None:
        self._services.spawn(self._crashes.store(live, pid, report, stack))

    def paused(self, live: LiveSession, pid: int, report: PauseReport, stack: bytes) -> None:
        self._services.spawn(self._breaking.on_paused(live, pid, report, stack))

    def python_paused(self, live: LiveSession, pid: int, report: dict[str, Any]) -> None:
        self._services.spawn(record_python_pause(self._services, live, pid, report))

    def child_added(self, live: LiveSession, handle: Any, origin: str, parent: int, path: str) -> None:
        self._services.spawn(self._children.adopt(live, handle, origin, parent, path))


class SessionManager:
    def __init__(self, services: Services) -> None:
        self.services = services
        self.paths = services.paths
        self.settings = SettingsSource(services.paths)
        self.sessions = LiveSessions(services)
        self.hooking = Hooking(services)
        self.lifecycle = Lifecycle(services, self.sessions)
        self.breaking = Breaking(services, self.sessions)  # debug_breakpoint, debug_logpoint, debug_continue
        self.writes = SessionWrites(services, self.sessions)  # debug_write
        self.reads = SessionReads(services, self.sessions)
        self.tracing = TraceRequests(services, self.sessions, self.hooking, self.reads, self.breaking)  # debug_trace
        self.children = ChildFollowing(services, self.hooking, self.tracing.resolve_watch_specs)
        self.launching = Launching(services, self.sessions, _Events(services, self.lifecycle, CrashStorage(services),
                                                                    self.children, self.breaking))
        self.tests = TestRuns(services.paths.home, services.writer.call, services.reader.run, self._attach_test,
                              getattr(services.launcher, "reaper", None))  # a test's fake launcher has none
        self._maintenance: asyncio.Task[None] | None = None

    @classmethod
    def create(cls, paths: StrobePaths) -> SessionManager:
        """The daemon's manager, with the real Frida worker, launcher, store and agent."""
        return cls(Services(paths, Writer(paths.database), Reader(paths.database), FridaWorker(), Launcher(),
                            IngestWorker(), AgentCache(paths.cache_dir), ImageLoader(paths.cache_dir)))

    async def start(self) -> None:
        self.services.writer.start()
        now = now_ms()
        orphans = await self.services.write(lambda c: store_sessions.close_orphaned_sessions(c, now))
        if orphans:
            log.info("sessions left running by a previous daemon marked stopped: %s", orphans)
        await self.tests.start()
        await self.maintain()
        self._maintenance = asyncio.create_task(self._maintain_periodically(), name="store-maintenance")

    async def maintain(self) -> list[retention.Purged]:
        """Purge ended sessions past retention or over storage.maxBytes (with their debug_read dumps and the test
        run files of the runs they traced), then shrink the file."""
        max_bytes = self.settings.for_project().storage_max_bytes
        now = now_ms()
        purged: list[retention.Purged] = []
        for expired in await self.services.read(lambda c: retention.expired(c, now)):
            await self._purge(expired)
            purged.append(expired)
        while True:
            over: retention.Purged | None = await self.services.read(lambda c: retention.next_over_cap(c, max_bytes))
            if over is None:
                return purged
            await self._purge(over)
            purged.append(over)

    async def _purge(self, gone: retention.Purged) -> None:
        log.info("session %s purged (%s)", gone.id, gone.why)
        await self._delete(gone.id, gone.key)

    async def _shrink(self) -> None:
        try:
            released = await asyncio.to_thread(retention.shrink, self.paths.database)
        except sqlite3.Error as exc:
            log.warning("store: could not give free space back to the disk: %s", exc)
        else:
            log.info("store: %d MiB given back to the disk", released >> 20)

    async def _maintain_periodically(self) -> None:
        while True:
            await asyncio.sleep(MAINTENANCE_INTERVAL_S)
            try:
                await self.maintain()
            except Exception:
                log.exception("store maintenance failed; trying again in %.0f s", MAINTENANCE_INTERVAL_S)

    async def close(self) -> None:
        """Daemon shutdown: every process killed, every session kept (stopped), Frida and the store released."""
        if self._maintenance is not None:
            self._maintenance.cancel()
        await self.tests.close()
        services = self.services
        for live in self.sessions.all():
            if live.attached:  # not Strobe's to end: let go of it
                await self._detach(live)
            else:
                await self.lifecycle.kill_all(live)
        await asyncio.gather(*(self._settle_for_shutdown(live) for live in self.sessions.all()))
        await services.worker.run(services.launcher.close)
        services.worker.close()
        services.ingest.close()
        services.writer.close()
        services.reader.close()

    async def _settle_for_shutdown(self, live: LiveSession) -> None:
        """Every session waits STOP_TIMEOUT_S at most for its end, all at once (one wait, not one per session)."""
        try:
            await asyncio.wait_for(live.finished.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            await self.lifecycle.finish(live, SessionStatus.STOPPED)
        await self.services.write(functools.partial(_retain, key=live.record.key, ended=now_ms()))

    # ---- launch ----------------------------------------------------------------------------------

    async def launch(self, command: ResolvedCommand, project_root: str, env: dict[str, str],
                     settings: Settings, client: object = DEFAULT_CLIENT, stdin: StdinSource | None = None) -> Launched:
        pending, staged = self.tracing.pending_patterns(client), self.breaking.staged(client)
        apply_pending = functools.partial(self.tracing.apply_pending, pending, staged)
        live, warnings = await self.launching.launch(command, project_root, env, settings, apply_pending, stdin)
        return Launched(live.record.id, live.pid, len(live.root.hooked), warnings)

    async def attach(self, pid: int, project_root: str, settings: Settings, client: object = DEFAULT_CLIENT
                     ) -> Launched:
        """debug_launch {pid}: a session on a process Strobe did not start, with the client's staged patterns and
        breakpoints; debug_stop detaches from it."""
        pending, staged = self.tracing.pending_patterns(client), self.breaking.staged(client)
        reaper = getattr(getattr(self.services.launcher, "reaper", None), "pid", None)
        own = {os.getpid(), *([reaper] if reaper is not None else [])}
        live, warnings = await self.launching.attach_running(
            pid, project_root, settings, functools.partial(self.tracing.apply_pending, pending, staged), own)
        return Launched(live.record.id, live.pid, len(live.root.hooked), warnings)

    async def _detach(self, live: LiveSession) -> None:
        """Leave an attached session's processes running unharmed: breakpoints disarmed and paused threads released
        first (a thread still waiting in the agent when it unloads is not left to chance), then every agent unloads."""
        for logpoints in (False, True):
            ids = [bid for bid, bp in live.breakpoints.breakpoints.items() if (bp.log is not None) == logpoints]
            if ids:
                try:
                    async with live.trace_lock:
                        await self.breaking.update(live, [], ids, logpoints)
                except Exception as exc:  # the process is going away: nothing is left armed
                    log.info("session %s: breakpoints not disarmed before detaching (%s)", live.record.id, exc)
        await self.breaking.release_all(live)
        await self.lifecycle.detach(live)

    async def _attach_test(self, pid: int, program: str, project_root: str, patterns: list[str],
                           watches: Sequence[WatchSpec], tracer_dir: Path | None) -> tuple[str, SessionTrace]:
        settings = self.settings.for_project(project_root)
        live = await self.launching.attach_gated(pid, program, project_root, patterns, settings, tracer_dir)
        live.pending_watches = list(watches)
        return live.record.id, live.trace

    # ---- stop / list / delete --------------------------------------------------------------------

    async def get_record(self, session_id: str) -> SessionRecord:
        return await self.sessions.record(session_id)

    @property
    def out_of_space(self) -> bool:
        """The store's last write failed for lack of disk space."""
        return self.services.writer.out_of_space

    async def stop(self, session_id: str, retain: bool, kill: bool = False) -> tuple[int, SessionRecord]:
        """Kill the processes if still running (a session attached to a running process: detach and leave them
        running, unless `kill`); keep (retain) or delete the data. Returns the events it had and the session's
        record as it ended."""
        live = self.sessions.get(session_id)
        if live is not None and live.attached and not kill:
            await self._detach(live)
        elif live is not None:
            await self.lifecycle.stop(live)
        record = await self.get_record(session_id)
        ended = now_ms()
        if retain:
            await self.services.write(lambda c: store_sessions.retain_session(c, record.key, ended))
            events = await self.services.read(lambda c: store_sessions.count_events(c, record.key))
        else:
            events = await self._delete(session_id, record.key)
        return events, record

    async def list_sessions(self) -> list[SessionRecord]:
        records = await self.services.read(store_sessions.list_sessions)
        return [self.sessions.with_unsaved_losses(record) for record in records]

    async def session_processes(self, keys: list[int]) -> dict[int, list[ProcessRecord]]:
        return await self.services.read(lambda c: store_sessions.session_processes(c, keys))

    async def delete(self, session_id: str) -> int:
        if session_id in self.sessions:
            raise ValidationError(
                f"Session '{session_id}' is still running. Call debug_stop({{sessionId: '{session_id}'}}) "
                "instead: it stops the process and deletes the data unless retain is true."
            )
        record = await self.get_record(session_id)
        return await self._delete(session_id, record.key)

    async def _delete(self, session_id: str, key: int) -> int:
        """A session's events, the buffers debug_read wrote for it and the files of the test run it traced go
        together; the space they took goes back to the disk."""
        deleted = await asyncio.wrap_future(self.services.writer.delete_session(key))
        shutil.rmtree(self.paths.reads_dir / session_id, ignore_errors=True)
        self.sessions.forget_ended(session_id)
        self.tests.forget_session(session_id)
        await self._shrink()
        return deleted

    # ---- query -----------------------------------------------------------------------------------

    async def catch_up(self, session_id: str) -> None:
        """Make every event a live traced process has recorded so far queryable: the agents send what is in
        their rings, the ingest stores it, the writer commits it. Best effort, bounded by FLUSH_TIMEOUT_S."""
        live = self.sessions.get(session_id)
        if live is None or not live.processes:
            return
        if live.trace.slot_of:
            for process in live.live_processes():
                if not process.hooked and not process.is_root:
                    continue
                try:
                    await process.image.runtime.flush(self.services.worker.run, process.handle, FLUSH_TIMEOUT_S)
                except FridaAttachFailed as exc:
                    log.info("session %s: no flush of pid %d (%s); querying what is stored", session_id,
                             process.pid, exc)
        elif not live.polls.polls:
            return
        await self.services.ingest.barrier()  # trace batches and poll snapshots received so far
        await self.services.write(lambda c: None)

    async def query(
        self, record: SessionRecord, flt: EventFilter, *, limit: int, offset: int, verbose: bool
    ) -> QueryPage:
        """One page of a session's timeline. Reads only: a query never changes what is stored."""
        live = self.sessions.get(record.id)
        if live is not None and verbose and live.types is not None:
            await live.types.wait(PLAN_WAIT_S)
        return await self.services.read(lambda c: query_events(c, record.key, flt, limit=limit, offset=offset))

    def sampled_functions(self, session_id: str) -> list[str]:
        live = self.sessions.get(session_id)
        return live.sampled_function_names() if live is not None else []

    def polls(self, session_id: str) -> list[PollState]:
        return self.sessions.polls(session_id)

    def tracer_notes(self, session_id: str) -> list[str]:
        return self.sessions.tracer_notes(session_id)

    async def send_input(self, session_id: str, data: bytes, close: bool) -> StdinFeed:
        """Write to a running session's stdin (and close it with `close`); returns its feed to report on."""
        live = await self.sessions.require_live(session_id, "sending input")
        if live.stdin is None:
            raise ValidationError(
                f"Session '{session_id}' was launched without stdin, stdinFile or keepStdinOpen: its stdin is Frida's "
                "pipe, which can be written but never closed, and Strobe does not write to it. Stop it and launch it "
                "again with keepStdinOpen: true to send input with debug_input.")
        live.stdin.send(data, close)
        return live.stdin

    def is_running(self, session_id: str) -> bool:
        return session_id in self.sessions

    def is_attached(self, session_id: str) -> bool:
        """A running session on a process Strobe attached to (debug_launch {pid}) rather than started."""
        live = self.sessions.get(session_id)
        return live is not None and live.attached

    def live_count(self) -> int:
        return len(self.sessions)

    # ---- debug_read --------------------------------------------------------------------------------

    async def require_live(self, session_id: str, doing: str) -> LiveSession:
        return await self.sessions.require_live(session_id, doing)

    async def resolve_variables(self, session_id: str, expressions: list[str], depth: int
                                ) -> dict[str, PreparedRead]:
        return await self.reads.resolve_variables(session_id, expressions, depth)

    async def resolve_targets(self, session_id: str, refs: list[VariableRef], depth: int
                              ) -> dict[VariableRef, PreparedRead]:
        return await self.reads.resolve_targets(session_id, refs, depth)

    async def read_memory(self, session_id: str, targets: list[PreparedRead]) -> list[dict[str, Any]]:
        return await self.reads.read_memory(session_id, targets)

    async def start_poll(self, session_id: str, targets: list[PreparedRead], interval_ms: int, duration_ms: int,
                         max_polls: int) -> tuple[int, int]:
        return await self.reads.start_poll(session_id, targets, interval_ms, duration_ms, max_polls)
