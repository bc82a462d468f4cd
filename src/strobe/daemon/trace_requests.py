"""TraceRequests: what debug_trace asks of the daemon. Patterns staged per client for its next launch (and hooked
before the program's first instruction), and a live session's hooks, watches and serialization depth changed in
every one of its processes."""

from __future__ import annotations

import logging
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from strobe.daemon.argtypes import PLANS_BEFORE_RUN_S
from strobe.daemon.break_sites import under_line_breakpoints
from strobe.daemon.breakpoints import Breaking
from strobe.daemon.children import GONE
from strobe.daemon.hooking import Hooking
from strobe.daemon.live import LiveSession
from strobe.daemon.memory import PreparedRead, prepare_raw, raw_size
from strobe.daemon.reads import SessionReads
from strobe.daemon.registry import LiveSessions
from strobe.daemon.runtimes import UNTRACED_JAVASCRIPT, untraced_javascript
from strobe.daemon.services import Services
from strobe.daemon.tracing import HookPlan, parse_patterns, plan_hooks
from strobe.daemon.watches import Watch, WatchSpec, plan_watches
from strobe.errors import ProcessExited
from strobe.settings import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TraceState:
    """A session's tracing after a debug_trace call."""

    patterns: list[str]
    hooked: int  # functions hooked in the launched process
    matched: int  # functions the patterns matched (hooked + inlined or unhookable ones)
    watches: list[Watch]
    sampled: list[str]  # hot functions being sampled
    warnings: list[str]


class _DefaultClient:
    """The client of calls made without a connection (the daemon's own tests)."""


DEFAULT_CLIENT = _DefaultClient()


