"""SessionManager: the sessions this daemon runs, from launch to stop, and queries over their timelines.

Live sessions are in memory (their Frida handles, exit code, stream state); everything a caller can
ask about is in the store, written only through the Writer so that status changes land after the
output that preceded them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import shutil
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from strobe.daemon.argtypes import ArgumentTypes
from strobe.daemon.children import ChildFollowing, ChildProcess, ProcessImage, load_image
from strobe.daemon.crashes import crash_row, describe_crash
from strobe.daemon.crashes import thread_name as crash_thread_name
from strobe.daemon.ingest import IngestWorker, TraceIngest
from strobe.daemon.memory import (
    PreparedRead,
    SessionPolls,
    prepare_raw,
    raw_size,
    snapshot_row,
)
from strobe.daemon.reads import SessionReads
from strobe.daemon.session_ids import session_base_id
from strobe.daemon.symbols import SessionSymbols, load_session_symbols, preload_main_index
from strobe.daemon.testruns import TestRuns
from strobe.daemon.tracing import HookPlan, SessionTrace, parse_patterns, plan_hooks
from strobe.daemon.watches import (
    Watch,
    WatchDecoder,
    WatchSpec,
    agent_watches,
    assign,
    plan_watches,
    scope_warnings,
)
from strobe.errors import FridaAttachFailed, ProcessExited, SessionExists, SessionNotFound, ValidationError
from strobe.instrument.agent_build import AgentCache
from strobe.instrument.command import ResolvedCommand
from strobe.instrument.launcher import AgentTimeout, Launcher, ProcessGone, ProcessHandle
from strobe.instrument.protocol import (
    CrashReport,
    PollComplete,
    SamplingStateChange,
    TraceBatch,
    VariableSnapshot,
)
from strobe.instrument.worker import FridaWorker
from strobe.paths import StrobePaths
from strobe.settings import Settings, load_settings
from strobe.store import functions as store_functions
from strobe.store import sessions as store_sessions
from strobe.store.query import EventFilter, QueryPage, query_events
from strobe.store.reader import Reader
from strobe.store.recent import last_calls
from strobe.store.schema import EventKind
from strobe.store.sessions import SessionRecord, SessionStatus
from strobe.store.writer import Writer
from strobe.symbols.addresses import locate

log = logging.getLogger(__name__)

STREAM_DRAIN_TIMEOUT_S = 5.0
STOP_TIMEOUT_S = 5.0
PLAN_WAIT_S = 5.0  # how long a verbose query waits for argument types being worked out (then: raw registers)
FLUSH_TIMEOUT_S = 2.0
LAST_EVENTS = 20  # function events of the crashing thread listed in a crash event
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
    ingest_worker: IngestWorker
    loop: asyncio.AbstractEventLoop
    on_gone: Any  # Callable[[LiveSession, str], None], called on the event loop
    on_crashed: Any  # Callable[[LiveSession, int, CrashReport, bytes], None], called on the event loop
    on_child_added: Any  # Callable[[LiveSession, ProcessHandle, str, int, str], None], called on the event loop
    start_ns: int = 0
    handle: ProcessHandle | None = None
    trace: SessionTrace | None = None
    symbols: asyncio.Future[SessionSymbols] | None = None
    trace_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    exit_code: int | None = None
    crash_signal: str | None = None  # a crash report was stored: the process is dying of this signal
    stopping: bool = False
    streams_closed: threading.Event = field(default_factory=threading.Event)
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    polls: SessionPolls = field(default_factory=SessionPolls)
    watches: list[Watch] = field(default_factory=list)
    types: ArgumentTypes | None = None
    settings: Settings | None = None
    image: ProcessImage | None = None  # what the launched process runs (a new one after it exec()s)
    children: dict[int, ChildProcess] = field(default_factory=dict)  # followed processes by pid
    owns_output: bool = True  # False when attached to a process whose pipes another reader has (test runs)
    pending_watches: list[WatchSpec] = field(default_factory=list)  # set once the launched process exec()s
    root_ended: bool = False
    settling: bool = False
    _closed_fds: set[int] = field(default_factory=set)

    @property
    def pid(self) -> int:
        return self.record.pid

    @property
    def serialization_depth(self) -> int:
        return self.types.depth if self.types is not None else 3

    def on_output(self, pid: int, fd: int, data: bytes) -> None:
        kind = EventKind.STDOUT if fd == 1 else EventKind.STDERR
        self.writer.submit_output(self.record.key, pid, kind, data, time.monotonic_ns() - self.start_ns)
        if not data:
            self._closed_fds.add(fd)
            if len(self._closed_fds) >= 2:
                self.streams_closed.set()

    def handle_of(self, pid: int) -> ProcessHandle | None:
        child = self.children.get(pid)
        return child.handle if child is not None else self.handle if pid == self.pid else None

    def live_children(self) -> list[ChildProcess]:
        return [child for child in self.children.values() if not child.ended]

    def on_exit_code(self, pid: int, code: int) -> None:
        child = self.children.get(pid)
        if child is not None:
            child.exit_code = code
        elif pid == self.pid:
            self.exit_code = code

    def on_detached(self, handle: ProcessHandle, reason: str) -> None:
        self.loop.call_soon_threadsafe(self.on_gone, self, handle, reason)

    def on_child(self, handle: ProcessHandle, origin: str, parent_pid: int, path: str) -> None:
        self.loop.call_soon_threadsafe(self.on_child_added, self, handle, origin, parent_pid, path)

    def on_trace_batch(self, pid: int, batch: TraceBatch, data: bytes) -> None:
        trace = self.trace
        ingest = trace.ingest.peers.get(pid) if trace is not None else None
        if ingest is None:
            return
        queued = self.ingest_worker.submit(
            lambda: ingest.on_batch(data, batch.count, batch.dropped, batch.sampledOut, batch.threads,
                                          batch.firstSeq, batch.watchValues, batch.followValues),
            batch.count,
        )
        if not queued:
            log.warning("session %s: ingest queue full; %d trace records dropped", self.record.id, batch.count)
            self.ingest_worker.submit(lambda: ingest.refuse(batch.count))

    def on_sampling_change(self, pid: int, change: SamplingStateChange) -> None:
        if self.trace is not None and pid == self.pid:
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

    def on_crash(self, pid: int, report: CrashReport, stack: bytes) -> None:
        self.loop.call_soon_threadsafe(self.on_crashed, self, pid, report, stack)


class SessionManager(SessionReads):
    def __init__(self, paths: StrobePaths) -> None:
        self.paths = paths
        self.writer = Writer(paths.database)
        self.reader = Reader(paths.database)
        self.worker = FridaWorker()
        self.launcher = Launcher()
        self.ingest = IngestWorker()
        self.agent = AgentCache(paths.cache_dir)
        self.pending_patterns: list[str] = []
        self._live: dict[str, LiveSession] = {}
        self._launch_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._ended_polls: dict[str, list[dict[str, Any]]] = {}
        self.tests = TestRuns(paths.home, self.writer.call, self.reader.run, self._attach_test)
        self.following = ChildFollowing(self.worker, self._write, paths.cache_dir)

    async def start(self) -> None:
        self.writer.start()
        now = _now_ms()
        orphans = await self._write(lambda c: store_sessions.close_orphaned_sessions(c, now))
        purged = await self._write(lambda c: store_sessions.purge_retained_before(c, now - RETENTION_MS))
        if orphans:
            log.info("sessions left running by a previous daemon marked stopped: %s", orphans)
        if purged:
            log.info("sessions older than 7 days purged: %s", purged)
        await self.tests.start()

    async def close(self) -> None:
        await self.tests.close()
        for live in list(self._live.values()):
            await self._kill_all(live)
        for live in list(self._live.values()):
            try:
                await asyncio.wait_for(live.finished.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                await self._finish(live, SessionStatus.STOPPED)
            await self._write(lambda c, key=live.record.key: store_sessions.retain_session(c, key, _now_ms()))
        await self.worker.run(self.launcher.close)
        self.worker.close()
        self.ingest.close()
        self.writer.close()
        self.reader.close()

    async def _write(self, fn: Any) -> Any:
        return await asyncio.wrap_future(self.writer.call(fn))

    # ---- launch ----------------------------------------------------------------------------------

    async def launch(
        self, command: ResolvedCommand, project_root: str, env: dict[str, str], settings: Settings
    ) -> tuple[LiveSession, list[str]]:
        """Spawn, record, install pending patterns, resume. Returns the session and warnings."""
        async with self._launch_lock:
            for live in self._live.values():
                if live.record.binary_path == command.binary_path:
                    raise SessionExists(live.record.id, command.binary_path)
            agent_js = await self.worker.run(self.agent.get)
            loop = asyncio.get_running_loop()
            placeholder = SessionRecord(0, "", command.binary_path, project_root, 0, 0, None,
                                        SessionStatus.RUNNING, None, False, 0)
            live = LiveSession(
                record=placeholder, writer=self.writer, ingest_worker=self.ingest, loop=loop, on_gone=self._on_gone,
                on_crashed=self._on_crashed, on_child_added=self._on_child_added, settings=settings,
            )
            # The main binary's index loads (or builds) while the process is spawned.
            main_index = asyncio.ensure_future(
                asyncio.to_thread(preload_main_index, command.binary_path, self.paths.cache_dir)
            )
            try:
                live.handle = await self.worker.run(
                    lambda: self.launcher.spawn(command.argv, command.cwd, env, agent_js, live)
                )
            except BaseException:
                main_index.add_done_callback(lambda f: f.exception())  # built in vain; nothing to report
                raise
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
            live.trace = SessionTrace(TraceIngest(self.writer, live.record.key, pid, live.start_ns))
            live.types = self._argument_types(live, live.trace.ingest)
            modules = live.handle.modules
            cache_dir = self.paths.cache_dir

            async def symbols() -> SessionSymbols:
                return await asyncio.to_thread(
                    load_session_symbols, command.binary_path, modules, cache_dir, await main_index
                )

            live.symbols = asyncio.ensure_future(symbols())
            live.image = ProcessImage(command.binary_path, live.symbols)
            warnings: list[str] = []
            try:
                if self.pending_patterns:
                    warnings = await self._apply_pending(live, settings)
                await self.worker.run(lambda: self.launcher.resume(pid))
            except BaseException:
                await self.worker.run(lambda: self.launcher.kill(pid))
                raise
            return live, warnings

    async def _attach_test(
        self, pid: int, program: str, project_root: str, patterns: list[str], watches: Sequence[WatchSpec]
    ) -> str:
        settings = load_settings(self.paths, project_root)
        live = await self.attach_gated(pid, program, project_root, patterns, settings)
        live.pending_watches = list(watches)
        return live.record.id

    async def attach_gated(
        self, pid: int, program: str, project_root: str, patterns: list[str], settings: Settings
    ) -> LiveSession:
        """A session on a process that waits to exec() its real program (a traced test run, see daemon/testruns.py):
        attached with child gating, the patterns are hooked in the program it execs and in its children."""
        parse_patterns(patterns, project_root)
        agent_js = await self.worker.run(self.agent.get)
        loop = asyncio.get_running_loop()
        placeholder = SessionRecord(0, "", program, project_root, pid, 0, None, SessionStatus.RUNNING, None, False, 0)
        live = LiveSession(
            record=placeholder, writer=self.writer, ingest_worker=self.ingest, loop=loop, on_gone=self._on_gone,
            on_crashed=self._on_crashed, on_child_added=self._on_child_added, settings=settings, owns_output=False,
        )
        live.handle = await self.worker.run(lambda: self.launcher.attach(pid, agent_js, live))
        base_id = session_base_id(program, datetime.now())
        try:
            live.record = await self._write(
                lambda c: store_sessions.insert_session(c, base_id, program, project_root, pid, _now_ms())
            )
        except BaseException:
            await self.worker.run(lambda: self.launcher.kill(pid))
            raise
        self.writer.set_limit(live.record.key, settings.max_events_per_session)
        self._live[live.record.id] = live
        live.start_ns = time.monotonic_ns()
        live.trace = SessionTrace(TraceIngest(self.writer, live.record.key, pid, live.start_ns))
        live.trace.patterns = list(dict.fromkeys(patterns))  # hooked once it execs its program
        live.types = self._argument_types(live, live.trace.ingest)
        live.image = load_image(live.handle, os.readlink(f"/proc/{pid}/exe"), self.paths.cache_dir)
        live.symbols = live.image.symbols
        return live

    def _argument_types(self, live: LiveSession, ingest: TraceIngest) -> ArgumentTypes:
        async def send_follow(funcs: list[dict[str, Any]]) -> None:
            """To every process: plans are by function slot, which only means something where it is hooked."""
            handles = [live.handle] + [child.handle for child in live.live_children()]
            for handle in handles:
                if handle is None:
                    continue
                try:
                    await self.worker.run(functools.partial(handle.set_follow, funcs))
                except (ProcessGone, AgentTimeout, FridaAttachFailed) as exc:  # pointers just stay addresses
                    log.info("session %s: argument plans not sent to pid %d (%s)", live.record.id, handle.pid, exc)

        def spawn(work: Any) -> asyncio.Task[None]:
            task = asyncio.get_running_loop().create_task(work)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return task

        return ArgumentTypes(ingest, self._write, self.ingest.submit, send_follow, spawn)

    async def _apply_pending(self, live: LiveSession, settings: Settings) -> list[str]:
        """Hook the staged patterns before the process runs its first instruction."""
        assert live.symbols is not None
        symbols = await live.symbols
        if not symbols.main_has_dwarf:
            return [f"Pending patterns were not applied: {symbols.main_binary} has no debug info (build with -g)."]
        plan = plan_hooks([], self.pending_patterns, [], symbols.indexes, live.record.project_root)
        return plan.warnings + await self._apply_plan(live, plan, settings)

    def _spawn_task(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_gone(self, live: LiveSession, handle: ProcessHandle, reason: str) -> None:
        self._spawn_task(self._process_gone(live, handle, reason))

    async def _process_gone(self, live: LiveSession, handle: ProcessHandle, reason: str) -> None:
        """Frida let go of one process of the session. The session ends when the launched process and every
        followed child have; until then each process's row records how it ended."""
        if reason == "process-replaced" or live.finished.is_set():
            return  # exec(): the new image arrives through on_child, same pid
        pid = handle.pid
        child = live.children.get(pid)
        if child is not None:
            if child.handle is not handle or child.ended:
                return
            child.ended = True
            await self.ingest.barrier()
            status = child.end_status(live.stopping)
            signal = child.crash_signal if status is SessionStatus.CRASHED else None
            key, code, ended = live.record.key, child.exit_code, _now_ms()
            log.info("session %s: child %d gone (%s), %s %s", live.record.id, pid, reason, status.value,
                     signal or code)
            await self._write(lambda c: store_sessions.finish_process(c, key, pid, status, code, ended, signal))
            self.launcher.forget(pid)
        elif pid == live.pid and handle is live.handle:
            live.root_ended = True
            if live.live_children():  # its row says how it ended now; the session lives on with its children
                log.info("session %s: process %d gone (%s) with %d followed children still running",
                         live.record.id, pid, reason, len(live.live_children()))
                await self.ingest.barrier()
                status = self._root_status(live)
                key, code, ended, signal = live.record.key, live.exit_code, _now_ms(), live.crash_signal
                await self._write(lambda c: store_sessions.finish_process(
                    c, key, pid, status, code, ended, signal if status is SessionStatus.CRASHED else None))
        else:
            return
        if live.root_ended and not live.live_children() and not live.settling:
            live.settling = True
            await self._settle(live, reason)

    @staticmethod
    def _root_status(live: LiveSession) -> SessionStatus:
        if live.stopping:
            return SessionStatus.STOPPED
        if live.crash_signal is not None and live.exit_code is None:
            return SessionStatus.CRASHED
        return SessionStatus.EXITED

    async def _settle(self, live: LiveSession, reason: str) -> None:
        """Every process is gone: let the last output drain, then record how the session ended."""
        if live.owns_output and not await asyncio.to_thread(live.streams_closed.wait, STREAM_DRAIN_TIMEOUT_S):
            log.warning(
                "session %s: stdout/stderr still open %.0fs after the process ended (a child holds them?)",
                live.record.id, STREAM_DRAIN_TIMEOUT_S,
            )
        log.info("session %s: process %d gone (%s), exit code %s", live.record.id, live.pid, reason, live.exit_code)
        await self.ingest.barrier()  # the last trace batches are stored before the session reads as ended
        live.polls.process_gone()
        if not live.stopping and live.types is not None:  # ended by itself: its events stay queryable, with types
            live.types.following = False
            await live.types.wait(0)
        await self._finish(live, self._root_status(live))

    def _on_crashed(self, live: LiveSession, pid: int, report: CrashReport, stack: bytes) -> None:
        self._spawn_task(self._store_crash(live, pid, report, stack))

    async def _store_crash(self, live: LiveSession, pid: int, report: CrashReport, stack: bytes) -> None:
        """Store a crash event (after every trace record sent before it), then let the crashing thread go on."""
        try:
            await self.ingest.barrier()
            await self._write(lambda c: None)  # the calls leading up to the crash are committed
            name = crash_thread_name(pid, report.tid)
            event = await asyncio.to_thread(describe_crash, report, stack, pid, locate, name)
            ts = report.sec * 1_000_000_000 + report.nsec - live.start_ns
            key, sid = live.record.key, live.record.id
            event["lastEvents"] = await self.reader.run(
                lambda c: last_calls(c, key, sid, pid, report.tid, ts, LAST_EVENTS)
            )
            row = crash_row(key, pid, report.tid, ts, event)
            self.writer.submit_rows([row])
            await self._write(lambda c: None)  # committed before the process may die
            child = live.children.get(pid)
            if child is not None:
                child.crash_signal = report.signal
            else:
                live.crash_signal = report.signal
            log.info("session %s: pid %d: %s", sid, pid, event["text"])
        except Exception:
            log.exception("session %s: the crash report could not be stored", live.record.id)
        finally:
            handle = live.handle_of(pid)
            if handle is not None:
                await self.worker.run(handle.ack_crash)

    # ---- followed children ---------------------------------------------------------------------

    def _on_child_added(self, live: LiveSession, handle: ProcessHandle, origin: str, parent: int, path: str) -> None:
        self._spawn_task(self._adopt(live, handle, origin, parent, path))

    async def _adopt(self, live: LiveSession, handle: ProcessHandle, origin: str, parent: int, path: str) -> None:
        """Give a gated child (or a new exec() image) the session's hooks, then resume it — whatever happens."""
        pid = handle.pid
        try:
            if live.stopping or live.finished.is_set() or live.trace is None:
                await self.worker.run(functools.partial(self.launcher.kill, pid))
                return
            async with live.trace_lock:
                if origin == "exec" and pid == live.pid:
                    await self._rebind_root(live, handle, path)
                else:
                    child = await self.following.child_for(live, handle, origin, parent, path)
                    await self.following.sync(live, child, await self.following.desired_for(live, child))
        except (ProcessGone, AgentTimeout, ProcessExited) as exc:
            log.info("session %s: child %d went away while being followed (%s)", live.record.id, pid, exc)
        except Exception:
            log.exception("session %s: child %d could not be given its hooks", live.record.id, pid)
        finally:
            await self.worker.run(functools.partial(self.launcher.resume_quietly, pid))

    async def _rebind_root(self, live: LiveSession, handle: ProcessHandle, path: str) -> None:
        """The launched process exec()ed: the session now traces its new program (patterns matched again;
        watches, resolved against the old program's variables, are dropped)."""
        assert live.trace is not None
        image = load_image(handle, path, self.paths.cache_dir)
        live.handle, live.image, live.symbols = handle, image, image.symbols
        live.trace.hooked = {}
        live.trace.ingest = live.trace.ingest.sibling(live.pid)
        live.trace.ingest.watches = None
        if live.watches:
            log.info("session %s: watches dropped: the launched process exec()ed %s", live.record.id, path)
            live.watches = []
        key, pid = live.record.key, live.pid
        await self._write(lambda c: store_sessions.set_process_binary(c, key, pid, path))
        log.info("session %s: the launched process exec()ed %s", live.record.id, path)
        symbols = await image.symbols
        if symbols.main_has_dwarf and live.trace.patterns:
            plan = plan_hooks([], live.trace.patterns, [], symbols.indexes, live.record.project_root)
            assert live.settings is not None
            await self._apply_plan(live, plan, live.settings)
        if live.pending_watches:  # a traced test run's watches, for the program it has just become
            specs, live.pending_watches = live.pending_watches, []
            resolved = await self._resolve_watches(live.record.id, specs)
            watches, warnings = plan_watches([], specs, [], resolved, live.record.project_root)
            warnings += await self._apply_watches(live, watches)
            for warning in warnings:
                log.info("session %s: %s", live.record.id, warning)

    async def _finish(self, live: LiveSession, status: SessionStatus) -> None:
        if live.finished.is_set():
            return
        key, pid, code, ended = live.record.key, live.pid, live.exit_code, _now_ms()
        signal = live.crash_signal if status is SessionStatus.CRASHED else None
        self._live.pop(live.record.id, None)
        live.polls.process_gone()
        if live.polls.polls:
            self._ended_polls[live.record.id] = live.polls.describe()
        self.launcher.forget(pid)
        for child in live.children.values():
            self.launcher.forget(child.pid)
        await self._write(lambda c: store_sessions.finish_process(c, key, pid, status, code, ended, signal))
        live.finished.set()

    # ---- tracing ---------------------------------------------------------------------------------

    async def stage_patterns(self, add: list[str], remove: list[str], project_root: str | None) -> list[str]:
        """Pending mode: patterns for the next launch. Returns warnings."""
        parse_patterns(add, project_root)
        merged = [p for p in self.pending_patterns if p not in remove]
        merged += [p for p in add if p not in merged and p not in remove]
        warnings = [f"Pattern '{p}' was not staged; nothing to remove." for p in remove
                    if p not in self.pending_patterns]
        self.pending_patterns = merged
        return warnings

    async def trace(
        self, session_id: str, add: list[str], remove: list[str], settings: Settings,
        watch_add: Sequence[WatchSpec] = (), watch_remove: Sequence[str] = (),
    ) -> tuple[LiveSession, HookPlan | None, list[str]]:
        """Runtime mode: change the hooks and watches of a live process. Returns (session, plan, warnings)."""
        live = self._live.get(session_id)
        if live is None:
            record = await self.get_record(session_id)
            code = "unknown" if record.exit_code is None else record.exit_code
            raise ProcessExited(
                f"Target process of '{session_id}' has exited (code: {code}); its session is still queryable with "
                "debug_query but cannot be traced. Launch it again (debug_launch) to trace a new run."
            )
        assert live.trace is not None and live.symbols is not None
        live.settings = settings
        async with live.trace_lock:
            plan: HookPlan | None = None
            warnings: list[str] = []
            watches = live.watches
            if watch_add or watch_remove:
                resolved = await self._resolve_watches(session_id, watch_add)
                watches, warnings = plan_watches(live.watches, watch_add, watch_remove, resolved,
                                                 live.record.project_root)
            if add or remove:
                symbols = await live.symbols
                if add:
                    symbols.require_debug_info()
                plan = plan_hooks(live.trace.patterns, add, remove, symbols.indexes, live.record.project_root)
                warnings += plan.warnings
                if live.root_ended:  # only followed children are left: they take the patterns
                    live.trace.patterns = plan.patterns
                else:
                    warnings += await self._apply_plan(live, plan, settings)
            if watch_add or watch_remove or (plan is not None and live.watches):  # scopes follow the hooks
                warnings += await self._apply_watches(live, watches)
            if live.children and (add or remove or watch_add or watch_remove):
                await self.following.sync_all(live)
            return live, plan, warnings

    async def set_serialization_depth(self, session_id: str, depth: int) -> None:
        """How many struct levels watch values and followed pointer arguments show, from now on."""
        live = self._live.get(session_id)
        if live is not None and live.types is not None:
            async with live.trace_lock:
                await live.types.set_depth(depth)

    async def _resolve_watches(self, session_id: str, specs: Sequence[WatchSpec]) -> dict[str, PreparedRead]:
        resolved: dict[str, PreparedRead] = {}
        variables = [s.variable for s in specs if s.variable is not None]
        if variables:
            live = self._live[session_id]
            found = await self.resolve_variables(session_id, variables, live.serialization_depth)
            resolved.update({s.default_label: found[s.variable] for s in specs if s.variable is not None})
        for spec in specs:
            size = raw_size(spec.type) if spec.type is not None else None
            if spec.address is not None and spec.type is not None and size is not None:
                resolved[spec.default_label] = prepare_raw(spec.address, size, spec.type)
        return resolved

    async def _apply_watches(self, live: LiveSession, watches: list[Watch]) -> list[str]:
        """Send the watches (with their scopes resolved to the hooked functions) to the agent, and switch the
        ingest's decoder in step with the batches recorded under them."""
        trace, handle = live.trace, live.handle
        assert trace is not None and handle is not None
        hooked = [(slot, f.name, f.file) for slot, f in trace.hooked.items()]
        assignment = assign(watches)
        message = agent_watches(assignment, hooked)
        try:
            reply = await self.worker.run(lambda: handle.set_watches(message))
        except ProcessGone as exc:
            raise ProcessExited(
                f"The target process of '{live.record.id}' exited while its watches were being set ({exc}). "
                "The session is still queryable."
            ) from exc
        decoder = WatchDecoder(assignment) if watches else None
        ingest = trace.ingest

        def switch() -> None:
            ingest.watches = decoder

        self.ingest.submit(switch)
        by_id = assignment.by_id()
        failed = {e.id: e.error for e in reply.errors}
        live.watches = [w for wid, w in sorted(by_id.items()) if wid not in failed]
        warnings = [f"Watch '{by_id[wid].label}' was not added: {error}" for wid, error in failed.items()
                    if wid in by_id]
        return warnings + scope_warnings(live.watches, hooked)

    async def _apply_plan(self, live: LiveSession, plan: HookPlan, settings: Settings) -> list[str]:
        trace, handle = live.trace, live.handle
        assert trace is not None and handle is not None
        fresh = trace.new_functions(plan)
        if fresh:
            rows = [(f.name, f.info.raw, f.file, f.info.line, f.info.params) for f in fresh]
            keys = await self._write(lambda c: store_functions.insert_functions(c, rows))
            trace.assign_slots(fresh, keys)
        to_add, to_remove = trace.changes(plan)
        hot, every = settings.hot_calls_per_second, settings.sample_every
        warnings: list[str] = []
        try:
            if to_remove:
                await self.worker.run(lambda: handle.update_hooks("remove", [(s, 0) for s in to_remove], hot, every))
                for slot in to_remove:
                    trace.hooked.pop(slot, None)
            reply = await self.worker.run(
                lambda: handle.update_hooks("add", [(s, f.runtime_address) for s, f in to_add], hot, every)
            )
        except ProcessGone as exc:
            raise ProcessExited(
                f"The target process of '{live.record.id}' exited while its hooks were being changed ({exc}). "
                "The session is still queryable."
            ) from exc
        failed = {failure.id: failure.error for failure in reply.failed}
        for slot, function in to_add:
            if slot in failed:
                warnings.append(f"Could not hook {function.name}: {failed[slot]} (too small to hook, or not code).")
            else:
                trace.hooked[slot] = function
        trace.patterns = plan.patterns
        if live.types is not None:
            live.types.hooked([(trace.slot_of[f.key], f) for f in fresh])
        return warnings

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
            await self._kill_all(live)
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
            self._delete_dumps(session_id)
        return events, record.trimmed

    async def _kill_all(self, live: LiveSession) -> None:
        """Kill the launched process and every followed child still running."""
        live.stopping = True
        pids = [] if live.root_ended else [live.pid]
        pids += [child.pid for child in live.live_children()]
        for pid in pids:
            await self.worker.run(functools.partial(self.launcher.kill, pid))

    async def list_sessions(self) -> list[SessionRecord]:
        return await self.reader.run(store_sessions.list_sessions)

    async def session_processes(self, keys: list[int]) -> dict[int, list[store_sessions.ProcessRecord]]:
        return await self.reader.run(lambda c: store_sessions.session_processes(c, keys))

    async def delete(self, session_id: str) -> int:
        if session_id in self._live:
            raise ValidationError(
                f"Session '{session_id}' is still running. Call debug_stop({{sessionId: '{session_id}'}}) "
                "instead: it stops the process and deletes the data unless retain is true."
            )
        record = await self.get_record(session_id)
        deleted = await self._write(lambda c: store_sessions.delete_session(c, record.key))
        self.writer.forget_session(record.key)
        self._delete_dumps(session_id)
        return int(deleted)

    def _delete_dumps(self, session_id: str) -> None:
        """Buffers debug_read wrote for a session go with its events."""
        shutil.rmtree(self.paths.reads_dir / session_id, ignore_errors=True)
        self._ended_polls.pop(session_id, None)

    # ---- query -----------------------------------------------------------------------------------

    async def catch_up(self, session_id: str) -> None:
        """Make every event a live traced process has recorded so far queryable: the agent sends what is
        in its ring, the ingest stores it, the writer commits it. Best effort, bounded by FLUSH_TIMEOUT_S."""
        live = self._live.get(session_id)
        if live is None or live.handle is None:
            return
        if live.trace is not None and live.trace.slot_of:
            handles = [] if live.root_ended else [live.handle]
            handles += [child.handle for child in live.live_children() if child.hooked]
            for handle in handles:
                try:
                    await self.worker.run(functools.partial(handle.flush, FLUSH_TIMEOUT_S))
                except FridaAttachFailed as exc:
                    log.info("session %s: no flush of pid %d (%s); querying what is stored", session_id, handle.pid,
                             exc)
        elif not live.polls.polls:
            return
        await self.ingest.barrier()  # trace batches and poll snapshots received so far
        await self._write(lambda c: None)

    async def query(
        self, record: SessionRecord, flt: EventFilter, *, limit: int, offset: int, verbose: bool, settings: Settings
    ) -> QueryPage:
        live = self._live.get(record.id)
        if live is not None:
            self.writer.set_limit(record.key, settings.max_events_per_session)
            if verbose and live.types is not None:
                await live.types.wait(PLAN_WAIT_S)
        return await self.reader.run(
            lambda c: query_events(c, record.key, record.id, flt, limit=limit, offset=offset, verbose=verbose)
        )

    def sampled_functions(self, session_id: str) -> list[str]:
        live = self._live.get(session_id)
        return live.trace.sampled_function_names() if live is not None and live.trace is not None else []

    def is_running(self, session_id: str) -> bool:
        return session_id in self._live

    def live_count(self) -> int:
        return len(self._live)
