"""debug_trace: add and remove trace patterns on a live process, or stage them for the next launch."""

from __future__ import annotations

from typing import Any

from strobe.daemon.tracing import stability_status
from strobe.daemon.watches import WatchSpec
from strobe.errors import ValidationError
from strobe.mcp import wire
from strobe.mcp.models import TraceRequest, WatchChanges
from strobe.mcp.registry import Tool, ToolContext


def watch_specs(changes: WatchChanges | None) -> tuple[list[WatchSpec], list[str]]:
    """Watches to add (as the daemon takes them) and labels to remove."""
    if changes is None:
        return [], []
    specs = [WatchSpec(variable=w.variable, address=w.address, type=w.type, label=w.label, expr=w.expr,
                       on=tuple(w.on) if w.on is not None else None) for w in changes.add]
    return specs, list(changes.remove)


async def trace(ctx: ToolContext, req: TraceRequest) -> dict[str, Any]:
    manager = ctx.manager
    watch_add, watch_remove = watch_specs(req.watches)
    if req.sessionId is None and (watch_add or watch_remove):
        raise ValidationError(
            "Watches need a running process: launch first, then call debug_trace with its sessionId and watches. "
            "(Patterns without a sessionId are staged for the next launch; watches are not.)"
        )
    if req.sessionId is None:
        settings = ctx.settings.for_project(req.projectRoot)
        warnings = await manager.tracing.stage_patterns(req.add, req.remove, req.projectRoot, ctx.connection)
        return {
            "mode": "pending",
            "activePatterns": manager.tracing.pending_patterns(ctx.connection),
            "hookedFunctions": 0,
            "activeWatches": [],
            "warnings": [*settings.warnings, *warnings],
            "eventLimit": settings.max_events_per_session,
            "status": (
                "Staged for the next debug_launch, hooked before the program's first instruction; they stay staged "
                "until removed. Usually better: launch without patterns, read stderr/stdout first, then add "
                "patterns to the running session (pass its sessionId)."
            ),
        }
    record = await manager.get_record(req.sessionId)
    settings = ctx.settings.for_project(record.project_root)
    if req.serializationDepth is not None:
        await manager.tracing.set_serialization_depth(req.sessionId, req.serializationDepth)
    state = await manager.tracing.trace(req.sessionId, req.add, req.remove, settings, watch_add, watch_remove)
    result: dict[str, Any] = {
        "mode": "runtime",
        "activePatterns": state.patterns,
        "hookedFunctions": state.hooked,
    }
    if state.matched != state.hooked:
        result["matchedFunctions"] = state.matched
    result.update(
        activeWatches=[wire.watch(w) for w in state.watches],
        warnings=[*settings.warnings, *state.warnings],
        eventLimit=settings.max_events_per_session,
        status=stability_status(state.hooked, state.matched, state.sampled),
    )
    if state.hooked:
        result["nextSteps"] = (
            f"Exercise the code, then debug_query({{sessionId: '{req.sessionId}', eventType: 'function_exit'}}) "
            "or filter by function; add verbose: true for arguments and return values."
        )
    return result


TOOLS = (
    Tool(
        "debug_trace",
        TraceRequest,
        "Start or stop tracing functions of a running program, without restarting it: each call of a matched "
        "function records function_enter (arguments) and function_exit (return value, duration) events, read "
        "with debug_query. Patterns match demangled names: 'ns::func', 'ns::*' (one level), 'ns::**' (any "
        "depth), '*::validate', 'auth::**::validate', plain C names, '@usercode' (functions in projectRoot), "
        "'@file:parser.cpp'. Python programs: dotted module paths 'pkg.mod.func', 'pkg.mod.Class.method', "
        "'pkg.**', '*.validate', '@file:app.py', '@usercode' (the project's files, not its virtualenv); a session "
        "can mix them with a C extension's native names. Use it after reading the program's output, with the "
        "narrowest patterns that "
        "answer the question. Without sessionId the patterns are staged for the next debug_launch. Returns "
        "{mode, activePatterns, hookedFunctions, matchedFunctions?, activeWatches, warnings, eventLimit, status}; "
        "calling it with neither add nor remove reports the current state. Functions called more than 100k "
        "times a second are sampled (status and debug_query say so). watches.add reads variables at every traced "
        "call ({variable: 'gClock->counter'} or, in Python, {variable: 'app.config.timeout'}; {address, type}; or "
        "{expr: JavaScript}; 'on' limits them to some "
        "functions; max 32): their values appear as watchValues on the call's events (verbose). Arguments and "
        "return values are shown through the functions' DWARF types.\n"
        'Example: {"sessionId": "server-2026-02-05-14h32", "add": ["auth::**", "validate_form"]}',
        trace,
    ),
)
