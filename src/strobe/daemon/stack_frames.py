"""The frames of a stopped thread (a breakpoint's pause, a crash) with their variables, from its registers, its
backtrace and a dump of its stack: the part of a pause or crash event that says what each frame holds, and the
scopes debug_read and debug_write find a paused frame's locals in (daemon/frame_reads.py).

    frames = thread_frames(report.frames, report.registers, StackDump(base, stack), locations)
    frame_fields(frames[1], stack)    # {"locals": {"id": 3, ...}} or {"localsNotCaptured": "why"}
    frame_scope(frames[1])            # FrameScope (symbols/frame_locals.py), or FrameUnreadable saying why

The stack is unwound through the call frame information of each frame's code (symbols/frame_walk.py), so frames
are found with or without frame pointers; a frame whose variables cannot be read says why (no debug info, the
walk stopped before it, its frame not set up yet at the function's entry) and is never shown empty or guessed.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from strobe.errors import NoDebugSymbols, StrobeError
from strobe.instrument.protocol import CrashFrame
from strobe.symbols.addresses import SourceLocation
from strobe.symbols.elf import read_elf_info
from strobe.symbols.frame_locals import FrameScope, FrameUnreadable, frame_values, frame_variables
from strobe.symbols.frame_walk import (
    MAX_FRAMES,
    CodeFrame,
    FrameState,
    StackDump,
    dwarf_registers,
    known_code,
    unwind,
)
from strobe.symbols.variables import variable_index

log = logging.getLogger(__name__)

Locate = Callable[[str, int], SourceLocation | None]

MAX_FRAMES_WITH_LOCALS = 16  # frames of a pause event whose locals are shown (debug_read reads the others)
AT_ENTRY = ("at the function's entry its frame is not set up yet: its arguments are still in registers (see "
            "`arguments`); the callers' frames are")


@dataclass(frozen=True, slots=True)
class ThreadFrame:
    """One backtrace frame of a stopped thread: where its code is, its source location, and its unwound state."""

    index: int
    code: CodeFrame | None  # None: its module is not a file that can be read
    location: SourceLocation | None
    state: FrameState
    entry: bool = False  # the innermost frame, stopped at its function's first instruction

    @property
    def function(self) -> str | None:
        return self.location.function if self.location is not None else None


def thread_frames(frames: Sequence[CrashFrame], registers: Mapping[str, str], stack: StackDump,
                  locations: Sequence[SourceLocation | None], locate: Locate | None = None, at_entry: bool = False,
                  limit: int = MAX_FRAMES) -> list[ThreadFrame]:
    """The frames (at most `limit`) unwound from `registers` through `stack`; `locations`: each frame's source
    location (symbols/addresses.locate, at the call for a return address); `at_entry`: the innermost frame is at its
    function's first instruction (a function breakpoint's hook). With `locate`, the stack's own chain of frames
    through the backtrace's modules replaces a wrong rest of the backtrace and goes on past its end (frames marked
    `unwound`, located with it; symbols/frame_walk.py)."""
    chosen = list(frames[:limit])
    codes = [_code_frame(f) for f in chosen]
    readable = next((i for i, code in enumerate(codes) if code is None), len(codes))
    start = [c for c in codes[:readable] if c is not None]
    known = known_code((c.module, c.slide) for c in start) if locate is not None else None
    chain, states = unwind(start, dwarf_registers(registers), stack, known=known, limit=limit)
    out: list[ThreadFrame] = []
    for i, (code, state) in enumerate(zip(chain, states, strict=True)):
        where = _locate(locate, code) if code.unwound and locate is not None else (
            locations[i] if i < len(locations) else None)
        starts = where is not None and code.address - code.slide == where.function_start
        out.append(ThreadFrame(i, code, where, state, i == 0 and (at_entry or starts)))
    if len(chain) == readable < len(codes):  # the agent's frames from one in a module that cannot be read
        module = os.path.basename(chosen[readable].module)
        unreached = FrameState(None, unreached=f"the stack could not be unwound past frame {readable - 1} (the next "
                                                f"frame's module, {module}, cannot be read)")
        out += [ThreadFrame(i, None, locations[i] if i < len(locations) else None, unreached)
                for i in range(readable, len(codes))]
    return out


def frame_scope(frame: ThreadFrame, at_entry_too: bool = False) -> FrameScope:
    """The variables of a frame; FrameUnreadable saying why there are none to read. `at_entry_too`: list them for a
    frame at its function's entry as well (their names: their values are not there yet)."""
    if frame.state.unreached is not None:
        raise FrameUnreadable(frame.state.unreached)
    code, where = frame.code, frame.location
    if code is None:
        raise FrameUnreadable("its module cannot be read")
    module = os.path.basename(code.module)
    if where is None or where.function_start is None:
        raise FrameUnreadable(f"no function of {module} with debug info is at {code.address:#x}")
    if frame.entry and not at_entry_too:
        raise FrameUnreadable(AT_ENTRY)
    try:
        return frame_variables(variable_index(code.module), where.function_start, code.static, frame.state,
                               code.slide)
    except NoDebugSymbols:
        raise FrameUnreadable(f"{module} has no debug info") from None
    except StrobeError as exc:
        raise FrameUnreadable(exc.message) from None


def frame_fields(frame: ThreadFrame, stack: StackDump) -> dict[str, Any]:
    """What a pause event shows of a frame's variables: {"locals": {name: value}} or {"localsNotCaptured": why}."""
    try:
        scope = frame_scope(frame)
        return {"locals": frame_values(scope, stack)}
    except FrameUnreadable as exc:
        return {"localsNotCaptured": exc.message}
    except Exception:  # the variables are an extra: the rest of the event stands
        log.exception("cannot read the variables of frame %d (%s)", frame.index, frame.function)
        return {"localsNotCaptured": "an internal error while reading them (see the daemon's log)"}


def locate_frame(frame: CrashFrame, locate: Locate) -> SourceLocation | None:
    """An agent's frame's source location (at the call for a return address), or None."""
    code = _code_frame(frame)
    return None if code is None else _locate(locate, code)


def _locate(locate: Locate, code: CodeFrame) -> SourceLocation | None:
    try:
        return locate(code.module, code.static)
    except Exception:  # symbolizing is best effort: the frame keeps its address
        log.exception("cannot locate %#x in %s", code.address, code.module)
        return None


def _code_frame(frame: CrashFrame) -> CodeFrame | None:
    try:
        slide = int(frame.base, 16) - image_base(frame.module)
        return CodeFrame(int(frame.address, 16), frame.module, slide, frame.returnAddress, frame.scanned)
    except (ValueError, OSError, StrobeError):
        return None


@functools.lru_cache(maxsize=64)
def image_base(path: str) -> int:
    """The image base of an ELF file (ValueError when it is not one: a vdso, a deleted file)."""
    try:
        return read_elf_info(path).image_base
    except Exception:  # not readable as ELF
        raise ValueError(f"{path}: not an ELF file") from None
