"""debug_breakpoint and debug_continue: stop one thread of a running native program at a function, look at it,
let it go on."""

from __future__ import annotations

from typing import Any, Literal

from strobe.daemon.memory import prepare_raw, raw_size
from strobe.errors import ValidationError
from strobe.mcp import wire
from strobe.mcp.models import BreakpointRequest, ContinueRequest, LogpointRequest, WriteRequest
from strobe.mcp.read_tools import variable_ref
from strobe.mcp.registry import Tool, ToolContext


async def breakpoint_(ctx: ToolContext, req: BreakpointRequest) -> dict[str, Any]:
    for add in req.add:
        if add.function is None and (add.file is None or add.line is None):
            raise ValidationError("Each breakpoint needs `function` (a pattern, as debug_trace takes) or `file` with "
                                  "`line` (a source line: 'src/main.c' and 42).")
        if add.function is not None and add.file is not None:
            raise ValidationError("Give a breakpoint either `function` or `file` with `line`, not both.")
    added = [add.model_dump(exclude_none=True) for add in req.add]
    if req.sessionId is None:
        staged = ctx.manager.breaking.stage(ctx.connection, added, req.remove, req.projectRoot)
        staged["nextSteps"] = ("Staged for this connection's next debug_launch: armed before the program's first "
                               "instruction (and at each later launch, until removed with remove: [id]).")
        return staged
    result = await ctx.manager.breaking.set(req.sessionId, added, req.remove)
    if req.add:
        result["nextSteps"] = (
            "A thread that hits one stops (alone, unless allThreads) and a 'pause' event is recorded: "
            f"debug_query({{sessionId: '{req.sessionId}', eventType: 'pause'}}) shows where, its arguments and "
            f"backtrace; debug_list_sessions lists paused threads. Resume with debug_continue({{sessionId: "
            f"'{req.sessionId}'}}).")
    return result


async def logpoint(ctx: ToolContext, req: LogpointRequest) -> dict[str, Any]:
    for add in req.add:
        if (add.function is None) == (add.file is None or add.line is None):
            raise ValidationError("Each logpoint needs either `function` (a pattern) or `file` with `line`.")
    added = [{k: v for k, v in add.model_dump(exclude_none=True).items() if k != "message"} | {"log": add.message}
             for add in req.add]
    if req.sessionId is None:
        staged = ctx.manager.breaking.stage(ctx.connection, added, req.remove, req.projectRoot, logpoints=True)
        staged["nextSteps"] = "Staged for this connection's next debug_launch, armed before its first instruction."
        return staged
    result = await ctx.manager.breaking.set(req.sessionId, added, req.remove, logpoints=True)
    if req.add:
        result["nextSteps"] = (f"Each hit records a 'logpoint' event without stopping the program: debug_query"
                               f"({{sessionId: '{req.sessionId}', eventType: 'logpoint'}}).")
    return result


async def write(ctx: ToolContext, req: WriteRequest) -> dict[str, Any]:
    await ctx.manager.require_live(req.sessionId, "writing memory")
    refs = [ref for t in req.targets if (ref := variable_ref(t)) is not None]
    resolved = await ctx.manager.resolve_targets(req.sessionId, refs, 1) if refs else {}
    targets = []
    for target in req.targets:
        if (ref := variable_ref(target)) is not None:
            prepared = resolved[ref]
        else:
            assert target.address is not None and target.type is not None
            prepared = prepare_raw(target.address, raw_size(target.type) or 8, target.type)
        targets.append((prepared, target.value))
    return {"results": await ctx.manager.writes.write(req.sessionId, targets)}


async def continue_(ctx: ToolContext, req: ContinueRequest) -> dict[str, Any]:
    if req.action != "continue":
        steps: dict[str, Literal["over", "into", "out"]] = {"step-over": "over", "step-into": "into",
                                                            "step-out": "out"}
        kind = steps[req.action]
        stopped = await ctx.manager.breaking.step(req.sessionId, req.threadId, kind, req.waitMs / 1000)
        return wire.paused(stopped, await _event_limit(ctx, req.sessionId))
    resumed = await ctx.manager.breaking.continue_(req.sessionId, req.threadId)
    limit = await _event_limit(ctx, req.sessionId)
    if not resumed:
        paused = ctx.manager.breaking.paused_threads(req.sessionId)
        which = f"thread {req.threadId} is not" if req.threadId is not None else "no thread is"
        others = f" Paused now: {', '.join(str(p.tid) for p in paused)}." if paused else ""
        raise ValidationError(f"Nothing to continue: {which} paused in session {req.sessionId}.{others} A thread "
                              "stops at a breakpoint (debug_breakpoint); debug_list_sessions lists paused threads.")
    return {"status": "running", "resumed": [{"threadId": p.tid, "breakpointId": p.breakpoint_id} if p.breakpoint_id
                                             else {"threadId": p.tid, "step": p.event.get("step")} for p in resumed],
            "stillPaused": [wire.paused(p.answer(), limit) for p in ctx.manager.breaking.paused_threads(req.sessionId)]}


