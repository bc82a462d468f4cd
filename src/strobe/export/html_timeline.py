"""A session as one self-contained HTML page (timeline.html: inline CSS and JavaScript, nothing fetched) that opens
offline: a flame chart per thread on a <canvas>, output lines and crash markers per process, poll counters, zoom,
pan and a tooltip with each call's arguments and return value.

The data sits in a <script type="application/json"> element, written as it is read; every '<' in it is escaped
(\\u003c), so no text of the program can close the element. Its shape (read by the page's script):

    {"items": [[0, thread, startUs, durUs, name, args, unfinished],   # a call (thread: index into threads,
               [1, pid, tsUs, stream, text],                          #   name: index into names)
               [2, pid, tid, tsUs, kind, name, args],                 # a crash, pause or logpoint
               [3, pid, tsUs, label, {series: value}]],               # a poll's numbers
     "threads": [[pid, tid, name]], "names": [...], "processes": [[pid, name]], "session": {...},
     "endUs": n, "count": n, "truncated": bool}
"""

from __future__ import annotations

import os
from importlib import resources
from typing import Any, BinaryIO

from strobe.export.chrome_trace import Written, encode
from strobe.export.events import Call, Instant, Output, Sample, Thread, Timeline

_MARKER = "__STROBE_DATA__"


def template() -> tuple[str, str]:
    """The page before and after its data."""
    text = resources.files("strobe.export").joinpath("timeline.html").read_text(encoding="utf-8")
    head, marker, tail = text.partition(_MARKER)
    if not marker:
        raise RuntimeError("strobe/export/timeline.html has lost its data marker")
    return head, tail


def embed(value: Any) -> bytes:
    """JSON (UTF-8) safe inside a <script> element: '<' only occurs in strings, where \\u003c reads back the same."""
    return encode(value).replace(b"<", b"\\u003c")


def write_html_timeline(timeline: Timeline, out: BinaryIO, *, max_events: int) -> Written:
    head, tail = template()
    record = timeline.record
    out.write(head.encode())
    out.write(b'{"items":[\n')
    thread_index: dict[Thread, int] = {}
    name_index: dict[str, int] = {}
    first = True
    for item in timeline.items(max_events):
        entry: list[Any]
        if isinstance(item, Call):
            key = (item.pid, item.tid)
            if key not in thread_index:
                thread_index[key] = len(thread_index)
            if item.name not in name_index:
                name_index[item.name] = len(name_index)
            entry = [0, thread_index[key], item.start_ns / 1000, (item.end_ns - item.start_ns) / 1000,
                     name_index[item.name], item.args, item.unfinished]
        elif isinstance(item, Output):
            entry = [1, item.pid, item.ts_ns / 1000, item.stream, item.text]
        elif isinstance(item, Instant):
            entry = [2, item.pid, item.tid, item.ts_ns / 1000, item.kind, item.name, item.args]
        else:
            assert isinstance(item, Sample)
            entry = [3, item.pid, item.ts_ns / 1000, item.name, item.values]
        if not first:
            out.write(b",\n")
        out.write(embed(entry))
        first = False
    threads = [[pid, tid, timeline.thread_names.get((pid, tid)) or ("main" if pid == tid else f"thread {tid}")]
               for (pid, tid) in thread_index]
    processes = [[p.pid, f"{os.path.basename(p.binary_path or record.binary_path)} ({p.pid})"]
                 for p in timeline.processes]
    session = {"id": record.id, "binaryPath": record.binary_path, "status": record.status.value,
               "exitCode": record.exit_code, "signal": record.signal, "startedAt": record.started_at}
    rest = {"threads": threads, "names": list(name_index), "processes": processes, "session": session,
            "endUs": timeline.end_ns / 1000, "count": timeline.count, "truncated": timeline.truncated}
    out.write(b"\n]," + embed(rest)[1:])
    out.write(tail.encode())
    return Written(timeline.count, len(thread_index), timeline.truncated)
