"""The processes a session follows besides the one it launched: children from fork/vfork/posix_spawn and the
new images of exec(), the launched process's own included. Frida gates each one (it stops before its first
instruction), the launcher loads the agent into it, and the session gives it the hooks that match its image
before resuming it — whatever happens.

A forked child runs its parent's image (same functions at the same addresses, so the parent's hooks, watches
and argument plans apply as they are); exec() and posix_spawn() bring a new image, whose functions are matched
again against the session's patterns. Watches, resolved against the launched program's variables, are read
only where that image runs; when the launched process itself exec()s they are dropped, except a traced test
run's, which are set in the program it has just become.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from strobe.daemon.hooking import Hooking, ingest_like
from strobe.daemon.live import LiveSession
from strobe.daemon.process import TracedProcess
from strobe.daemon.services import Services
from strobe.daemon.watches import Watch, WatchSpec
from strobe.errors import ProcessExited
from strobe.instrument.handle import AgentTimeout, ProcessGone
from strobe.store import sessions as store_sessions

log = logging.getLogger(__name__)

# (session, watch specs) -> resolved watches and warnings: daemon/sessions.py resolves them like debug_read
ResolveWatches = Callable[[LiveSession, Sequence[WatchSpec]], Awaitable[tuple[list[Watch], list[str]]]]
GONE = (ProcessGone, AgentTimeout, ProcessExited)


class ChildFollowing:
    def __init__(self, services: Services, hooking: Hooking, resolve_watches: ResolveWatches) -> None:
        self._services, self._hooking, self._resolve_watches = services, hooking, resolve_watches

    async def adopt(self, live: LiveSession, handle: Any, origin: str, parent: int, path: str) -> None:
        """Give a gated child (or a new exec() image) the session's hooks, then resume it."""
        pid = handle.pid
        services = self._services
        try:
            if live.stopping or live.finished.is_set() or not live.processes:
                await services.kill(pid)
                return
            async with live.trace_lock:
                process = live.processes.get(pid)
                if origin == "exec" and process is not None:
                    await self._rebind(live, process, handle, path)
                else:
                    process = await self._join(live, handle, origin, parent, path)
                await self._sync(live, process)
                if origin != "fork":  # a new image: its runtime sets up (a forked child has its parent's)
                    for warning in await process.image.runtime.prepare(services.worker.run, handle,
                                                                       live.serialization_depth):
                        log.info("session %s: pid %d: %s", live.record.id, pid, warning)
        except GONE as exc:
            log.info("session %s: process %d went away while being followed (%s)", live.record.id, pid, exc)
        except Exception:
            log.exception("session %s: process %d could not be given its hooks", live.record.id, pid)
        finally:
            await services.worker.run(lambda: services.launcher.resume_quietly(pid))

    async def _join(self, live: LiveSession, handle: Any, origin: str, parent: int, path: str) -> TracedProcess:
        """A new process in the session: a fork runs its parent's image, a posix_spawn() a new one."""
        parent_process = live.processes.get(parent) or live.root
        image = (parent_process.image if origin == "fork"
                 else self._services.images.load(path, handle.modules, live.record.project_root))
        process = TracedProcess(handle.pid, parent, handle, image,
                                ingest_like(image.runtime, parent_process.ingest, handle.pid))
        live.processes[process.pid] = process
        key, pid, now = live.record.key, process.pid, int(time.time() * 1000)
        await self._services.write(lambda c: store_sessions.add_process(c, key, pid, parent, image.binary, now))
        log.info("session %s: following child %d (%s of %d, %s, %s)", live.record.id, pid, origin, parent,
                 image.binary, image.kind.value)
        return process

    async def _rebind(self, live: LiveSession, process: TracedProcess, handle: Any, path: str) -> None:
        """A process of the session exec()ed: same pid, a new program whose functions are matched again."""
        image = self._services.images.load(path, handle.modules, live.record.project_root)
        process.rebind(handle, image, ingest_like(image.runtime, process.ingest, process.pid))
        if process.is_root and live.watches:  # its new agent records under no watches (version 0)
            log.info("session %s: watches dropped: the launched process exec()ed %s", live.record.id, path)
            live.watches = []
        key, pid = live.record.key, process.pid
        await self._services.write(lambda c: store_sessions.set_process_binary(c, key, pid, path))
        log.info("session %s: process %d exec()ed %s (%s)", live.record.id, pid, path, image.kind.value)

    async def _sync(self, live: LiveSession, process: TracedProcess) -> None:
        """Hooks for the process's image, then the watches that apply to it."""
        for warning in await self._hooking.sync(live, process, await self._hooking.desired_for(live, process)):
            log.info("session %s: pid %d: %s", live.record.id, process.pid, warning)
        if process.is_root and live.pending_watches:  # a traced test run's, for the program it has just become
            specs, live.pending_watches = live.pending_watches, []
            watches, warnings = await self._resolve_watches(live, specs)
            warnings += await self._hooking.set_watches(live, process, watches)
            for warning in warnings:
                log.info("session %s: %s", live.record.id, warning)
        elif process.image is live.image and live.watches:
            await self._hooking.set_watches(live, process, live.watches)
