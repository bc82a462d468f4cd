"""A session as a Chrome trace-event file (the JSON Object Format), which ui.perfetto.dev and chrome://tracing open.

One process per traced pid, one track per thread; each call a complete event ("X", µs since the session's start,
float) whose args are its arguments and return value as debug_query shows them; output lines, crashes, pauses and
logpoints instant events ("i"), process-scoped; numeric poll values counters ("C"). Written as it is read, one
event per line (UTF-8), so memory stays bounded whatever the session's size:

    with open(path, "wb") as out:
        stats = write_chrome_trace(timeline, out, max_events=300_000)
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any, BinaryIO

import orjson

from strobe.export.events import Call, Instant, Output, Sample, Timeline

OUTPUT_NAME_CHARS = 80  # an output line's instant is named by its first characters; args hold all of it


@dataclass(frozen=True)
class Written:
    events: int  # timeline items written (calls, output lines, instants, counter samples); names not counted
    threads: int
    truncated: bool


def dumps(value: Any) -> str:
    """Compact JSON that strict parsers accept: NaN and infinities (a double argument can hold them) as strings."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str)
    except ValueError:
        return json.dumps(_finite(value), separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str)


def encode(value: Any) -> bytes:
    """`dumps(value)` as UTF-8, by orjson (numbers may be spelled differently, e.g. 1e16 for 1e+16; the values are
    the same). What orjson cannot write as `dumps` does (NaN and infinities, which it writes as null; ints past 64
    bits; keys that are not strings) goes through `dumps`."""
    try:
        data = orjson.dumps(value, default=str)
    except TypeError:
        return dumps(value).encode()
    if b"null" in data and not _all_finite(value):
        return dumps(value).encode()
    return data


def _all_finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_all_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(_all_finite(v) for v in value)
    return True


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _us(ns: int) -> float:
    return ns / 1000.0


def trace_event(item: Call | Output | Instant | Sample) -> dict[str, Any]:
    """One item as a trace event."""
    if isinstance(item, Call):
        return {"name": item.name, "cat": "function", "ph": "X", "ts": _us(item.start_ns),
                "dur": _us(item.end_ns - item.start_ns), "pid": item.pid, "tid": item.tid, "args": item.args}
    if isinstance(item, Output):
        text = item.text.rstrip("\n")
        event: dict[str, Any] = {"name": f"{item.stream}: {text[:OUTPUT_NAME_CHARS]}", "cat": item.stream, "ph": "i",
                                 "s": "p", "ts": _us(item.ts_ns), "pid": item.pid, "tid": item.tid or item.pid,
                                 "args": {"stream": item.stream, "text": item.text}}
        return event
    if isinstance(item, Instant):
        return {"name": item.name, "cat": item.kind, "ph": "i", "s": "p" if item.kind != "crash" else "g",
                "ts": _us(item.ts_ns), "pid": item.pid, "tid": item.tid or item.pid, "args": item.args}
    return {"name": item.name, "cat": "poll", "ph": "C", "ts": _us(item.ts_ns), "pid": item.pid,
            "args": item.values}


def write_chrome_trace(timeline: Timeline, out: BinaryIO, *, max_events: int) -> Written:
    """Stream the session into `out`; at most `max_events` timeline events (plus the process and thread names)."""
    record = timeline.record
    out.write(b'{"traceEvents":[\n')
    first = True

    def emit(event: dict[str, Any]) -> None:
        nonlocal first
        if not first:
            out.write(b",\n")
        out.write(encode(event))
        first = False

    pids = [p.pid for p in timeline.processes] or [record.pid]
    for process in timeline.processes or []:
        binary = os.path.basename(process.binary_path or record.binary_path)
        emit({"name": "process_name", "ph": "M", "pid": process.pid, "args": {"name": f"{binary} ({process.pid})"}})
        emit({"name": "process_labels", "ph": "M", "pid": process.pid,
              "args": {"labels": f"{process.status.value}" + (f" {process.signal}" if process.signal else "")}})
    if not timeline.processes:
        emit({"name": "process_name", "ph": "M", "pid": record.pid,
              "args": {"name": f"{os.path.basename(record.binary_path)} ({record.pid})"}})
    for item in timeline.items(max_events):
        emit(trace_event(item))
    threads = sorted(timeline.threads)
    for pid, tid in threads:
        name = timeline.thread_names.get((pid, tid)) or ("main" if tid == pid else f"thread {tid}")
        emit({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}})
        emit({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
              "args": {"sort_index": 0 if tid == pid else tid}})
    for index, pid in enumerate(pids):
        emit({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": index}})
    metadata = {
        "source": "Strobe", "sessionId": record.id, "binaryPath": record.binary_path, "status": record.status.value,
        "exitCode": record.exit_code, "signal": record.signal, "startedAtUnixMs": record.started_at,
        "endedAtUnixMs": record.ended_at, "timeUnit": "ts and dur in microseconds since the session started",
        "events": timeline.count, "truncated": timeline.truncated,
    }
    out.write(b'\n],\n"displayTimeUnit":"ns",\n"metadata":' + encode(metadata) + b"}\n")
    return Written(timeline.count, len(threads), timeline.truncated)
