"""Making a process's hooks and watches match the session's: one algorithm for the launched process and every
followed child, with one failure policy (a function that cannot be hooked is a warning naming it, whichever
process it is in).

A process's desired hooks are its image's share of the session's patterns: a forked child, running its
parent's image, gets the same functions; a new image (exec, posix_spawn) has its functions matched again.
Watches are resolved against the launched program's variables, so only processes running its image read them.

    warnings = await hooking.sync(live, process, await hooking.desired_for(live, process))
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping

from strobe.daemon.go_abi import GO_HOOK_REFUSAL
from strobe.daemon.ingest import TraceIngest
from strobe.daemon.live import LiveSession
from strobe.daemon.process import TracedProcess
from strobe.daemon.runtimes import Runtime
from strobe.daemon.services import Services
from strobe.daemon.symbols import TraceableFunction
from strobe.daemon.tracing import HookPlan, plan_hooks
from strobe.daemon.watches import Watch, WatchDecoder, agent_watches, assign, scope_warnings
from strobe.errors import ProcessExited
from strobe.instrument.handle import ProcessGone
from strobe.instrument.requests import HookOptions
from strobe.store import functions as store_functions

log = logging.getLogger(__name__)

Desired = Mapping[tuple[str, int, str], TraceableFunction]


def ingest_like(runtime: Runtime, like: TraceIngest, pid: int) -> TraceIngest:
    """A new process's ingest in the session of `like`: same slot table, loss counters and value decoders."""
    ingest = runtime.ingest(like.writer, like.session, pid, like.start_ns, like.table, like.peers)
    ingest.watches, ingest.follow = like.watches, like.follow
    return ingest


class Hooking:
    def __init__(self, services: Services) -> None:
        self._services = services

    async def plan_for(self, live: LiveSession, process: TracedProcess, patterns: list[str]) -> HookPlan | None:
        """The hooks `patterns` select in the process's image; None when nothing there can be selected by name
        (a native binary without debug info)."""
        symbols = await process.image.symbols
        if not symbols.traceable:
            return None
        plan = plan_hooks([], patterns, [], symbols.sources, live.record.project_root)
        live.trace.note(plan)
        return plan

    async def desired_for(self, live: LiveSession, process: TracedProcess) -> Desired:
        """The functions a process should have hooked: its image's share of the session's patterns."""
        if not live.trace.patterns:
            return {}
        plan = await self.plan_for(live, process, live.trace.patterns)
        if plan is None:
            log.info("session %s: %s has no debug info; pid %d is followed for output and crashes only",
                     live.record.id, process.image.binary, process.pid)
            return {}
        return plan.desired

    async def sync(self, live: LiveSession, process: TracedProcess, desired: Desired) -> list[str]:
        """Hook and unhook so the process has exactly `desired`; returns a warning per function that could not be
        hooked. Raises ProcessExited if the process went away meanwhile."""
        trace, services, settings = live.trace, self._services, live.settings
        fresh = trace.new_functions(desired)
        if fresh:
            rows = [(f.name, f.info.raw, f.file, f.info.line, f.info.params,
                     None if f.runtime == "native" else f.runtime) for f in fresh]
            keys = await services.write(lambda c: store_functions.insert_functions(c, rows))
            trace.assign_slots(fresh, keys)
        to_add, to_remove = trace.changes(process.hooked, desired)
        if live.types is not None and fresh:  # their argument plans in the agent before their first call
            await live.types.before_hooks([(trace.slot_of[f.key], f) for f in fresh if f.runtime == "native"])
        plans = live.types.current_plans() if live.types is not None else []
        handle = process.handle
        try:
            if plans and to_add and not process.hooked:  # a process joining: the argument plans in force
                await services.worker.run(functools.partial(handle.set_follow, plans))
            failed = await process.image.runtime.apply_hooks(
                services.worker.run, handle, to_add, to_remove, HookOptions(
                    settings.hot_calls_per_second, settings.sample_every,
                    settings.fast_path and not live.attached,  # Strobe may detach from what it attached to
                ),
            )
        except ProcessGone as exc:
            raise ProcessExited(
                f"The target process of '{live.record.id}' (pid {process.pid}) exited while its hooks were being "
                f"changed ({exc}). The session is still queryable."
            ) from exc
        for slot in to_remove:
            process.hooked.pop(slot, None)
        warnings: list[str] = []
        go: list[str] = []  # one warning for all the Go code: a pattern such as 'main.*' selects only Go
        for slot, function in to_add:
            if failed.get(slot) == GO_HOOK_REFUSAL:
                go.append(function.name)
            elif slot in failed:  # the runtime's reason says why (native: symbols/hook_safety.py, or Frida's refusal)
                warnings.append(f"Could not hook {function.name}: {failed[slot]}.")
            else:
                process.hooked[slot] = function
        if go:
            named = ", ".join(go[:8]) + (f" and {len(go) - 8} more" if len(go) > 8 else "")
            warnings.append(f"Not hooked, Go code ({named}): {GO_HOOK_REFUSAL}.")
        native = [f for f in fresh if f.runtime == "native"]  # register plans come from DWARF
        if live.types is not None and native:
            live.types.hooked([(trace.slot_of[f.key], f) for f in native])
        return warnings

    async def set_watches(self, live: LiveSession, process: TracedProcess, watches: list[Watch]) -> list[str]:
        """Send watches (their scopes resolved to the process's hooked functions) under a new version, registered
        with its decoder first: the batches recorded under them carry that version. Returns the watches the agent
        refused, by label; the session's watches become those it accepted."""
        hooked = [(slot, f.name, f.file) for slot, f in process.hooked.items()]
        assignment = assign(watches)
        version = process.ingest.watches.add(WatchDecoder(assignment, hooked) if watches else None)
        message = agent_watches(assignment, hooked, version)
        try:
            reply = await process.image.runtime.apply_watches(self._services.worker.run, process.handle, message)
        except ProcessGone as exc:
            raise ProcessExited(
                f"The target process of '{live.record.id}' (pid {process.pid}) exited while its watches were being "
                f"set ({exc}). The session is still queryable."
            ) from exc
        by_id = assignment.by_id()
        failed = {e.id: e.error for e in reply.errors}
        live.watches = [w for wid, w in sorted(by_id.items()) if wid not in failed]
        warnings = [f"Watch '{by_id[wid].label}' was not added: {error}" for wid, error in failed.items()
                    if wid in by_id]
        return warnings + scope_warnings(live.watches, hooked)

    def watched(self, live: LiveSession) -> list[TracedProcess]:
        """The live processes that read the session's watches: those running the launched program's image."""
        return [p for p in live.live_processes() if p.image is live.image]
