"""Where a paused thread's step may end, from the line tables of the module it is paused in: the agent's StepPlan
(agent/src/native/stepping.ts does the stepping).

    plan, notes = step_plan(paused, "over", symbols)

- step over: the first instruction of every other line of the paused function (in the paused frame only: a
  recursive call's deeper frames do not count), and the return address (the function returned: the thread stops
  in its caller, in the middle of the calling line).
- step into: the same, and the entry of any function the current line calls that has line information (a call
  into a library without it is stepped over).
- step out: the return address only.
A function without line information can only be stepped out of: over and into do that, and say so.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from strobe.daemon.breakpoint_state import PausedThread
from strobe.daemon.symbols import ModuleSymbols, SessionSymbols
from strobe.instrument.protocol import CrashFrame
from strobe.instrument.requests import StepKind, StepPlan
from strobe.symbols.addresses import line_code_ranges, step_lines
from strobe.symbols.cfi import cfa_rule
from strobe.symbols.elf import read_loaded_bytes
from strobe.symbols.frame_walk import dwarf_registers

ENTRY_BYTES = 16  # the most of a function's start an Interceptor hook's jump replaces


def frame_address(paused: PausedThread, symbols: SessionSymbols) -> int | None:
    """The paused frame's CFA (its caller's stack pointer; the return address is just below it), from the call frame
    information and the thread's registers; None where it does not say."""
    module = module_of(paused.frames, symbols)
    rule = cfa_rule(module.path, paused.pc - module.slide) if module is not None else None
    if rule is None:
        return None
    base = dwarf_registers(paused.event.get("registers", {})).get(rule[0])
    return None if base is None else base + rule[1]


def step_plan(paused: PausedThread, kind: StepKind, symbols: SessionSymbols,
              return_address: int | None) -> tuple[StepPlan, list[str]]:
    """The agent's plan for stepping `paused` (`kind`: over, into, out), and notes for the answer. `return_address`:
    read at the frame's CFA - 8 (frame_address); None: the unwinder's frame 1 is taken."""
    notes: list[str] = []
    plan: StepPlan = {"kind": kind, "stops": [], "fromEntry": paused.entry, "callRanges": [], "intoRanges": []}
    if len(paused.frames) > 1:
        plan["returnTo"] = plan["unwoundReturn"] = paused.frames[1].address
    if return_address is not None:
        plan["returnTo"] = hex(return_address)
    elif kind == "out":
        raise LookupError("the backtrace has no caller frame to return to")
    if kind == "out":
        return plan, notes
    module = module_of(paused.frames, symbols)
    lines = step_lines(module.path, paused.pc - module.slide) if module is not None else None
    if module is None or lines is None:
        where = paused.event.get("function") or hex(paused.pc)
        if "returnTo" not in plan:
            raise LookupError(f"{where} has no line information and no caller frame to return to")
        notes.append(f"{where} has no line information: the step runs until it returns (as a step out).")
        plan["kind"] = "out"
        return plan, notes
    slide = module.slide
    plan["stops"] = [hex(address + slide) for address in lines.stops]
    plan["entry"] = hex(lines.function_start + slide)
    plan["entryCode"] = read_loaded_bytes(module.path, lines.function_start, ENTRY_BYTES).hex()
    if kind == "into":
        plan["callRanges"] = [(hex(low + slide), hex(high + slide)) for low, high in lines.line_code]
        plan["intoRanges"] = [(hex(low + m.slide), hex(high + m.slide))
                              for m in symbols.indexes for low, high in line_code_ranges(m.path)]
    return plan, notes


def module_of(frames: Sequence[CrashFrame], symbols: SessionSymbols) -> ModuleSymbols | None:
    """The indexed module a stopped thread is in (the module of its first frame)."""
    if not frames:
        return None
    path = os.path.realpath(frames[0].module)
    return next((m for m in symbols.indexes if os.path.realpath(m.path) == path), None)
