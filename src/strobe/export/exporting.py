"""Exporting one session to a file: where it goes, which writer, and what the caller is told.

Both debug_export (mcp/export_tools.py, in a worker thread over the daemon's reading connection) and
`strobe export` (cli.py, over a read-only connection of its own, no daemon needed) call `export_session`:

    with contextlib.closing(open_store(paths.database)) as conn:
        result = export_session(conn, "server-2026-02-05-14h32", "chrome", None, home=paths.home)
        print(result.path, result.events)

The file is written beside its destination under a temporary name and renamed into place when complete, so a
reader never sees half a file; it is created 0600 (a trace holds the program's data).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from strobe.errors import ValidationError
from strobe.export.chrome_trace import Written, write_chrome_trace
from strobe.export.events import read_session
from strobe.export.html_timeline import write_html_timeline
from strobe.mcp.wire import MAX_EVENT_BYTES
from strobe.paths import private_dir, private_opener
from strobe.store.filters import TimeBound
from strobe.store.query import install_functions
from strobe.store.schema import connect

Format = Literal["chrome", "html"]
FORMATS: tuple[Format, ...] = ("chrome", "html")
EXTENSIONS: dict[Format, str] = {"chrome": "json", "html": "html"}
DEFAULT_MAX_EVENTS: dict[Format, int] = {"chrome": 300_000, "html": 200_000}
"""About 30 s of export each (measured ~10,000 calls/s on a loaded 2-core machine; an MCP call must not take minutes).
A browser holds the whole HTML page's data in memory; Perfetto streams a trace file."""
MAX_EVENTS_LIMIT = 50_000_000


class ExportPathError(ValidationError):
    """The destination cannot be written; the message names it, the reason, and what to pass instead."""


@dataclass(frozen=True)
class ExportResult:
    path: Path
    format: Format
    events: int
    threads: int
    truncated: bool
    max_events: int
    bytes: int


def open_store(database: Path) -> sqlite3.Connection:
    """A read-only connection to the store (WAL: it reads while the daemon writes)."""
    if not database.exists():
        raise FileNotFoundError(database)
    conn = connect(database, readonly=True)
    install_functions(conn)
    return conn


def default_path(home: Path, session_id: str, fmt: Format) -> Path:
    return home / "exports" / f"{session_id.replace(os.sep, '_')}.{EXTENSIONS[fmt]}"


def destination(path: str | Path | None, home: Path, session_id: str, fmt: Format) -> Path:
    """The file to write: `path` (a directory: <sessionId>.<ext> inside it), else STROBE_HOME/exports/."""
    if path is None:
        target = default_path(home, session_id, fmt)
        private_dir(target.parent)
        return target
    target = Path(path).expanduser()
    if target.is_dir():
        target = target / default_path(home, session_id, fmt).name
    if not target.parent.is_dir():
        raise ExportPathError(
            f"Cannot write the export to '{target}': the directory '{target.parent}' does not exist. Create it, "
            "pass a path in an existing directory, or omit path to write under STROBE_HOME/exports/."
        )
    return target


def export_session(
    conn: sqlite3.Connection, session_id: str, fmt: Format, path: str | Path | None, *, home: Path,
    max_events: int | None = None, time_from: TimeBound | None = None, time_to: TimeBound | None = None,
    max_event_bytes: int = MAX_EVENT_BYTES,
) -> ExportResult:
    """Write the session (running, ended or retained) as `fmt`. Raises SessionNotFound, ExportPathError."""
    cap = max_events if max_events is not None else DEFAULT_MAX_EVENTS[fmt]
    timeline = read_session(conn, session_id, time_from=time_from, time_to=time_to, max_event_bytes=max_event_bytes)
    try:
        target = destination(path, home, session_id, fmt)
        temporary = target.parent / f".{target.name}.{os.getpid()}.part"
        try:
            fd = private_opener(str(temporary), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        except OSError as exc:
            raise ExportPathError(
                f"Cannot write the export to '{target}': {exc.strerror or exc} in '{target.parent}'. Pass a path in "
                "a directory you can write, or omit path to write under STROBE_HOME/exports/."
            ) from None
        try:
            with open(fd, "wb", buffering=1 << 16) as out:
                writer = write_chrome_trace if fmt == "chrome" else write_html_timeline
                written: Written = writer(timeline, out, max_events=cap)
            os.replace(temporary, target)
        except OSError as exc:
            raise ExportPathError(
                f"Writing the export to '{target}' failed: {exc.strerror or exc}. Free disk space or pass another "
                "path; a time window (timeFrom/timeTo) or a smaller maxEvents makes a smaller file."
            ) from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
    finally:
        timeline.close()
    return ExportResult(target, fmt, written.events, written.threads, written.truncated, cap, target.stat().st_size)


def next_steps(result: ExportResult) -> str:
    if result.format == "chrome":
        return (f"Open {result.path} in https://ui.perfetto.dev ('Open trace file'; the file stays on this machine) "
                "or in Chrome at chrome://tracing ('Load'): one process per pid, one track per thread, each call a "
                "slice whose args hold its arguments and return value.")
    return (f"Open file://{result.path} in a browser (it works offline): a flame chart per thread; wheel to zoom, "
            "drag to pan, hover a slice for its arguments and return value.")


def truncation_note(result: ExportResult) -> str | None:
    if not result.truncated:
        return None
    return (f"Stopped at maxEvents ({result.max_events:,} events): the rest of the session is not in the file. "
            "Export a window with timeFrom/timeTo (e.g. timeFrom \"-5s\" for the last 5 seconds, or \"2s\" to "
            "\"3s\"), narrow the trace patterns for the next run, or raise maxEvents.")
