"""debug_read and debug_write of the parameters and locals of a paused thread's frames.

    ref = VariableRef("total", thread=4242, frame=1)    # frame 1 of the thread paused at a breakpoint
    stack = await read_paused_stack(run, live, paused)  # its live stack, unwound (daemon/stack_frames.py)
    local_target(stack, 1, "total", depth=1)           # a PreparedRead whose address is that frame's slot

The thread is stopped, so its stack is stable: it is read again from the process (64 KiB up from the stack pointer)
and unwound as the pause event's frames were, and a variable's address comes from its frame and its DWARF location.
Its value is then read (or written) at that address like a global's, through its type: `.field`, `->field` and
`[index]` steps included. A name without `frame` or `threadId` is a local of the innermost frame of the one paused
thread when that frame has it (as in the source, it hides a global of the same name), else a global. What cannot
be read says why: no paused thread, an unknown thread or frame, a name the frame does not have (with the names it
has), a variable the compiler keeps in a register or left out.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from strobe.daemon.breakpoint_state import PausedThread
from strobe.daemon.live import LiveSession
from strobe.daemon.memory import READ_TIMEOUT_S, FrameRef, PreparedRead, prepare_recipe
from strobe.daemon.stack_frames import ThreadFrame, frame_scope, locate_frame, thread_frames
from strobe.errors import StrobeError
from strobe.symbols.addresses import locate
from strobe.symbols.expressions import parse, resolve_at
from strobe.symbols.frame_locals import OPTIMISED_OUT, FrameScope, FrameUnreadable
from strobe.symbols.frame_walk import StackDump

STACK_WINDOW = 64 * 1024  # bytes of a paused thread's stack read up from its stack pointer
RED_ZONE = 128  # below the stack pointer: a leaf function's locals may be there
# Measured with rustc 1.95 debug builds: an immutable binding's DWARF slot is a copy kept for the debugger (rustc's
# `.dbg.spill`); the code reads its own copy, so a write there changes what is read back, not what the code does.
RUST_COPY = ("Rust debug builds keep an immutable binding (`let x`, a parameter) in a slot of its own for the "
             "debugger, and the code goes on with its own copy: this write may not change what the program does. A "
             "`let mut` binding's slot is its storage: writes to it take effect.")

T = TypeVar("T")
Run = Callable[[Callable[[], T]], Awaitable[T]]


@dataclass(frozen=True)
class VariableRef:
    """A variable as debug_read and debug_write name it: an expression, and a paused thread's frame to find its root
    in (`thread`, `frame`), if either is given."""

    expression: str
    thread: int | None = None
    frame: int | None = None

    @property
    def pinned(self) -> bool:
        return self.thread is not None or self.frame is not None


@dataclass(frozen=True)
class PausedStack:
    """A paused thread's frames, unwound from its live stack, or why they could not be (`error`)."""

    paused: PausedThread
    frames: tuple[ThreadFrame, ...] = ()
    error: str | None = None


async def read_paused_stack(run: Run[Any], live: LiveSession, paused: PausedThread) -> PausedStack:
    """Read the paused thread's stack from its process and unwind it (see the module docstring)."""
    process = live.processes.get(paused.pid)
    registers: dict[str, str] = dict(paused.event.get("registers") or {})
    if process is None or process.ended:
        return PausedStack(paused, error="its process has ended")
    try:
        sp = int(registers["sp"], 16)
        window = await asyncio.to_thread(_stack_window, paused.pid, sp)
    except (KeyError, ValueError, OSError) as exc:
        return PausedStack(paused, error=f"its stack cannot be found ({exc})")
    if window is None:
        return PausedStack(paused, error=f"its stack pointer {sp:#x} is in no mapping")
    start, size = window
    recipe: dict[str, object] = {"label": "stack", "address": hex(start), "derefs": [], "offset": 0, "size": size,
                                 "strings": []}
    handle = process.handle
    reply, data = await run(lambda: handle.read_memory([recipe], READ_TIMEOUT_S))
    read = reply.results[0] if reply.results else None
    if read is None or read.error is not None or read.dataOffset is None:
        return PausedStack(paused, error=f"its stack could not be read ({read.error if read else 'no answer'})")
    dump = StackDump(start, data[read.dataOffset : read.dataOffset + (read.size or 0)])
    frames = await asyncio.to_thread(_unwound, paused, registers, dump)
    if not frames:
        return PausedStack(paused, error="its pc is not in a module's code, so its frames cannot be unwound")
    return PausedStack(paused, tuple(frames))


def local_target(stack: PausedStack, index: int, expression: str, depth: int) -> PreparedRead:
    """A read of `expression` rooted in frame `index` of the paused thread; a per-target error saying why not."""
    paused = stack.paused
    if stack.error is not None:
        return _failed(expression, f"The frames of paused thread {paused.tid} cannot be read: {stack.error}.")
    count = len(stack.frames)
    if not 0 <= index < count:
        return _failed(expression, f"Thread {paused.tid} has {count} frames (0-{count - 1}), not a frame {index}: "
                                   "the pause event's backtrace lists them, the innermost first.")
    frame = stack.frames[index]
    ref = FrameRef(paused.pid, paused.tid, index, frame.function, paused)
    try:
        root, _ = parse(expression)
        scope = frame_scope(frame)
    except FrameUnreadable as exc:
        return _failed(expression, f"The variables of frame {index} ({frame.function or '?'}) of thread "
                                   f"{paused.tid} cannot be read: {exc.message}.", ref)
    except StrobeError as exc:
        return _failed(expression, exc.message, ref)
    return _in_scope(scope, root, expression, depth, ref)


