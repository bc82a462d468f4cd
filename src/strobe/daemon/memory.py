"""Live memory reads (debug_read): targets become read recipes here, the agent follows and copies them
(agent/src/common/memory.ts), and the bytes it returns are decoded here into values, structs or files.

A poll streams one `variable_snapshot` event per tick into the session's timeline; its progress is kept
per session (`SessionPolls`) so the caller can see how many samples were taken and why it ended.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strobe.errors import StrobeError
from strobe.instrument.protocol import PollComplete, ReadResult, VariableSnapshot
from strobe.store.schema import EventKind
from strobe.symbols.decode import strings_by_pointer
from strobe.symbols.expressions import ReadRecipe, resolve_expression
from strobe.symbols.types import ValueLayout
from strobe.symbols.variables import VariableNotFound, variable_index

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 5.0
MAX_POLLS_PER_SESSION = 4
PREVIEW_BYTES = 32

_RAW_FORMATS: dict[str, tuple[str, int]] = {
    "i8": ("<b", 1), "u8": ("<B", 1), "i16": ("<h", 2), "u16": ("<H", 2), "i32": ("<i", 4), "u32": ("<I", 4),
    "i64": ("<q", 8), "u64": ("<Q", 8), "f32": ("<f", 4), "f64": ("<d", 8), "pointer": ("<Q", 8),
}

_SCALAR_KINDS = ("int", "uint", "float", "bool", "char", "pointer", "enum")

Render = Callable[[bytes, dict[str, str | None]], dict[str, Any]]
"""Decode the bytes read for a target (and the C strings its char* fields point to) into response fields:
{"value": ...} for a scalar, {"fields": {...}} for a struct."""


@dataclass(frozen=True)
class FrameRef:
    """Where a paused frame's variable was found: the paused thread, the frame's index in its backtrace (0: the
    innermost), its function; `pause` is the pause it was resolved in (daemon/breakpoint_state.PausedThread), so a
    read or write can tell the thread has gone on since."""

    pid: int
    thread: int
    frame: int
    function: str | None
    pause: object = field(compare=False, repr=False)
    write_note: str | None = None  # what a write there may not do (Rust's debugger copies)

    def answer(self) -> dict[str, Any]:
        out: dict[str, Any] = {"threadId": self.thread, "frame": self.frame}
        if self.function:
            out["function"] = self.function
        return out


@dataclass(frozen=True)
class PreparedRead:
    """One target of a read, ready for the agent (`recipe`) or already failed (`error`)."""

    label: str
    type_name: str
    size: int
    recipe: dict[str, object] | None = None
    render: Render | None = None
    is_bytes: bool = False
    error: str | None = None
    direct: bool = False  # a scalar of 1, 2, 4 or 8 bytes at a fixed address: the CModule can read it itself
    plain: Plain | None = None  # the bare JSON value of the bytes (watches show values without types)
    python: str | None = None  # a Python global or attribute chain, read by the tracer (daemon/python_reads.py)
    kind: str | None = None  # a scalar's kind (int, uint, float, bool, char, pointer, enum): how a write encodes it
    frame: FrameRef | None = None  # a paused frame's local or parameter (daemon/frame_reads.py)


Plain = Callable[[bytes, dict[str, str | None]], Any]


def raw_size(type_name: str) -> int | None:
    """The size a raw type implies (None for bytes)."""
    fmt = _RAW_FORMATS.get(type_name)
    return None if fmt is None else fmt[1]


def _render_raw(type_name: str) -> Render:
    fmt, _ = _RAW_FORMATS[type_name]

    def render(data: bytes, strings: dict[str, str | None]) -> dict[str, Any]:
        (value,) = struct.unpack(fmt, data[: struct.calcsize(fmt)])
        if type_name == "pointer":
            return {"value": None if value == 0 else hex(value)}
        return {"value": value}

    return render


def prepare_raw(address: str, size: int, type_name: str) -> PreparedRead:
    """A raw read at an absolute runtime address: no debug info involved."""
    expected = raw_size(type_name)
    if expected is not None and size != expected:
        return PreparedRead(address, type_name, size, error=(
            f"size {size} does not match type {type_name} ({expected} bytes); use size {expected}, or type "
            "'bytes' to dump a buffer"
        ))
    recipe: dict[str, object] = {
        "label": address, "address": hex(int(address, 16)), "derefs": [], "offset": 0, "size": size, "strings": [],
    }
    if type_name == "bytes":
        return PreparedRead(address, "bytes", size, recipe, is_bytes=True)
    render = _render_raw(type_name)
    kind = "float" if type_name.startswith("f") else "pointer" if type_name == "pointer" else (
        "int" if type_name.startswith("i") else "uint")
    return PreparedRead(address, type_name, size, recipe, render, direct=True,
                        plain=lambda data, strings: render(data, strings)["value"], kind=kind)


def describe_fields(layout: ValueLayout, value: dict[str, Any]) -> dict[str, Any]:
    """A decoded struct as the response shows it: {field: {type, value}} or, for an expanded nested
    struct, {field: {type, fields}}."""
    out: dict[str, Any] = {}
    for f in layout.fields:
        inner = value.get(f.name) if isinstance(value, dict) else None
        if f.layout.kind == "struct" and not f.layout.truncated and f.bit_size is None and isinstance(inner, dict):
            out[f.name] = {"type": f.layout.type_name, "fields": describe_fields(f.layout, inner)}
        else:
            out[f.name] = {"type": f.layout.type_name, "value": inner}
    return out


def _render_recipe(recipe: ReadRecipe) -> Render:
    def render(data: bytes, strings: dict[str, str | None]) -> dict[str, Any]:
        value = recipe.decode(data, strings_by_pointer(data, {int(k): v for k, v in strings.items()}))
        layout = recipe.layout
        if layout.kind == "struct" and not layout.truncated and recipe.bit_size is None and isinstance(value, dict):
            return {"fields": describe_fields(layout, value)}
        return {"value": value}

    return render


def _plain_recipe(recipe: ReadRecipe) -> Plain:
    def plain(data: bytes, strings: dict[str, str | None]) -> Any:
        return recipe.decode(data, strings_by_pointer(data, {int(k): v for k, v in strings.items()}))

    return plain


def prepare_variable(modules: Sequence[tuple[str, int]], text: str, depth: int) -> PreparedRead:
    """Resolve a variable expression in the first module (path, slide) that defines its root variable; the
    main binary comes first. Failures become the target's error: they never fail the other targets."""
    first_error: StrobeError | None = None
    for path, slide in modules:
        try:
            recipe = resolve_expression(variable_index(path), text, depth)
        except VariableNotFound as exc:
            first_error = first_error or exc
            continue
        except StrobeError as exc:
            if first_error is None or isinstance(first_error, VariableNotFound):
                first_error = exc
            continue
        return prepare_recipe(text, recipe, slide)
    message = first_error.message if first_error is not None else f"Variable '{text}' not found in debug symbols."
    return PreparedRead(text, "?", 0, error=message)


