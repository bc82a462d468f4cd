"""debug_read: read variables or raw memory of a running process once, or sample them into the timeline."""

from __future__ import annotations

from typing import Any

from strobe.daemon.frame_reads import VariableRef
from strobe.daemon.memory import MAX_POLLS_PER_SESSION, PreparedRead, prepare_raw
from strobe.mcp import wire
from strobe.mcp.models import ReadRequest, ReadTarget, WriteTarget
from strobe.mcp.registry import Tool, ToolContext


async def _prepare(ctx: ToolContext, req: ReadRequest) -> list[PreparedRead]:
    refs = [ref for t in req.targets if (ref := variable_ref(t)) is not None]
    resolved = await ctx.manager.resolve_targets(req.sessionId, refs, req.depth) if refs else {}
    prepared: list[PreparedRead] = []
    for target in req.targets:
        prepared.append(_one(target, resolved))
    return prepared


def variable_ref(target: ReadTarget | WriteTarget) -> VariableRef | None:
    """The variable a debug_read or debug_write target names (with the paused frame it is in), if any."""
    if target.variable is None:
        return None
    return VariableRef(target.variable, target.threadId, target.frame)


def _one(target: ReadTarget, resolved: dict[VariableRef, PreparedRead]) -> PreparedRead:
    ref = variable_ref(target)
    if ref is not None:
        return resolved[ref]
    assert target.address is not None and target.size is not None and target.type is not None
    return prepare_raw(target.address, target.size, target.type)


async def read(ctx: ToolContext, req: ReadRequest) -> dict[str, Any]:
    await ctx.manager.require_live(req.sessionId, "reading memory")
    targets = await _prepare(ctx, req)
    if req.poll is None:
        record = await ctx.manager.get_record(req.sessionId)
        limit = ctx.settings.for_project(record.project_root).max_event_bytes
        results = await ctx.manager.read_memory(req.sessionId, targets)
        return {"results": [wire.read_result(result, limit) for result in results]}
    failed = [{"target": t.label, "error": t.error} for t in targets if t.error is not None]
    if len(failed) == len(targets):
        return {"results": failed}
    poll_id, expected = await ctx.manager.start_poll(
        req.sessionId, targets, req.poll.intervalMs, req.poll.durationMs, MAX_POLLS_PER_SESSION
    )
    result: dict[str, Any] = {
        "polling": True,
        "pollId": poll_id,
        "variableCount": len(targets) - len(failed),
        "intervalMs": req.poll.intervalMs,
        "durationMs": req.poll.durationMs,
        "expectedSamples": expected,
        "eventType": "variable_snapshot",
        "hint": (
            f"Samples stream into the timeline: debug_query({{sessionId: '{req.sessionId}', eventType: "
            "'variable_snapshot'}); drop eventType to see them between function events. The poll's progress "
            "is under 'polls' in debug_query's answer."
        ),
    }
    if failed:
        result["errors"] = failed
    return result


TOOLS = (
    Tool(
        "debug_read",
        ReadRequest,
        "Read memory of a running program right now, without tracing or stopping it: global/static variables "
        "by name from the debug info ('gTempo', pointer chains 'gClock->counter', members 'cfg.limits.max', "
        "up to 4 '->'; in a Python program, module globals and attribute chains by dotted name: "
        "'app.config.timeout', '__main__.counter'), or raw memory {address, size, type} with type "
        "i8/u8/i16/u16/i32/u32/i64/u64/f32/f64/"
        "pointer/bytes ('bytes' is written to a file; you get its path and a 32-byte hex preview). Structs are "
        "expanded `depth` levels (1-5; deeper ones show '<struct>'). One-shot: returns {results: [{target, "
        "address, type, size, value | fields | file+preview | error}]}; a target that fails (unknown variable, "
        "unreadable address, null pointer in the chain) has an error and the others are still read. With "
        "poll {intervalMs 50-5000, durationMs 100-30000} it returns at once and records one variable_snapshot "
        "event per tick, interleaved in time with function events (debug_query). 1-16 targets. While a thread is "
        "paused at a breakpoint, a variable may also be a parameter or local of its frames: a bare name is the "
        "innermost frame's when it has one, {variable, frame: 1} its caller's (frame numbers the pause event's "
        "backtrace), threadId when several threads are paused; such results add threadId, frame, function.\n"
        'Example: {"sessionId": "synth-2026-02-05-14h32", "targets": [{"variable": "gTempo"}, '
        '{"variable": "gClock->counter"}, {"address": "0x7ff800", "size": 64, "type": "bytes"}, '
        '{"variable": "total", "frame": 1}]}',
        read,
    ),
)