class TraceRequests:
    def __init__(self, services: Services, sessions: LiveSessions, hooking: Hooking, reads: SessionReads,
                 breaking: Breaking) -> None:
        self._services, self._sessions, self._hooking = services, sessions, hooking
        self._reads, self._breaking = reads, breaking
        # Patterns staged without a sessionId, per client connection (its MCP session object): one agent's staged
        # patterns are not another's launch's; they go when the connection does.
        self._pending: weakref.WeakKeyDictionary[object, list[str]] = weakref.WeakKeyDictionary()

    def pending_patterns(self, client: object = DEFAULT_CLIENT) -> list[str]:
        """The patterns `client` (an MCP connection) staged for its next launch."""
        return list(self._pending.get(client, ()))

    async def apply_pending(self, pending: list[str], staged: list[dict[str, Any]], live: LiveSession) -> list[str]:
        """Hook the staged patterns, then arm the staged breakpoints, before the process runs its first instruction."""
        return await self._hook_pending(pending, live) + await self._breaking.apply_staged(live, staged)

    async def _hook_pending(self, pending: list[str], live: LiveSession) -> list[str]:
        if not pending:
            return []
        if live.image.kind in UNTRACED_JAVASCRIPT:
            live.trace.patterns = list(pending)
            return [untraced_javascript(live.image.kind)]
        plan = await self._hooking.plan_for(live, live.root, pending)
        if plan is None:  # kept for what it starts: `uv run app.py`, a launcher script, a test driver
            live.trace.patterns = list(pending)
            return [f"Pending patterns select nothing in {live.image.binary}: it has no debug info (build it with -g "
                    "to trace its functions). They apply to the programs it starts (a Python interpreter, a binary "
                    "with debug info)."]
        warnings = plan.warnings + await self._hooking.sync(live, live.root, plan.desired)
        live.trace.patterns = plan.patterns
        if live.types is not None:  # every call, the first included, recorded with what its signature needs
            await live.types.wait(PLANS_BEFORE_RUN_S)
        return warnings

    async def stage_patterns(self, add: list[str], remove: list[str], project_root: str | None,
                             client: object = DEFAULT_CLIENT) -> list[str]:
        """Pending mode: patterns for `client`'s next launch. Returns warnings."""
        parse_patterns(add, project_root)
        staged = self.pending_patterns(client)
        merged = [p for p in staged if p not in remove]
        merged += [p for p in add if p not in merged and p not in remove]
        warnings = [f"Pattern '{p}' was not staged; nothing to remove." for p in remove if p not in staged]
        self._pending[client] = merged
        return warnings

    async def trace(
        self, session_id: str, add: list[str], remove: list[str], settings: Settings,
        watch_add: Sequence[WatchSpec] = (), watch_remove: Sequence[str] = (),
    ) -> TraceState:
        """Runtime mode: change the hooks and watches of every process of a live session."""
        live = self._sessions.get(session_id)
        if live is None:
            record = await self._sessions.record(session_id)
            code = "unknown" if record.exit_code is None else record.exit_code
            raise ProcessExited(
                f"Target process of '{session_id}' has exited (code: {code}); its session is still queryable with "
                "debug_query but cannot be traced. Launch it again (debug_launch) to trace a new run."
            )
        live.settings = settings
        self._services.writer.set_limit(live.record.key, settings.max_events_per_session,
                                        settings.max_output_per_session)
        async with live.trace_lock:
            plan: HookPlan | None = None
            warnings: list[str] = []
            watches = live.watches
            if watch_add or watch_remove:
                watches, warnings = await self._plan_watches(live, watch_add, watch_remove)
            if add or remove:
                if add:  # what it loaded since launch (a C extension, a plugin) can be selected too
                    await self._services.images.refresh(live.image, live.pid)
                symbols = await live.image.symbols
                if add and not symbols.traceable:
                    symbols.require_debug_info()
                plan = plan_hooks(live.trace.patterns, add, remove, symbols.sources, live.record.project_root)
                live.trace.note(plan)
                warnings += plan.warnings + under_line_breakpoints(live, plan.desired)
                if add and live.image.kind in UNTRACED_JAVASCRIPT:
                    warnings.append(untraced_javascript(live.image.kind))
                live.trace.patterns = plan.patterns
                warnings += await self._sync_hooks(live, plan)
            if watch_add or watch_remove or (plan is not None and live.watches):  # scopes follow the hooks
                warnings += await self._sync_watches(live, watches)
            warnings += [note for note in live.trace.tracer_notes() if note not in warnings]
            hooked = len(live.root.hooked)
            return TraceState(list(live.trace.patterns), hooked, plan.matched if plan is not None else hooked,
                              list(live.watches), live.sampled_function_names(), warnings)

    async def _sync_hooks(self, live: LiveSession, plan: HookPlan) -> list[str]:
        """Every live process gets its image's share of the patterns (the launched program's: `plan`)."""
        warnings: list[str] = []
        for process in live.live_processes():
            try:
                desired = plan.desired if process.image is live.image else await self._hooking.desired_for(
                    live, process)
                warnings += [w for w in await self._hooking.sync(live, process, desired) if w not in warnings]
            except GONE as exc:
                if process.is_root:
                    raise
                log.info("session %s: process %d not updated (%s)", live.record.id, process.pid, exc)
        return warnings

    async def _sync_watches(self, live: LiveSession, watches: list[Watch]) -> list[str]:
        warnings: list[str] = []
        watched = self._hooking.watched(live)
        if not watched:  # the launched process is gone: the watches are kept for nothing
            live.watches = watches
            return warnings
        for process in watched:
            try:
                found = await self._hooking.set_watches(live, process, watches)
                warnings += [w for w in found if w not in warnings]
            except GONE as exc:
                if process.is_root:
                    raise
                log.info("session %s: watches not set in process %d (%s)", live.record.id, process.pid, exc)
        return warnings

    async def set_serialization_depth(self, session_id: str, depth: int) -> None:
        """How many struct levels watch values and followed pointer arguments show, from now on."""
        live = self._sessions.get(session_id)
        if live is not None and live.types is not None:
            async with live.trace_lock:
                await live.types.set_depth(depth)
                for process in live.live_processes():
                    try:
                        await process.image.runtime.set_depth(self._services.worker.run, process.handle, depth)
                    except GONE as exc:
                        log.info("session %s: depth not set in pid %d (%s)", session_id, process.pid, exc)

    async def _plan_watches(self, live: LiveSession, add: Sequence[WatchSpec], remove: Sequence[str]
                            ) -> tuple[list[Watch], list[str]]:
        resolved = await self._resolve_watches(live, add)
        return plan_watches(live.watches, add, remove, resolved, live.record.project_root)

    async def resolve_watch_specs(self, live: LiveSession, specs: Sequence[WatchSpec]
                                   ) -> tuple[list[Watch], list[str]]:
        """Watches requested before the program they read was running (a traced test run's)."""
        return plan_watches([], specs, [], await self._resolve_watches(live, specs), live.record.project_root)

    async def _resolve_watches(self, live: LiveSession, specs: Sequence[WatchSpec]) -> dict[str, PreparedRead]:
        resolved: dict[str, PreparedRead] = {}
        variables = [s.variable for s in specs if s.variable is not None]
        if variables:
            found = await self._reads.resolve_variables(live.record.id, variables, live.serialization_depth)
            resolved.update({s.default_label: found[s.variable] for s in specs if s.variable is not None})
        for spec in specs:
            size = raw_size(spec.type) if spec.type is not None else None
            if spec.address is not None and spec.type is not None and size is not None:
                resolved[spec.default_label] = prepare_raw(spec.address, size, spec.type)
        return resolved
