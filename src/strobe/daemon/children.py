"""The processes a session follows besides the one it launched: children from fork/vfork/posix_spawn and
the new images of exec(). Frida gates each one (it stops before its first instruction), the launcher loads
the agent into it, and the session gives it the hooks that match its image before resuming it.

An image is what a process runs: a forked child runs its parent's image (same functions at the same
addresses, so the parent's hooks, watches and argument plans apply as they are); an exec() or posix_spawn()
brings a new image, whose functions are looked up again for the session's patterns (watches, resolved
against the launched program's variables, do not carry over)."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from strobe.daemon.symbols import SessionSymbols, TraceableFunction, load_session_symbols, preload_main_index
from strobe.daemon.tracing import plan_hooks
from strobe.daemon.watches import agent_watches, assign
from strobe.errors import ProcessExited
from strobe.instrument.launcher import AgentTimeout, ProcessGone, ProcessHandle
from strobe.instrument.worker import FridaWorker
from strobe.store import functions as store_functions
from strobe.store import sessions as store_sessions
from strobe.store.sessions import SessionStatus

if TYPE_CHECKING:
    from strobe.daemon.sessions import LiveSession

log = logging.getLogger(__name__)

Write = Callable[[Callable[[Any], Any]], Awaitable[Any]]  # runs a function on the writer's connection


@dataclass(eq=False)
class ProcessImage:
    binary: str
    symbols: asyncio.Future[SessionSymbols]


@dataclass(eq=False)
class ChildProcess:
    pid: int
    parent_pid: int
    handle: ProcessHandle
    image: ProcessImage
    hooked: dict[int, TraceableFunction] = field(default_factory=dict)  # slot -> function, as in SessionTrace
    exit_code: int | None = None
    crash_signal: str | None = None
    ended: bool = False

    def end_status(self, stopping: bool) -> SessionStatus:
        if stopping:
            return SessionStatus.STOPPED
        if self.crash_signal is not None and self.exit_code is None:
            return SessionStatus.CRASHED
        return SessionStatus.EXITED


def load_image(handle: ProcessHandle, binary: str, cache_dir: Path) -> ProcessImage:
    """Start indexing a new image's functions (in a thread); the process waits, gated, until it is hooked."""

    def load() -> SessionSymbols:
        return load_session_symbols(binary, handle.modules, cache_dir, preload_main_index(binary, cache_dir))

    return ProcessImage(binary, asyncio.ensure_future(asyncio.to_thread(load)))


class ChildFollowing:
    """What a session does for a followed child: its row, its image, and hooks matching the session's."""

    def __init__(self, worker: FridaWorker, write: Write, cache_dir: Path) -> None:
        self._worker, self._write, self._cache_dir = worker, write, cache_dir

    async def child_for(
        self, live: LiveSession, handle: ProcessHandle, origin: str, parent: int, path: str
    ) -> ChildProcess:
        assert live.trace is not None and live.image is not None
        pid, key, now = handle.pid, live.record.key, int(time.time() * 1000)
        existing = live.children.get(pid)
        if origin == "exec" and existing is not None:  # a followed child exec()ed: same pid, a new program
            existing.handle, existing.hooked, existing.ended = handle, {}, False
            existing.image = load_image(handle, path, self._cache_dir)
            live.trace.ingest.sibling(pid)  # the new agent numbers its records afresh
            await self._write(lambda c: store_sessions.set_process_binary(c, key, pid, path))
            log.info("session %s: child %d exec()ed %s", live.record.id, pid, path)
            return existing
        parent_child = live.children.get(parent)
        if origin == "exec":  # posix_spawn(): a new process with a new image
            image = load_image(handle, path, self._cache_dir)
        elif parent_child is not None:
            image = parent_child.image
        else:
            image = live.image
        child = ChildProcess(pid, parent, handle, image)
        live.children[pid] = child
        live.trace.ingest.sibling(pid)
        await self._write(lambda c: store_sessions.add_process(c, key, pid, parent, image.binary, now))
        log.info("session %s: following child %d (%s of %d, %s)", live.record.id, pid, origin, parent, image.binary)
        return child

    async def desired_for(self, live: LiveSession, child: ChildProcess) -> dict[tuple[str, int, str], Any]:
        """The functions a child should have hooked: its image's share of the session's patterns."""
        assert live.trace is not None
        if child.image is live.image:  # the launched program's image: exactly its hooks
            return {f.key: f for f in live.trace.hooked.values()}
        if not live.trace.patterns:
            return {}
        symbols = await child.image.symbols
        if not symbols.main_has_dwarf:
            log.info("session %s: %s has no debug info; pid %d is followed for output and crashes only",
                     live.record.id, child.image.binary, child.pid)
            return {}
        plan = plan_hooks([], live.trace.patterns, [], symbols.indexes, live.record.project_root)
        return dict(plan.desired)

    async def sync(
        self, live: LiveSession, child: ChildProcess, desired: dict[tuple[str, int, str], Any]
    ) -> None:
        """Make a child's hooks (and, for the launched program's image, watches and argument plans) match."""
        trace, handle, settings = live.trace, child.handle, live.settings
        assert trace is not None and settings is not None
        fresh = [f for key, f in desired.items() if key not in trace.slot_of]
        if fresh:
            rows = [(f.name, f.info.raw, f.file, f.info.line, f.info.params) for f in fresh]
            keys = await self._write(lambda c: store_functions.insert_functions(c, rows))
            trace.assign_slots(fresh, keys)
        hooked_keys = {f.key for f in child.hooked.values()}
        to_add = [(trace.slot_of[key], f) for key, f in desired.items() if key not in hooked_keys]
        to_remove = [slot for slot, f in child.hooked.items() if f.key not in desired]
        plans = live.types.current_plans() if live.types is not None else []
        if plans and not child.hooked:
            await self._worker.run(functools.partial(handle.set_follow, plans))
        hot, every = settings.hot_calls_per_second, settings.sample_every
        if to_remove:
            await self._worker.run(lambda: handle.update_hooks("remove", [(s, 0) for s in to_remove], hot, every))
            for slot in to_remove:
                child.hooked.pop(slot, None)
        if to_add:
            reply = await self._worker.run(
                lambda: handle.update_hooks("add", [(s, f.runtime_address) for s, f in to_add], hot, every)
            )
            failed = {failure.id for failure in reply.failed}
            child.hooked.update((slot, f) for slot, f in to_add if slot not in failed)
        if live.types is not None and fresh:
            live.types.hooked([(trace.slot_of[f.key], f) for f in fresh])
        if child.image is live.image and live.watches:
            hooked = [(slot, f.name, f.file) for slot, f in child.hooked.items()]
            await self._worker.run(functools.partial(handle.set_watches, agent_watches(assign(live.watches), hooked)))

    async def sync_all(self, live: LiveSession) -> None:
        """After a debug_trace change: every followed child gets its share of the new patterns and watches."""
        for child in live.live_children():
            try:
                await self.sync(live, child, await self.desired_for(live, child))
            except (ProcessGone, AgentTimeout, ProcessExited) as exc:
                log.info("session %s: child %d not updated (%s)", live.record.id, child.pid, exc)
