"""debug_export: a session written to a file as a Chrome trace (Perfetto, chrome://tracing) or a self-contained
HTML timeline; the work is strobe/export/, done in a worker thread over a read-only connection of its own."""

from __future__ import annotations

import os
from typing import Any, Literal

import anyio.to_thread
from pydantic import Field, field_validator

from strobe.export import exporting
from strobe.mcp.models import MAX_ID, OsString, StrictModel, check_time
from strobe.mcp.registry import Tool, ToolContext
from strobe.store.filters import EventFilter, parse_time
from strobe.store.schema import EventKind


class ExportRequest(StrictModel):
    sessionId: str = Field(min_length=1, max_length=MAX_ID)
    format: Literal["chrome", "html"] = Field(
        default="chrome",
        description="'chrome': Chrome trace-event JSON for ui.perfetto.dev or chrome://tracing; 'html': one "
                    "self-contained page (flame chart per thread) that opens offline in any browser.",
    )
    path: OsString | None = Field(
        default=None, min_length=1,
        description="Absolute file (or directory) to write; default STROBE_HOME/exports/<sessionId>.json|.html.",
    )
    maxEvents: int | None = Field(
        default=None, ge=1, le=exporting.MAX_EVENTS_LIMIT,
        description="Stop after this many events (default 300,000 for chrome, 200,000 for html: about 30 s each).",
    )
    timeFrom: int | str | None = Field(
        default=None, description='Only events from here: ns since start, "2s", or "-5s" before the latest event.'
    )
    timeTo: int | str | None = Field(default=None, description="Only events up to here; same forms as timeFrom.")

    @field_validator("path")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not os.path.isabs(os.path.expanduser(value)):
            raise ValueError(f"path must be absolute (got {value[:200]!r}): the daemon's working directory is not "
                             "yours")
        return value

    _time = field_validator("timeFrom", "timeTo")(check_time)


async def export(ctx: ToolContext, req: ExportRequest) -> dict[str, Any]:
    manager = ctx.manager
    await manager.catch_up(req.sessionId)  # a running session: everything recorded before this call
    record = await manager.get_record(req.sessionId)
    # Arguments show typed once the functions' argument types are worked out: the same wait as a verbose query.
    await manager.query(record, EventFilter(kind=EventKind.FUNCTION_ENTER), limit=1, offset=0, verbose=True)
    settings = ctx.settings.for_project(record.project_root)
    time_from = parse_time(req.timeFrom) if req.timeFrom is not None else None
    time_to = parse_time(req.timeTo) if req.timeTo is not None else None

    def run() -> exporting.ExportResult:
        conn = exporting.open_store(ctx.paths.database)
        try:
            return exporting.export_session(
                conn, req.sessionId, req.format, req.path, home=ctx.paths.home, max_events=req.maxEvents,
                time_from=time_from, time_to=time_to, max_event_bytes=settings.max_event_bytes,
            )
        finally:
            conn.close()

    result = await anyio.to_thread.run_sync(run)
    answer: dict[str, Any] = {
        "path": str(result.path), "format": result.format, "events": result.events, "threads": result.threads,
        "bytes": result.bytes, "sessionStatus": record.status.value,
    }
    warnings = []
    note = exporting.truncation_note(result)
    if note is not None:
        answer["truncated"] = True
        warnings.append(note)
    if record.status.value == "running":
        warnings.append("The session is still running: calls in progress end at the last event, marked "
                        "'unfinished'. Export again later for what comes next.")
    if record.trimmed or record.output_trimmed:
        warnings.append("The oldest events were dropped by the per-session limits before this export "
                        "(events.maxPerSession, events.maxOutputPerSession); calls whose enter was dropped start "
                        "at their exit minus their duration.")
    if warnings:
        answer["warnings"] = warnings
    answer["nextSteps"] = exporting.next_steps(result)
    return answer


TOOLS = (
    Tool(
        "debug_export",
        ExportRequest,
        "Write a session's timeline (running, ended or retained) to a file a human can look at: format 'chrome' "
        "is a Chrome trace-event JSON that ui.perfetto.dev and chrome://tracing open (one process per pid, one "
        "track per thread, each traced call a slice with its arguments and return value, stdout/stderr lines and "
        "crashes as markers, debug_read poll values as counters); 'html' is one self-contained page with a zoomable "
        "flame chart per thread that opens offline. Use it to show the user what the program did, or to see "
        "overlap and timing across threads at a glance; use debug_query to read events yourself. Returns {path, "
        "format, events, threads, bytes, truncated?, nextSteps}. Big sessions stop at maxEvents (default "
        "300,000; html 200,000, ~30 s): export a window with timeFrom/timeTo. path defaults to "
        "STROBE_HOME/exports/<sessionId>.json|.html.\n"
        'Example: {"sessionId": "server-2026-02-05-14h32", "format": "html"}',
        export,
    ),
)