def prepare_recipe(label: str, recipe: ReadRecipe, slide: int, frame: FrameRef | None = None) -> PreparedRead:
    """A resolved expression ready for the agent, its root relocated by `slide` (0 for a runtime address)."""
    wire = recipe.to_wire(slide)
    wire.setdefault("strings", [])
    wire.pop("layout", None)  # the agent only copies bytes
    direct = (not recipe.derefs and recipe.bit_size is None and recipe.size in (1, 2, 4, 8)
              and recipe.layout.kind in _SCALAR_KINDS and not recipe.layout.cstring and frame is None)
    scalar = recipe.bit_size is None and recipe.layout.kind in _SCALAR_KINDS and not recipe.layout.cstring
    return PreparedRead(label, recipe.layout.type_name, recipe.size, wire, _render_recipe(recipe), direct=direct,
                        plain=_plain_recipe(recipe), kind=recipe.layout.kind if scalar else None, frame=frame)


def _bytes_file(directory: Path, session_id: str, data: bytes) -> Path:
    directory = directory / session_id  # one directory per session: deleted with it
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    stamp = time.time_ns()
    path = directory / f"{session_id}-{stamp // 1_000_000}-{stamp % 1_000_000:06d}.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return path


def preview(data: bytes) -> str:
    return " ".join(f"{b:02x}" for b in data[:PREVIEW_BYTES]) + (" …" if len(data) > PREVIEW_BYTES else "")


