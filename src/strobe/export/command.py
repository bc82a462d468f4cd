"""`strobe export SESSION [--format chrome|html] [-o PATH]`: the store read directly (no daemon needed), the file
written, where it is and how to open it printed; an unknown session lists the sessions there are.

    $ strobe export server-2026-02-05-14h32 --format html -o /tmp
    /tmp/server-2026-02-05-14h32.html: 1,204 events, 3 threads (html)
    Open file:///tmp/server-2026-02-05-14h32.html in a browser …
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
from typing import TextIO

from strobe.errors import SessionNotFound, StrobeError
from strobe.export import exporting
from strobe.paths import StrobePaths
from strobe.store import sessions as store_sessions
from strobe.store.filters import parse_time

MAX_LISTED = 30


def run_export(paths: StrobePaths, session_id: str, fmt: exporting.Format, output: str | None,
               max_events: int | None, time_from: str | None = None, time_to: str | None = None,
               out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    if paths.home.exists():
        paths.check_home()  # UnsafeHomeError: cli.py prints what is wrong and the fix
    if max_events is not None and not 1 <= max_events <= exporting.MAX_EVENTS_LIMIT:
        print(f"strobe export: --max-events must be 1 to {exporting.MAX_EVENTS_LIMIT:,}", file=err)
        return 2
    try:
        window = [None if t is None else parse_time(int(t) if t.lstrip("-").isdigit() else t)
                  for t in (time_from, time_to)]
    except ValueError as exc:
        print(f"strobe export: {exc}", file=err)
        return 2
    if not paths.database.exists():
        print(f"strobe export: no sessions yet: {paths.database} does not exist (STROBE_HOME={paths.home}).",
              file=err)
        return 1
    with contextlib.closing(exporting.open_store(paths.database)) as conn:
        try:
            result = exporting.export_session(conn, session_id, fmt, output, home=paths.home,
                                              max_events=max_events, time_from=window[0], time_to=window[1])
        except SessionNotFound:
            print(f"strobe export: no session '{session_id}' in {paths.database}.", file=err)
            _list_sessions(conn, err)
            return 1
        except StrobeError as exc:
            print(f"strobe export: {exc.message}", file=err)
            return 1
    threads = f"{result.threads} thread{'s' if result.threads != 1 else ''}"
    print(f"{result.path}: {result.events:,} events, {threads} ({result.format}, {result.bytes:,} bytes)", file=out)
    note = exporting.truncation_note(result)
    if note is not None:
        print(note.replace("timeFrom/timeTo", "--from/--to").replace("maxEvents", "--max-events"), file=err)
    print(exporting.next_steps(result), file=out)
    return 0


def _list_sessions(conn: sqlite3.Connection, err: TextIO) -> None:
    records = store_sessions.list_sessions(conn)
    if not records:
        print("There are no sessions: launch a program with debug_launch first.", file=err)
        return
    print("Sessions (newest last):", file=err)
    for record in records[-MAX_LISTED:]:
        ended = record.status.value + (f" {record.signal}" if record.signal else "")
        print(f"  {record.id}  {ended}  {record.binary_path}", file=err)
    if len(records) > MAX_LISTED:
        print(f"  … and {len(records) - MAX_LISTED} older ones", file=err)
