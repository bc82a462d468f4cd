"""debug_launch, debug_stop, debug_list_sessions, debug_delete_session."""

from __future__ import annotations

import os
from typing import Any

import anyio

from strobe.daemon.images import use_debug_files
from strobe.daemon.launching import attachable_program, command_line
from strobe.daemon.sessions import Launched
from strobe.daemon.stdin import StdinSource
from strobe.instrument.command import resolve_command
from strobe.mcp import wire
from strobe.mcp.models import DeleteSessionRequest, LaunchRequest, ListSessionsRequest, StopRequest
from strobe.mcp.registry import Tool, ToolContext


async def launch(ctx: ToolContext, req: LaunchRequest) -> dict[str, Any]:
    if req.pid is not None:
        return await attach(ctx, req, req.pid)
    program = req.command
    assert program is not None  # the model requires one of them
    settings = ctx.settings.for_project(req.projectRoot)
    command = await anyio.to_thread.run_sync(  # reads files; a pyenv shim is asked what it runs
        lambda: resolve_command(program, req.args, req.cwd, req.projectRoot))
    symbols_path = req.symbolsPath  # checked (and searched first for the program's debug file) before it starts
    debug_warnings = await anyio.to_thread.run_sync(
        lambda: use_debug_files(command.binary_path, settings.debug_directories, symbols_path))
    stdin = await anyio.to_thread.run_sync(  # a missing or unreadable stdinFile fails here, before any spawn
        lambda: StdinSource.of(req.stdin, req.stdinFile, req.keepStdinOpen))
    pending = len(ctx.manager.tracing.pending_patterns(ctx.connection))
    try:
        launched = await ctx.manager.launch(command, req.projectRoot, req.env, settings, ctx.connection, stdin)
    except BaseException:
        if stdin is not None and stdin.file is not None:  # a session that never started will not read it
            stdin.file.close()
        raise
    sid = launched.session_id
    result: dict[str, Any] = {
        "sessionId": sid,
        "pid": launched.pid,
        "nextSteps": (
            f"The process is running and its stdout/stderr are being captured. Read the output first: "
            f"debug_query({{sessionId: '{sid}', eventType: 'stderr'}}) (and 'stdout'). Add function traces "
            "with debug_trace only if the output does not explain the problem; "
            f"call debug_stop({{sessionId: '{sid}'}}) when done."
        ),
    }
    if stdin is not None:
        result["stdin"] = {"bytes": stdin.size, "open": stdin.keep_open}
        if stdin.keep_open:
            result["nextSteps"] += (f" Its stdin stays open: send more with debug_input({{sessionId: '{sid}', "
                                    "text: '…\\n'}), end it with close: true.")
    return _with_staged_and_warnings(result, launched, pending, [*settings.warnings, *debug_warnings])


async def attach(ctx: ToolContext, req: LaunchRequest, pid: int) -> dict[str, Any]:
    """debug_launch {pid}: attach to a running process; debug_stop detaches and leaves it running."""
    settings = ctx.settings.for_project(req.projectRoot)
    own = {os.getpid()}
    program = await anyio.to_thread.run_sync(lambda: attachable_program(pid, own))  # a clear error before Frida's
    symbols_path = req.symbolsPath
    debug_warnings = await anyio.to_thread.run_sync(
        lambda: use_debug_files(program, settings.debug_directories, symbols_path))
    pending = len(ctx.manager.tracing.pending_patterns(ctx.connection))
    launched = await ctx.manager.attach(pid, req.projectRoot, settings, ctx.connection)
    sid = launched.session_id
    result: dict[str, Any] = {
        "sessionId": sid,
        "pid": launched.pid,
        "attached": True,
        "command": command_line(pid),
        "nextSteps": (
            f"Attached to the running process {pid}. What it writes to stdout/stderr from now on is captured (output "
            f"written before the attach is not available): debug_query({{sessionId: '{sid}', eventType: 'stdout'}}). "
            f"Add function traces with debug_trace. debug_stop({{sessionId: '{sid}'}}) detaches and leaves it running "
            "(kill: true ends it instead)."
        ),
    }
    return _with_staged_and_warnings(result, launched, pending, [*settings.warnings, *debug_warnings])


def _with_staged_and_warnings(result: dict[str, Any], launched: Launched, pending: int, warnings: list[str]
                              ) -> dict[str, Any]:
    """A launch's or an attach's answer: what the staged patterns hooked, and every warning once."""
    if pending:
        result["pendingPatternsApplied"] = pending
        result["hookedFunctions"] = launched.hooked
    every = [*warnings, *[w for w in launched.warnings if w not in warnings]]
    if every:
        result["warnings"] = every
    return result


