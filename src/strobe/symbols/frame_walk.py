"""Unwinding a stopped thread's stack, frame by frame, to where each frame of its backtrace keeps its variables.

    frames, states = unwind(frames, registers, StackDump(base, data), known=known_code(modules))
    states[1].cfa, states[1].registers[RBP]     # the caller's canonical frame address, its rbp

`frames` is the thread's backtrace (the agent's, agent/src/common/crash.ts): the pc first, then return addresses.
`registers` are the innermost frame's, by DWARF number (`dwarf_registers` turns the agent's names into them). Each
step uses the call frame information of the frame's code (symbols/cfi.py): the CFA is a register plus an offset,
the caller's rsp is the CFA, its rbp, rbx, r12-r15 are where the CFI says they were saved (or unchanged), and the
return address read from the stack must be the backtrace's next frame. That check is what keeps a wrong step from
passing for a frame: when the stack says otherwise (a return address Frida's hook of a traced function replaced, a
backtrace frame the agent found by scanning, a dump that ends too soon), the walk stops and every frame beyond
carries the reason instead of a state — unless the stack's return address is code the caller knows (`known`): then
the stack's chain replaces the backtrace's rest, and goes on past its end (Frida's unwinder stops early in code
without frame pointers). A frame whose code has no CFI still gets the registers it was entered with (its variables
may be rsp- or rbp-based) but ends the walk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from strobe.symbols.cfi import RETURN_ADDRESS, UnwindRule, has_unwind_info, unwind_rule

RBX, RBP, RSP = 3, 6, 7
# System V x86-64: the registers a callee keeps for its caller (and rsp, which the CFA gives).
CALLEE_SAVED = frozenset({RBX, RBP, 12, 13, 14, 15})
REGISTER_NAMES = ("rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13",
                  "r14", "r15")
_AGENT_NAMES = {"sp": "rsp"}
_WORD = 8

MAX_FRAMES = 64  # as many as the agent's backtrace holds

Rules = Callable[[str, int], UnwindRule | None]
Known = Callable[[int], "CodeFrame | None"]


@dataclass(frozen=True, slots=True)
class CodeFrame:
    """One backtrace frame: a runtime code address and the module it is in."""

    address: int
    module: str  # path of the loaded file
    slide: int  # runtime address - static address, for that module
    return_address: bool  # every frame but the innermost: the address after a call
    scanned: bool = False  # found by scanning the stack (a guess), not by the agent's unwinder
    unwound: bool = False  # found by this walk, past or instead of the agent's backtrace

    @property
    def static(self) -> int:
        """The static address the frame is looked up at: the call instruction's for a return address."""
        return self.address - self.slide - (1 if self.return_address else 0)


@dataclass(frozen=True, slots=True)
class StackDump:
    """Bytes of a thread's stack copied at `base`."""

    base: int
    data: bytes

    @property
    def end(self) -> int:
        return self.base + len(self.data)

    def covers(self, address: int, size: int) -> bool:
        return self.base <= address and address + size <= self.end

    def word(self, address: int) -> int | None:
        """The 8-byte little-endian value at `address`, or None outside the dump."""
        if not self.covers(address, _WORD):
            return None
        at = address - self.base
        return int.from_bytes(self.data[at : at + _WORD], "little")

    def read(self, address: int, size: int) -> bytes | None:
        if not self.covers(address, size):
            return None
        at = address - self.base
        return self.data[at : at + size]


@dataclass(frozen=True, slots=True)
class FrameState:
    """One frame as unwound: its CFA (None when its code has no usable CFI) and the registers whose values are known
    in it (DWARF numbers), or, for a frame the walk did not reach, why (`unreached`)."""

    cfa: int | None
    registers: Mapping[int, int] = field(default_factory=dict)
    unreached: str | None = None


def dwarf_registers(named: Mapping[str, str]) -> dict[int, int]:
    """The agent's register values ({"rax": "0x1", "sp": "0x7ff…"}) by DWARF register number."""
    out: dict[int, int] = {}
    for name, value in named.items():
        name = _AGENT_NAMES.get(name, name)
        if name in REGISTER_NAMES:
            try:
                out[REGISTER_NAMES.index(name)] = int(value, 16)
            except ValueError:
                continue
    return out


