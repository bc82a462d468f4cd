"""SessionManager: the sessions this daemon runs, from launch to stop, and queries over their timelines.

Live sessions are in memory (their Frida handles, exit code, stream state); everything a caller can
ask about is in the store, written only through the Writer so that status changes land after the
output that preceded them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from strobe.daemon.session_ids import session_base_id
from strobe.errors import SessionExists, SessionNotFound, ValidationError
from strobe.instrument.agent_build import AgentCache
from strobe.instrument.command import ResolvedCommand
from strobe.instrument.launcher import Launcher, ProcessHandle
from strobe.instrument.worker import FridaWorker
from strobe.paths import StrobePaths
from strobe.settings import Settings
from strobe.store import sessions as store_sessions
from strobe.store.query import EventFilter, QueryPage, query_events
from strobe.store.reader import Reader
from strobe.store.schema import EventKind
from strobe.store.sessions import SessionRecord, SessionStatus
from strobe.store.writer import Writer

log = logging.getLogger(__name__)

STREAM_DRAIN_TIMEOUT_S = 5.0
STOP_TIMEOUT_S = 5.0
RETENTION_MS = 7 * 24 * 3600 * 1000


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class LiveSession:
    """A session whose process this daemon started and has not yet seen end.

    Implements the launcher's ProcessObserver; its callbacks run on Frida's threads.
    """

    record: SessionRecord
    writer: Writer
    loop: asyncio.AbstractEventLoop
    on_gone: Any  # Callable[[LiveSession, str], None], called on the event loop
    start_ns: int = 0
    handle: ProcessHandle | None = None
    exit_code: int | None = None
    stopping: bool = False
    streams_closed: threading.Event = field(default_factory=threading.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    _closed_fds: set[int] = field(default_factory=set)

    @property
    def pid(self) -> int:
        return self.record.pid

    def on_output(self, pid: int, fd: int, data: bytes) -> None:
        kind = EventKind.STDOUT if fd == 1 else EventKind.STDERR
        self.writer.submit_output(self.record.key, pid, kind, data, time.monotonic_ns() - self.start_ns)
        if not data:
            self._closed_fds.add(fd)
            if len(self._closed_fds) >= 2:
                self.streams_closed.set()

    def on_exit_code(self, pid: int, code: int) -> None:
        self.exit_code = code

    def on_detached(self, pid: int, reason: str) -> None:
        self.loop.call_soon_threadsafe(self.on_gone, self, reason)


class SessionManager:
    def __init__(self, paths: StrobePaths) -> None:
        self.paths = paths
        self.writer = Writer(paths.database)
        self.reader = Reader(paths.database)
        self.worker = FridaWorker()
        self.launcher = Launcher()
        self.agent = AgentCache(paths.cache_dir)
        self._live: dict[str, LiveSession] = {}
        self._launch_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self.writer.start()
        now = _now_ms()
        orphans = await self._write(lambda c: store_sessions.close_orphaned_sessions(c, now))
        purged = await self._write(lambda c: store_sessions.purge_retained_before(c, now - RETENTION_MS))
        if orphans:
            log.info("sessions left running by a previous daemon marked stopped: %s", orphans)
        if purged:
            log.info("sessions older than 7 days purged: %s", purged)

    async def close(self) -> None:
        for live in list(self._live.values()):
            live.stopping = True
            await self.worker.run(functools.partial(self.launcher.kill, live.pid))
        for live in list(self._live.values()):
            try:
                await asyncio.wait_for(live.finished.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                await self._finish(live, SessionStatus.STOPPED)
            await self._write(lambda c, key=live.record.key: store_sessions.retain_session(c, key, _now_ms()))
        self.worker.close()
        self.writer.close()
        self.reader.close()

    async def _write(self, fn: Any) -> Any:
        return await asyncio.wrap_future(self.writer.call(fn))

    # ---- launch ----------------------------------------------------------------------------------

    async def launch(
        self, command: ResolvedCommand, project_root: str, env: dict[str, str], settings: Settings
    ) -> LiveSession:
        async with self._launch_lock:
            for live in self._live.values():
                if live.record.binary_path == command.binary_path:
                    raise SessionExists(live.record.id, command.binary_path)
            agent_js = await self.worker.run(self.agent.get)
            loop = asyncio.get_running_loop()
            placeholder = SessionRecord(0, "", command.binary_path, project_root, 0, 0, None,
                                        SessionStatus.RUNNING, None, False, 0)
            live = LiveSession(record=placeholder, writer=self.writer, loop=loop, on_gone=self._on_gone)
            live.handle = await self.worker.run(
                lambda: self.launcher.spawn(command.argv, command.cwd, env, agent_js, live)
            )
            pid = live.handle.pid
            base_id = session_base_id(command.binary_path, datetime.now())
            try:
                live.record = await self._write(
                    lambda c: store_sessions.insert_session(
                        c, base_id, command.binary_path, project_root, pid, _now_ms()
                    )
                )
            except BaseException:
                await self.worker.run(lambda: self.launcher.kill(pid))
                raise
            self.writer.set_limit(live.record.key, settings.max_events_per_session)
            self._live[live.record.id] = live
            live.start_ns = time.monotonic_ns()
            try:
                await self.worker.run(lambda: self.launcher.resume(pid))
            except BaseException:
                await self.worker.run(lambda: self.launcher.kill(pid))
                raise
            return live

    def _on_gone(self, live: LiveSession, reason: str) -> None:
        task = asyncio.get_running_loop().create_task(self._settle(live, reason))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _settle(self, live: LiveSession, reason: str) -> None:
        """The process is gone: let its last output drain, then record how it ended."""
        if not await asyncio.to_thread(live.streams_closed.wait, STREAM_DRAIN_TIMEOUT_S):
            log.warning(
                "session %s: stdout/stderr still open %.0fs after the process ended (a child holds them?)",
                live.record.id, STREAM_DRAIN_TIMEOUT_S,
            )
        log.info("session %s: process %d gone (%s), exit code %s", live.record.id, live.pid, reason, live.exit_code)
        await self._finish(live, SessionStatus.STOPPED if live.stopping else SessionStatus.EXITED)

    async def _finish(self, live: LiveSession, status: SessionStatus) -> None:
        if live.finished.is_set():
            return
        key, pid, code, ended = live.record.key, live.pid, live.exit_code, _now_ms()
        self._live.pop(live.record.id, None)
        self.launcher.forget(pid)
        await self._write(lambda c: store_sessions.finish_process(c, key, pid, status, code, ended))
        live.finished.set()

    # ---- stop / list / delete --------------------------------------------------------------------

    async def get_record(self, session_id: str) -> SessionRecord:
        record = await self.reader.run(lambda c: store_sessions.get_session(c, session_id))
        if record is None:
            raise SessionNotFound(session_id)
        return record

    async def stop(self, session_id: str, retain: bool) -> tuple[int, int]:
        """Kill the process if it still runs; keep (retain) or delete the data. Returns (events, trimmed)."""
        live = self._live.get(session_id)
        if live is not None:
            live.stopping = True
            await self.worker.run(lambda: self.launcher.kill(live.pid))
            try:
                await asyncio.wait_for(live.finished.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                log.warning("session %s: no detach within %.0fs of kill; closing it anyway", session_id,
                            STOP_TIMEOUT_S)
                await self._finish(live, SessionStatus.STOPPED)
        record = await self.get_record(session_id)
        ended = _now_ms()
        if retain:
            await self._write(lambda c: store_sessions.retain_session(c, record.key, ended))
            events = await self.reader.run(lambda c: store_sessions.count_events(c, record.key))
        else:
            events = await self._write(lambda c: store_sessions.delete_session(c, record.key))
            self.writer.forget_session(record.key)
        return events, record.trimmed

    async def list_sessions(self) -> list[SessionRecord]:
        return await self.reader.run(store_sessions.list_sessions)

    async def delete(self, session_id: str) -> int:
        if session_id in self._live:
            raise ValidationError(
                f"Session '{session_id}' is still running. Call debug_stop({{sessionId: '{session_id}'}}) "
                "instead: it stops the process and deletes the data unless retain is true."
            )
        record = await self.get_record(session_id)
        deleted = await self._write(lambda c: store_sessions.delete_session(c, record.key))
        self.writer.forget_session(record.key)
        return int(deleted)

    # ---- query -----------------------------------------------------------------------------------

    async def query(
        self, record: SessionRecord, flt: EventFilter, *, limit: int, offset: int, verbose: bool, settings: Settings
    ) -> QueryPage:
        if record.id in self._live:
            self.writer.set_limit(record.key, settings.max_events_per_session)
        return await self.reader.run(
            lambda c: query_events(c, record.key, record.id, flt, limit=limit, offset=offset, verbose=verbose)
        )

    def is_running(self, session_id: str) -> bool:
        return session_id in self._live

    def live_count(self) -> int:
        return len(self._live)
