"""debug_query: filters in, a page of the session's timeline out."""

from __future__ import annotations

from typing import Any

from strobe.mcp import wire
from strobe.mcp.models import QueryRequest
from strobe.mcp.registry import Tool, ToolContext
from strobe.store.query import UNSET, EventFilter, TextMatch, parse_time
from strobe.store.schema import EventKind


def to_filter(req: QueryRequest) -> EventFilter:
    return EventFilter(
        kind=EventKind.from_wire(req.eventType) if req.eventType else None,
        function=TextMatch(**req.function.model_dump()) if req.function else None,
        source_file=TextMatch(**req.sourceFile.model_dump()) if req.sourceFile else None,
        return_equals=(
            req.returnValue.equals
            if req.returnValue is not None and "equals" in req.returnValue.model_fields_set
            else UNSET
        ),
        return_is_null=req.returnValue.isNull if req.returnValue else None,
        thread_name_contains=req.threadName.contains if req.threadName else None,
        time_from=parse_time(req.timeFrom) if req.timeFrom is not None else None,
        time_to=parse_time(req.timeTo) if req.timeTo is not None else None,
        min_duration_ns=req.minDurationNs,
        pid=req.pid,
    )


async def query(ctx: ToolContext, req: QueryRequest) -> dict[str, Any]:
    manager = ctx.manager
    await manager.catch_up(req.sessionId)  # everything recorded before this call, and its loss counters
    record = await manager.get_record(req.sessionId)
    settings = ctx.settings.for_project(record.project_root)
    page = await manager.query(
        record, to_filter(req), limit=req.limit, offset=req.offset, verbose=req.verbose
    )
    limit = settings.max_event_bytes
    events = [wire.event(row, record.id, req.verbose, limit) for row in page.events]
    result: dict[str, Any] = {"events": events, "totalCount": page.total_count, "hasMore": page.has_more}
    if page.pids:
        result["pids"] = page.pids
        families = await manager.session_processes([record.key])
        result["processes"] = [wire.process(process) for process in families.get(record.key, [])]
    result["sessionStatus"] = record.status.value
    if record.status.value != "running" and record.exit_code is not None:
        result["exitCode"] = record.exit_code
    warnings = [*settings.warnings, *wire.loss_warnings(record, manager.out_of_space)]
    if record.trimmed:
        warnings.append(
            f"{record.trimmed} oldest events were dropped by the per-session limit "
            f"(events.maxPerSession = {settings.max_events_per_session}); raise it in "
            f"{record.project_root}/.strobe/settings.json or narrow your trace patterns."
        )
    if record.sampled_out:
        hot = manager.sampled_functions(record.id)
        which = f" ({', '.join(hot)})" if hot else ""
        warnings.append(
            f"Partial data: {record.sampled_out:,} calls of hot functions{which} were skipped by sampling; the "
            "recorded ones are marked sampled (verbose). For full capture, remove the hot function's pattern with "
            f"debug_trace, or set trace.samplePercent to 100 in {record.project_root}/.strobe/settings.json and "
            "call debug_trace again."
        )
    if record.dropped:
        warnings.append(
            f"{record.dropped:,} trace events were lost because the program produced them faster than Strobe "
            "could store them. Narrow the trace patterns."
        )
    trimmed = sum(1 for e in events if "trimmed" in e)
    if trimmed:
        warnings.append(
            f"{trimmed} event{'s were' if trimmed != 1 else ' was'} over query.maxEventBytes ({limit:,} bytes) and "
            "had their biggest values cut (marked '…'; each such event has 'trimmed'). debug_read the field path a "
            "marker names, lower serializationDepth (debug_trace), or raise query.maxEventBytes in "
            f"{record.project_root}/.strobe/settings.json."
        )
    warnings += manager.tracer_notes(record.id)
    if warnings:
        result["warnings"] = warnings
    polls = manager.polls(record.id)
    if polls:
        result["polls"] = [wire.poll(p) for p in polls]
    if page.has_more:
        result["hint"] = f"More events: repeat with offset {req.offset + len(page.events)}."
    return result


TOOLS = (
    Tool(
        "debug_query",
        QueryRequest,
        "Read a session's timeline: the program's stdout/stderr lines, function enter/exit events, crashes "
        "and variable snapshots, oldest first. Start with eventType 'stderr' or 'stdout' right after "
        "debug_launch; narrow with function {equals|contains|matches}, sourceFile, returnValue "
        "{equals|isNull}, threadName {contains}, minDurationNs, pid, and timeFrom/timeTo (ns since start, "
        "\"2s\", or \"-5s\" = 5 s before the latest event). Returns {events, totalCount, hasMore}; page with "
        "limit (1-500, default 50) and offset. verbose adds arguments, return values, thread and parent ids. "
        "Works on running and ended sessions. After a crash, eventType 'crash' gives the signal, fault "
        "address, symbolized backtrace, registers, stack memory and the crashing thread's last calls.\n"
        'Example: {"sessionId": "server-2026-02-05-14h32", "eventType": "stderr", "limit": 20}',
        query,
    ),
)