def shadowing_local(stack: PausedStack, expression: str, depth: int) -> PreparedRead | None:
    """The innermost frame's variable `expression` starts with, when it has one (it hides a global of that name)."""
    if stack.error is not None or not stack.frames:
        return None
    try:
        root, _ = parse(expression)
        scope = frame_scope(stack.frames[0])
    except (FrameUnreadable, StrobeError):
        return None
    if root not in scope.variables:
        return None
    paused = stack.paused
    return _in_scope(scope, root, expression, depth, FrameRef(paused.pid, paused.tid, 0, stack.frames[0].function,
                                                              paused))


def local_hint(stacks: Sequence[PausedStack], expression: str) -> str | None:
    """Where the paused frames have a variable named like `expression`'s root, said as what to ask instead."""
    try:
        root, _ = parse(expression)
    except StrobeError:
        return None
    for stack in stacks:
        for frame in stack.frames:
            try:
                scope = frame_scope(frame, at_entry_too=True)
            except FrameUnreadable:
                continue
            if root not in scope.variables:
                continue
            where = f"frame {frame.index} ({frame.function}) of paused thread {stack.paused.tid}"
            if frame.entry:
                return (f"'{root}' is a parameter of {where}, stopped at its entry: its frame is not set up yet, the "
                        "value is still in a register (the pause event's `arguments` shows it). Break at a line "
                        "inside the function to read it, or read the callers' variables with frame: 1 and up.")
            return (f"'{root}' is a variable of {where}: name it with threadId: {stack.paused.tid}, "
                    f"frame: {frame.index}.")
    return None


def choose_paused(paused: Sequence[PausedThread], thread: int | None, session_id: str) -> PausedThread | str:
    """The paused thread a pinned reference means, or why there is none."""
    listed = ", ".join(f"{p.tid} ({p.event.get('function') or '?'})" for p in paused)
    if not paused:
        return (f"No thread is paused in session {session_id}: `threadId` and `frame` name a paused thread's frame (a "
                "thread stops at a breakpoint: debug_breakpoint). Without them the name is read as a global.")
    if thread is None:
        if len(paused) == 1:
            return paused[0]
        return f"{len(paused)} threads are paused ({listed}): give threadId to say whose frame."
    chosen = next((p for p in paused if p.tid == thread), None)
    return chosen if chosen is not None else f"Thread {thread} is not paused; paused: {listed}."


def frame_error(prepared: PreparedRead, error: str) -> PreparedRead:
    """A resolved local that can no longer be read or written (its thread went on)."""
    return PreparedRead(prepared.label, prepared.type_name, prepared.size, error=error, frame=prepared.frame)


def _in_scope(scope: FrameScope, root: str, expression: str, depth: int, ref: FrameRef) -> PreparedRead:
    where = f"{ref.function or '?'} (frame {ref.frame} of thread {ref.thread})"
    variable = scope.variables.get(root)
    if variable is None:
        names = list(scope.variables)
        close = difflib.get_close_matches(root, names, n=3, cutoff=0.6)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        listed = ", ".join(names[:40]) or "none"
        return _failed(expression, f"'{root}' is not a parameter or local of {where} in scope where it is stopped."
                                   f"{hint} Its variables: {listed}. For a global, give no frame or threadId.", ref)
    if variable.constant is not None:
        return _failed(expression, f"'{root}' of {where} is a constant the compiler folded (value "
                                   f"{variable.constant}): it is in no memory, so it cannot be read or written.", ref)
    if variable.address is None:
        why = variable.missing or "not located"
        message = (f"'{root}' of {where} is optimised out: the compiler kept no copy of it here."
                   if why == OPTIMISED_OUT else f"'{root}' of {where} has no address to read or write: {why}.")
        return _failed(expression, message + " A build without optimisation (-O0, a debug profile) keeps every "
                                             "variable in memory.", ref)
    try:
        recipe = resolve_at(scope.index, expression, variable.address, variable.type_die, depth, variable.indirect)
    except StrobeError as exc:
        return _failed(expression, exc.message, ref)
    if scope.rust:
        ref = dataclasses.replace(ref, write_note=RUST_COPY)
    return prepare_recipe(expression, recipe, 0, ref)


def _failed(expression: str, error: str, ref: FrameRef | None = None) -> PreparedRead:
    return PreparedRead(expression, "?", 0, error=error, frame=ref)


def _stack_window(pid: int, sp: int) -> tuple[int, int] | None:
    """The stack to read: from the red zone below `sp` up STACK_WINDOW bytes, within the mapping that holds `sp`."""
    with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            low, high = (int(part, 16) for part in line.split(maxsplit=1)[0].split("-"))
            if low <= sp < high:
                start = max(low, sp - RED_ZONE)
                return start, min(high - start, STACK_WINDOW)
    return None


def _unwound(paused: PausedThread, registers: dict[str, str], dump: StackDump) -> list[ThreadFrame]:
    """The agent's frames of the pause unwound again through the live stack, as the pause event's were (the same
    stack and call frame information: the same frames, numbered as the event's backtrace)."""
    frames = paused.frames
    if not frames or int(frames[0].address, 16) != int(registers.get("pc", "0x0"), 16):
        return []  # the pc is in no module (Frida's copy of the code): nothing can be unwound from it
    locations = [locate_frame(frame, locate) for frame in frames]
    return thread_frames(frames, registers, dump, locations, locate=locate, at_entry=paused.entry)
