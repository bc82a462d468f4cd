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
from typing import Literal

from strobe.daemon.breakpoint_state import PausedThread
from strobe.daemon.symbols import ModuleSymbols, SessionSymbols
from strobe.instrument.protocol import StepPlan
from strobe.symbols.addresses import line_code_ranges, step_lines
from strobe.symbols.cfi import cfa_rule
from strobe.symbols.elf import read_loaded_bytes

StepKind = Literal["over", "into", "out"]

ENTRY_BYTES = 16  # the most of a function's start an Interceptor hook's jump replaces
_CFA_REGISTERS = {7: "sp", 6: "rbp"}  # DWARF register numbers of x86-64 a CFA rule uses


def frame_address(paused: PausedThread, symbols: SessionSymbols) -> int | None:
    """The paused frame's CFA (its caller's stack pointer; the return address is just below it), from the call frame
    information and the thread's registers; None where it does not say."""
    module = _module_of(paused, symbols)
    rule = cfa_rule(module.path, paused.pc - module.slide) if module is not None else None
    registers = paused.event.get("registers", {})
    name = _CFA_REGISTERS.get(rule[0]) if rule is not None else None
    if rule is None or name is None or name not in registers:
        return None
    return int(registers[name], 16) + rule[1]


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
    module = _module_of(paused, symbols)
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


def _module_of(paused: PausedThread, symbols: SessionSymbols) -> ModuleSymbols | None:
    if not paused.frames:
        return None
    path = os.path.realpath(paused.frames[0].module)
    return next((m for m in symbols.indexes if os.path.realpath(m.path) == path), None)