async def stop(ctx: ToolContext, req: StopRequest) -> dict[str, Any]:
    detaching = ctx.manager.is_attached(req.sessionId) and not req.kill
    events, record = await ctx.manager.stop(req.sessionId, req.retain, req.kill)
    result: dict[str, Any] = {"success": True, "eventsCollected": events}
    if detaching:
        result["detached"] = True
        result["note"] = f"Detached from pid {record.pid}: it keeps running without Strobe's hooks."
    if record.trimmed or record.output_trimmed:  # by either per-session limit
        result["eventsDropped"] = record.trimmed + record.output_trimmed
    warnings = wire.loss_warnings(record, ctx.manager.out_of_space)
    if warnings:
        result["warnings"] = warnings
    if req.retain:
        result["hint"] = (
            f"Session kept: query it with debug_query, delete it with "
            f"debug_delete_session({{sessionId: '{req.sessionId}'}})."
        )
    return result


async def list_sessions(ctx: ToolContext, req: ListSessionsRequest) -> dict[str, Any]:
    records = await ctx.manager.list_sessions()
    families = await ctx.manager.session_processes([record.key for record in records])
    sessions = []
    for record in records:
        shown = wire.session(record)
        warnings = wire.loss_warnings(record, out_of_space=False)
        if warnings:
            shown["warnings"] = warnings
        processes = families.get(record.key, [])
        if len(processes) > 1:  # followed children: how each process is doing
            shown["processes"] = [wire.process(process) for process in processes]
        paused = ctx.manager.breaking.paused_threads(record.id)
        if paused:  # threads stopped at a breakpoint, waiting for debug_continue
            shown["paused"] = [thread.answer() for thread in paused]
        sessions.append(shown)
    result: dict[str, Any] = {"sessions": sessions}
    if ctx.manager.out_of_space:
        result["warnings"] = [wire.DISK_FULL]
    return result


async def delete_session(ctx: ToolContext, req: DeleteSessionRequest) -> dict[str, Any]:
    await ctx.manager.delete(req.sessionId)
    return {"success": True}


TOOLS = (
    Tool(
        "debug_launch",
        LaunchRequest,
        "Start a program under Strobe's debugger and return at once with a sessionId. Every byte the program "
        "writes to stdout/stderr is captured as timeline events; nothing else is traced until you ask with "
        "debug_trace. Use it instead of running the program from a shell when you need to see what it does. "
        "Returns {sessionId, pid, nextSteps}. Launching a binary that already has a running session fails "
        "with SESSION_EXISTS (stop that session first).\n"
        "To debug a program that is already running, pass its pid instead of command: Strobe attaches to it "
        "(response has attached: true and its command line), captures what it writes to stdout/stderr from then "
        "on (not before), and traces, reads and catches crashes as for a launched program; debug_stop detaches and "
        "leaves it running.\n"
        'Example: {"command": "./build/server", "args": ["--port", "8080"], "projectRoot": "/home/me/app"}; '
        'attach: {"pid": 4242, "projectRoot": "/home/me/app"}',
        launch,
    ),
    Tool(
        "debug_stop",
        StopRequest,
        "End a session: kills its process if still running and deletes the captured events, unless "
        "retain is true, which keeps them queryable (see debug_list_sessions). A session attached to a running "
        "process (debug_launch {pid}) is detached instead: hooks removed, the process left running (detached: "
        "true); kill: true kills it. Returns {success, eventsCollected}.\n"
        'Example: {"sessionId": "server-2026-02-05-14h32", "retain": true}',
        stop,
    ),
    Tool(
        "debug_list_sessions",
        ListSessionsRequest,
        "List every session Strobe holds: running ones, ones whose process exited (still queryable), and "
        "retained ones. Each has sessionId, binaryPath, pid, startedAt/endedAt (unix ms), status "
        "(running | exited | stopped | crashed, with the signal) and exitCode once ended. Takes no parameters.\n"
        "Example: {}",
        list_sessions,
    ),
    Tool(
        "debug_delete_session",
        DeleteSessionRequest,
        "Delete an ended (exited or retained) session and all its events. A running session must be "
        "stopped with debug_stop instead. Returns {success}.\n"
        'Example: {"sessionId": "server-2026-02-05-14h32"}',
        delete_session,
    ),
)