def result_of(
    target: PreparedRead, result: ReadResult | None, data: bytes, *, bytes_dir: Path | None, session_id: str
) -> dict[str, Any]:
    """The response entry of one target, from what the agent returned for it."""
    out: dict[str, Any] = {"target": target.label}
    if target.frame is not None:
        out.update(target.frame.answer())
    if target.error is not None:
        out["error"] = target.error
        return out
    if result is None:
        out["error"] = "The agent returned nothing for this target."
        return out
    if result.address is not None:
        out["address"] = result.address
    out["type"] = target.type_name
    if result.error is not None:
        out["error"] = result.error
        return out
    start = result.dataOffset or 0
    chunk = data[start : start + (result.size or 0)]
    out["size"] = len(chunk)
    if target.is_bytes:
        if bytes_dir is None:
            out["preview"] = preview(chunk)
        else:
            out["file"] = str(_bytes_file(bytes_dir, session_id, chunk))
            out["preview"] = preview(chunk)
        return out
    assert target.render is not None
    try:
        out.update(target.render(chunk, result.strings or {}))
    except (struct.error, ValueError, IndexError) as exc:
        out["error"] = f"Could not decode {len(chunk)} bytes as {target.type_name}: {exc}"
    return out


def pair_results(
    targets: Sequence[PreparedRead], results: Sequence[ReadResult]
) -> list[tuple[PreparedRead, ReadResult | None]]:
    """Each target with the agent's answer for it: the agent answers the recipes sent, in their order."""
    answers = iter(results)
    return [(t, next(answers, None) if t.recipe is not None else None) for t in targets]


def snapshot_values(
    targets: Sequence[PreparedRead], results: Sequence[ReadResult], data: bytes
) -> dict[str, Any]:
    """One poll tick as stored in the timeline: {label: value | {fields} | {"error": ...}}."""
    values: dict[str, Any] = {}
    for target, result in pair_results(targets, results):
        entry = result_of(target, result, data, bytes_dir=None, session_id="")
        if "error" in entry:
            values[target.label] = {"error": entry["error"]}
        elif "value" in entry:
            values[target.label] = entry["value"]
        elif "fields" in entry:
            values[target.label] = entry["fields"]
        else:
            values[target.label] = {"preview": entry.get("preview")}
    return values


# ---- polls ---------------------------------------------------------------------------------------


@dataclass
class Poll:
    poll_id: int
    targets: tuple[PreparedRead, ...]
    interval_ms: int
    duration_ms: int
    expected: int
    samples: int = 0
    state: str = "running"  # running | complete | process_exited

    def snapshot(self) -> PollState:
        return PollState(self.poll_id, tuple(t.label for t in self.targets), self.interval_ms, self.duration_ms,
                         self.expected, self.samples, self.state)


@dataclass(frozen=True)
class PollState:
    """A poll as debug_query reports it (mcp/wire.py shapes it)."""

    poll_id: int
    targets: tuple[str, ...]  # labels
    interval_ms: int
    duration_ms: int
    expected: int
    samples: int
    state: str


@dataclass
class SessionPolls:
    """The polls of one session. Snapshot callbacks arrive on Frida's threads; `rows` are built there from
    already-read bytes (cheap) and handed to the store by the caller."""

    polls: dict[int, Poll] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _next_id: int = 0

    def running(self) -> int:
        with self._lock:
            return sum(1 for p in self.polls.values() if p.state == "running")

    def add(self, targets: Sequence[PreparedRead], interval_ms: int, duration_ms: int) -> Poll:
        with self._lock:
            self._next_id += 1
            poll = Poll(self._next_id, tuple(targets), interval_ms, duration_ms, max(1, duration_ms // interval_ms))
            self.polls[poll.poll_id] = poll
            return poll

    def on_snapshot(self, snapshot: VariableSnapshot, data: bytes) -> dict[str, Any] | None:
        """The values of one tick, or None for a poll this session does not know."""
        with self._lock:
            poll = self.polls.get(snapshot.pollId)
            if poll is None:
                return None
            poll.samples += 1
        return snapshot_values(poll.targets, snapshot.results, data)

    def on_complete(self, done: PollComplete) -> None:
        with self._lock:
            poll = self.polls.get(done.pollId)
            if poll is not None and poll.state == "running":
                poll.state = "complete"
                if done.sampleCount != poll.samples:
                    log.info("poll %d: agent took %d samples, %d arrived", done.pollId, done.sampleCount,
                             poll.samples)

    def process_gone(self) -> None:
        with self._lock:
            for poll in self.polls.values():
                if poll.state == "running":
                    poll.state = "process_exited"

    def states(self) -> list[PollState]:
        with self._lock:
            return [p.snapshot() for p in self.polls.values()]


def snapshot_row(session: int, pid: int, ts_ns: int, values: dict[str, Any]) -> tuple[Any, ...]:
    """An events row (EVENT_COLUMNS order) for one poll tick."""
    text = json.dumps(values, separators=(",", ":"), default=str)
    return (session, ts_ns, int(EventKind.VARIABLE_SNAPSHOT), pid, None, None, None, None, None, None, None,
            text, None)
