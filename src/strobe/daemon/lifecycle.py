"""How a live session ends: each process's end is recorded as it comes (exited with its code, crashed with its
signal, stopped), and once the launched process and every followed child have ended the session settles (its
output drains, its last trace batches are stored) and finishes with the launched process's status.

A process's end is recorded when it ends, except the launched process's when it is the last: the session's end
records it, once the output has drained, so a session never reads as ended before all its output is stored.

A process whose agent reported no exit code (it ended through an inline exit_group system call, or was killed)
gets it from the kernel's process connector (daemon/exits.py) when that says it exited; otherwise its code stays
unknown, never guessed. One the kernel says a crash signal killed (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) is
crashed with that signal even when its crash report is not stored yet (a daemon that was stopped gets the report
after the end) or never came.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import time
from typing import Any

from strobe.daemon.exits import ExitStatuses
from strobe.daemon.live import LiveSession
from strobe.daemon.registry import LiveSessions
from strobe.daemon.services import Services
from strobe.daemon.thread_holds import release_holds
from strobe.errors import FridaAttachFailed
from strobe.store import sessions as store_sessions
from strobe.store.sessions import SessionStatus

log = logging.getLogger(__name__)

STREAM_DRAIN_TIMEOUT_S = 5.0
STOP_TIMEOUT_S = 5.0
KERNEL_STATUS_TIMEOUT_S = 1.0  # the kernel's exit event comes within microseconds of Frida's detach
CRASH_REPORT_WAIT_S = 30.0  # a crash report still being stored when its process is gone (a first index of a library)
CRASH_SIGNALS = {int(sig): sig.name
                 for sig in (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT)}


def now_ms() -> int:
    return int(time.time() * 1000)


class Lifecycle:
    def __init__(self, services: Services, sessions: LiveSessions, exits: ExitStatuses | None = None) -> None:
        self._services, self._sessions = services, sessions
        self._exits = exits if exits is not None else ExitStatuses.shared()

    async def process_gone(self, live: LiveSession, handle: Any, reason: str) -> None:
        """Frida let go of one process of the session (an exec() is not an end: its new image comes as a child)."""
        if reason == "process-replaced" or live.finished.is_set():
            return
        process = live.processes.get(handle.pid)
        if process is None or process.handle is not handle or process.ended:
            return
        process.ended = True
        await release_holds(live, process.pid)  # the threads an allThreads stop held go with their process
        if process.exit_code is None and not live.stopping:
            await self._exit_code_from_kernel(live, process.pid)
        last = not live.live_processes()
        if not (process.is_root and last):
            await self._services.ingest.barrier()
            status = process.end_status(live.stopping)
            signal = process.crash_signal if status is SessionStatus.CRASHED else None
            key, pid, code, ended = live.record.key, process.pid, process.exit_code, now_ms()
            log.info("session %s: process %d gone (%s), %s %s; %d still running", live.record.id, pid, reason,
                     status.value, signal or code, len(live.live_processes()))
            await self._services.write(
                lambda c: store_sessions.finish_process(c, key, pid, status, code, ended, signal))
            process.recorded = status
            if not process.is_root:
                self._services.launcher.forget(pid)
        if last and not live.settling:
            live.settling = True
            await self._settle(live, reason)

    async def _exit_code_from_kernel(self, live: LiveSession, pid: int) -> None:
        status = await asyncio.to_thread(self._exits.wait, pid, KERNEL_STATUS_TIMEOUT_S)
        process = live.processes.get(pid)
        if status is None or process is None or process.exit_code is not None:
            return
        if status.exited:
            process.exit_code = status.code
            log.info("session %s: pid %d exited with %d (from the kernel; its agent reported none)", live.record.id,
                     pid, status.code)
            return
        log.info("session %s: pid %d was killed by signal %d (from the kernel)", live.record.id, pid, status.signal)
        if process.crash_signal is None and status.signal in CRASH_SIGNALS:
            process.crash_signal = CRASH_SIGNALS[status.signal]

    async def _settle(self, live: LiveSession, reason: str) -> None:
        """Every process is gone: let the last output drain, then record how the session ended."""
        if live.owns_output and not await asyncio.to_thread(live.streams_closed.wait, STREAM_DRAIN_TIMEOUT_S):
            log.warning(
                "session %s: stdout/stderr still open %.0fs after the process ended (a child holds them?)",
                live.record.id, STREAM_DRAIN_TIMEOUT_S,
            )
        log.info("session %s: process %d gone (%s), exit code %s", live.record.id, live.pid, reason,
                 live.root.exit_code)
        await self._services.ingest.barrier()  # the last trace batches are stored before the session reads as ended
        if live.crash_reports:  # and its crash events: symbolizing one may outlast the crashing thread's wait
            await asyncio.wait(set(live.crash_reports), timeout=CRASH_REPORT_WAIT_S)
        live.polls.process_gone()
        if not live.stopping and live.types is not None:  # ended by itself: its events stay queryable, with types
            live.types.following = False
            await live.types.wait(0)
        await self.finish(live, live.root.end_status(live.stopping))

    async def finish(self, live: LiveSession, status: SessionStatus) -> None:
        """Record the session's end (its launched process's row and status) and forget its processes."""
        if live.finished.is_set():
            return
        root = live.root
        status = root.recorded or status  # the launched process ended before its children: as it was recorded
        key, pid, code, ended = live.record.key, live.pid, root.exit_code, now_ms()
        signal = root.crash_signal if status is SessionStatus.CRASHED else None
        if live.closers:  # a runtime's tracer files: read to their end (then stored), then deleted
            closers, live.closers = live.closers, []
            for close in closers:
                await asyncio.to_thread(close)
            await self._services.ingest.barrier()
        self._sessions.remove(live)
        for process in live.processes.values():
            self._services.launcher.forget(process.pid)
        await self._services.write(lambda c: store_sessions.finish_process(c, key, pid, status, code, ended, signal))
        live.finished.set()

    async def kill_all(self, live: LiveSession) -> None:
        """Kill every process of the session still running."""
        live.stopping = True
        for process in live.live_processes():
            await self._services.kill(process.pid)

    async def detach(self, live: LiveSession) -> None:
        """Let go of every process of a session Strobe attached to (debug_launch {pid}) and leave them running:
        each agent unloads (its hooks, breakpoints and output capture with it); the session ends as stopped. The
        caller releases paused threads first (Breaking.release_all)."""
        live.stopping = True
        for process in live.live_processes():
            try:
                await self._services.worker.run(functools.partial(self._services.launcher.detach, process.handle))
            except FridaAttachFailed as exc:  # it ended meanwhile: its end is reported as usual
                log.info("session %s: pid %d not detached (%s)", live.record.id, process.pid, exc)
        await self._await_end(live, "detaching")

    async def stop(self, live: LiveSession) -> None:
        """Kill the session's processes and wait for it to end (recorded as stopped if Frida never says)."""
        await self.kill_all(live)
        await self._await_end(live, "the kill")

    async def _await_end(self, live: LiveSession, after: str) -> None:
        """Wait for the session to end once its processes were let go of or killed (`after` names which, for the
        log); if Frida reports no detach within STOP_TIMEOUT_S, finish it as stopped anyway."""
        try:
            await asyncio.wait_for(live.finished.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            log.warning("session %s: no detach reported within %.0fs of %s; closing it anyway", live.record.id,
                        STOP_TIMEOUT_S, after)
            await self.finish(live, SessionStatus.STOPPED)