async def _event_limit(ctx: ToolContext, session_id: str) -> int:
    """query.maxEventBytes for the session's project: how big one paused thread's answer may be."""
    record = await ctx.manager.get_record(session_id)
    return ctx.settings.for_project(record.project_root).max_event_bytes


TOOLS = (
    Tool(
        "debug_breakpoint",
        BreakpointRequest,
        "Stop a running program (C, C++, Rust; Python: conditions in Python) when it enters a function or reaches a "
        "source line, to look "
        "at its arguments, locals and stack at that moment. Only the thread that hits it stops (unless "
        "allThreads); the program's other threads, tracing and output go on. add: [{function (pattern, as "
        "debug_trace) | file + line, "
        "condition? (JavaScript over parameters, locals at a line and globals by name, with ->field steps: "
        "'n > 100 && acc->total > 0'), hitCount? (stop at the Nth hit), allThreads? (stop every thread, not only "
        "the one that hits it)}], remove: [breakpoint ids]. Returns {breakpoints: [{id, function | file+line, "
        "locations: [{function, address, file, line}], condition?, hitCount?}], warnings?}. A hit records a "
        "'pause' event (function, file, line, arguments at a function's entry, locals at a line, backtrace, "
        "registers); the thread waits for debug_continue. Trace (debug_trace) rather than break when you want "
        "every call, not one moment.\n"
        'Example: {"sessionId": "app-2026-02-05-14h32", "add": [{"function": "process_order", "condition": '
        '"qty > 100"}]}',
        breakpoint_,
    ),
    Tool(
        "debug_logpoint",
        LogpointRequest,
        "Record a line in the timeline each time a function is entered (or a source line reached), "
        "without stopping the program: a printf you add to the running program. add: [{function | file + line, "
        "message ('order {id} qty={qty} total={acc->total}': {expressions} over parameters, a line's locals and "
        "globals by name), condition? (JavaScript over the same names)}], remove: [logpoint ids]. Returns "
        "{logpoints: [{id, function | "
        "file+line, message, locations}]}. Each hit is a 'logpoint' event (text, threadId, logpointId) in "
        "debug_query, between the other events. Cheaper than a breakpoint and readable like output; trace "
        "(debug_trace) instead for every argument and return value of every call.\n"
        'Example: {"sessionId": "app-2026-02-05-14h32", "add": [{"function": "process_order", "message": '
        '"order {id} qty={qty}", "condition": "qty > 100"}]}',
        logpoint,
    ),
    Tool(
        "debug_write",
        WriteRequest,
        "Change a value in the running program's memory, to test a hypothesis without rebuilding: a global or "
        "static scalar by name (as debug_read names it: 'gTempo', 'gClock->counter', 'cfg.limits[2]'; its type "
        "from the debug info; while a thread is paused, a local or parameter of its frames: 'qty', or with frame: 1 "
        "its caller's) or a raw address with a type (i8..u64, f32, f64, pointer). Only memory mapped "
        "writable is written (never code or read-only data); a value that does not fit its type is refused. "
        "Returns {results: [{target, address, type, previousValue, newValue} | {target, error}]}.\n"
        'Example: {"sessionId": "app-2026-02-05-14h32", "targets": [{"variable": "g_limit", "value": 500}, '
        '{"address": "0x55d4a2c04010", "type": "f64", "value": 0.5}]}',
        write,
    ),
    Tool(
        "debug_continue",
        ContinueRequest,
        "Let threads stopped at breakpoints go on, or step one at source-line granularity. action 'continue' "
        "(threadId, or every paused thread): {status: 'running', resumed: [{threadId, breakpointId}], "
        "stillPaused: [...]}; their next hit stops them again (remove the breakpoint with debug_breakpoint to stop "
        "stopping). action 'step-over' | 'step-into' | 'step-out' (the paused thread; threadId when several are): "
        "{status: 'paused', threadId, step, function, sourceFile, line, backtrace, locals?, notes?} where it "
        "stopped, the same as a new 'pause' event; {status: 'running'} if it has not stopped within waitMs (a "
        "long call); {status: 'exited'} if the process ended. A breakpoint hit during the step ends it there. "
        "Step to follow control flow a line at a time; set a breakpoint further on and continue to skip ahead.\n"
        'Example: {"sessionId": "app-2026-02-05-14h32", "action": "step-over"}',
        continue_,
    ),
)