def unwind(frames: Sequence[CodeFrame], registers: Mapping[int, int], stack: StackDump,
           rules: Rules = unwind_rule, known: Known | None = None,
           limit: int = MAX_FRAMES) -> tuple[list[CodeFrame], list[FrameState]]:
    """The frames and a FrameState for each (see the module docstring); `rules(module, static)` gives the CFI.

    With `known` (a return address -> its CodeFrame, when it is code with CFI of a module known to the caller) the
    walk goes on past the last frame of `frames` (frames the agent's unwinder missed: Rust code without frame
    pointers), and where the stack's return address is known code but not the next frame of `frames` (a repeated
    frame the agent's unwinder made up) the stack's chain replaces the rest. Those frames are marked `unwound`."""
    chain = list(frames[:limit])
    states: list[FrameState] = []
    known_registers: dict[int, int] = dict(registers)
    stop: str | None = None
    i = 0
    while i < len(chain):
        frame = chain[i]
        if stop is not None:
            states.append(FrameState(None, unreached=stop))
            i += 1
            continue
        rule = rules(frame.module, frame.static)
        if rule is None or rule.cfa_register is None or rule.cfa_register not in known_registers:
            why = ("no call frame information" if rule is None else "its call frame address is not a register plus "
                   "an offset" if rule.cfa_register is None else
                   f"{_name(rule.cfa_register)} is not known there")
            states.append(FrameState(None, known_registers))
            stop = f"the stack could not be unwound past frame {i} ({why})"
            i += 1
            continue
        cfa = known_registers[rule.cfa_register] + rule.cfa_offset
        states.append(FrameState(cfa, known_registers))
        expected = chain[i + 1] if i + 1 < len(chain) else None
        if expected is None and (known is None or len(chain) >= limit):
            break
        returns, caller, why = _caller(rule, cfa, known_registers, stack, i)
        if returns is None:
            stop = why
        elif expected is not None and returns == expected.address:
            known_registers = caller
        elif i + 1 < limit and (found := known(returns) if known is not None else None) is not None:
            chain[i + 1 :] = [found]  # the stack's chain: the agent's next frames are not on it
            known_registers = caller
        elif expected is not None:
            guessed = " (found by scanning the stack)" if expected.scanned else ""
            stop = (f"the return address on the stack ({returns:#x}) is not the backtrace's next frame "
                    f"({expected.address:#x}{guessed}): a traced function's return through Frida's hook, or a "
                    "frame the backtrace got wrong")
        i += 1
    return chain, states


def _caller(rule: UnwindRule, cfa: int, known: Mapping[int, int], stack: StackDump,
            i: int) -> tuple[int | None, dict[int, int], str]:
    """(the return address, the caller's known registers), or (None, {}, why frame i + 1 cannot be reached)."""
    where = rule.saved.get(RETURN_ADDRESS)
    if rule.outermost or where is None:
        return None, {}, f"frame {i} is the outermost one its call frame information describes"
    returns = stack.word(cfa + where)
    if returns is None:
        return None, {}, f"frame {i}'s return address ({cfa + where:#x}) is outside the dumped stack"
    caller = {r: v for r, v in known.items() if r in CALLEE_SAVED and r not in rule.lost}
    for register, offset in rule.saved.items():
        if register == RETURN_ADDRESS:
            continue
        value = stack.word(cfa + offset)
        if value is None:
            caller.pop(register, None)
        else:
            caller[register] = value
    caller[RSP] = cfa
    return returns, caller, ""


def known_code(modules: Iterable[tuple[str, int]]) -> Known:
    """`unwind`'s `known` for these modules (path, slide): a return address in code their CFI covers."""
    chosen = list(dict.fromkeys(modules))

    def find(address: int) -> CodeFrame | None:
        for path, slide in chosen:
            if has_unwind_info(path, address - slide - 1):
                return CodeFrame(address, path, slide, return_address=True, unwound=True)
        return None

    return find


def _name(register: int) -> str:
    return REGISTER_NAMES[register] if 0 <= register < len(REGISTER_NAMES) else f"register {register}"
