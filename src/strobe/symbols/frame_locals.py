"""The parameters and locals of one frame of a stopped thread, where they are and what they hold.

    scope = frame_variables(variable_index(path), function_start, pc, state, slide)   # FrameUnreadable: why not
    scope.variables["qty"].address                                                   # runtime, or None + missing
    frame_values(scope, stack)                                                       # {"qty": 150, "p": "0x5…"}

`function_start` and `pc` are static addresses (`pc`: where the frame is, the call instruction for a caller's);
`state` is the frame as symbols/frame_walk.py unwound it (its CFA, the registers known in it); `slide` relocates the
module's static addresses. The variables are those in scope at `pc`: the function's parameters, its top-level
locals and those of each lexical block that holds `pc` (an inner one hides an outer one of the same name); inlined
calls are left out. The frame base may be DW_OP_call_frame_cfa (gcc), DW_OP_reg6/breg6 (rbp: clang) or
DW_OP_reg7/breg7 (rsp: Rust debug builds); a variable at DW_OP_fbreg, DW_OP_bregN of a known register (either one
followed by DW_OP_deref: the slot holds a pointer to it, as Rust's closures capture), or a fixed address (a
function's static) has an address. The others say why they have none (`missing`), and are never guessed
at: no location ("optimised out"), a register ("in register rbx"), a location list or a computed one. `frame_values`
shows them as "<optimised out>", "<in register rbx: not captured>".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from strobe.symbols.decode import decode
from strobe.symbols.dwarf_dies import (
    AT_CONST_VALUE,
    AT_LOCATION,
    AT_TYPE,
    TAG_FORMAL_PARAMETER,
    TAG_LEXICAL_BLOCK,
    TAG_VARIABLE,
    Die,
    DieReader,
)
from strobe.symbols.dwarf_forms import DECODE_ERRORS, read_sleb
from strobe.symbols.frame_walk import REGISTER_NAMES, FrameState, StackDump
from strobe.symbols.types import read_size
from strobe.symbols.variables import VariableIndex

AT_FRAME_BASE = 0x40
OPTIMISED_OUT = "optimised out"
MAX_VARIABLES = 64
EVENT_DEPTH = 2  # struct levels a pause or crash event shows

_OP_ADDR = 0x03
_OP_DEREF = 0x06
_OP_REG0, _OP_REG31 = 0x50, 0x6F
_OP_BREG0, _OP_BREG31 = 0x70, 0x8F
_OP_FBREG = 0x91
_OP_CALL_FRAME_CFA = 0x9C
_OP_STACK_VALUE = 0x9F
_DEREFERENCED = frozenset({_OP_FBREG, *range(_OP_BREG0, _OP_BREG31 + 1)})  # "base + n, then deref": followed
DW_LANG_RUST = 0x1C


class FrameUnreadable(Exception):
    """A frame whose variables cannot be located at all; the message says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True, slots=True)
class FrameVariable:
    name: str
    parameter: bool
    type_die: int | None
    address: int | None = None  # runtime address of its bytes
    missing: str | None = None  # why it has no address: "optimised out", "in register rbx"
    constant: int | None = None  # a DW_AT_const_value: the value itself, nowhere in memory
    static: bool = False  # a function's static: at a fixed address, not in the frame
    indirect: bool = False  # `address` holds a pointer to its bytes (DW_OP_fbreg n, DW_OP_deref: Rust captures)


@dataclass(frozen=True, slots=True)
class FrameScope:
    """The variables in scope in one frame, by name, parameters first."""

    function: str | None
    variables: dict[str, FrameVariable]
    index: VariableIndex
    language: int = 0  # the compile unit's DW_AT_language (DW_LANG_Rust: 0x1c)

    @property
    def rust(self) -> bool:
        return self.language == DW_LANG_RUST


def frame_variables(index: VariableIndex, function_start: int, pc: int, state: FrameState,
                    slide: int) -> FrameScope:
    """The frame's variables (see the module docstring); FrameUnreadable when none can be located."""
    die = index.function_die(function_start)
    if die is None:
        raise FrameUnreadable("no debug info describes this function")
    with index.lock:  # the DIE reader and the type table are not thread-safe
        reader = index.types.reader
        base = _frame_base(die.get(AT_FRAME_BASE), state)
        found: dict[str, FrameVariable] = {}
        _collect(reader, die, pc, state, slide, base, found)
        return FrameScope(die.name, found, index, die.unit.language)


def frame_values(scope: FrameScope, stack: StackDump, depth: int = EVENT_DEPTH) -> dict[str, Any]:
    """{name: value} read from a dump of the stack; what cannot be read is a "<…>" string saying why."""
    out: dict[str, Any] = {}
    index = scope.index
    with index.lock:
        for name, variable in scope.variables.items():
            if variable.constant is not None:
                out[name] = variable.constant
            elif variable.address is None:
                out[name] = shown_missing(variable.missing or "not located")
            elif variable.static:
                out[name] = f"<a static, at {variable.address:#x}: read it with debug_read>"
            else:
                out[name] = _value(index, variable, variable.address, stack, depth)
    return out


def _value(index: VariableIndex, variable: FrameVariable, address: int, stack: StackDump, depth: int) -> Any:
    if variable.indirect:
        pointer = stack.word(address)
        if pointer is None:
            return f"<outside the dumped stack, at {address:#x}: not captured>"
        address = pointer
    layout = index.types.layout(variable.type_die, depth)
    data = stack.read(address, read_size(layout))
    if data is not None:
        return decode(layout, data)
    if variable.indirect:
        return f"<at {address:#x}, outside the dumped stack: read it with debug_read>"
    return f"<outside the dumped stack, at {address:#x}: not captured>"


def shown_missing(why: str) -> str:
    """How a value that is not captured shows in an event: "<optimised out>", "<in register rbx: not captured>"."""
    return f"<{why}>" if why == OPTIMISED_OUT else f"<{why}: not captured>"


def _collect(reader: DieReader, scope: Die, pc: int, state: FrameState, slide: int, base: Callable[[], int],
             found: dict[str, FrameVariable]) -> None:
    """Variables of `scope`, then of its blocks that hold `pc` (inner ones last: they hide outer names)."""
    blocks: list[Die] = []
    for child in reader.children(scope):
        if child.tag == TAG_LEXICAL_BLOCK:
            blocks.append(child)
        elif child.tag in (TAG_VARIABLE, TAG_FORMAL_PARAMETER) and child.name is not None:
            if len(found) >= MAX_VARIABLES and child.name not in found:
                continue
            found[child.name] = _variable(child, state, slide, base)
    for block in blocks:
        try:
            ranges = reader.ranges(block)
        except (ValueError, *DECODE_ERRORS):
            ranges = []
        if not ranges or any(low <= pc < high for low, high in ranges):
            _collect(reader, block, pc, state, slide, base, found)


def _variable(die: Die, state: FrameState, slide: int, base: Callable[[], int]) -> FrameVariable:
    name, parameter, type_die = str(die.name), die.tag == TAG_FORMAL_PARAMETER, die.ref(AT_TYPE)
    location = die.get(AT_LOCATION)
    if location is None:
        constant = die.get(AT_CONST_VALUE)
        if isinstance(constant, int) and not isinstance(constant, bool):
            return FrameVariable(name, parameter, type_die, constant=constant)
        return FrameVariable(name, parameter, type_die, missing=OPTIMISED_OUT)
    if not isinstance(location, bytes):
        return FrameVariable(name, parameter, type_die, missing=(
            "its location changes with the pc (a location list: optimised code)"))
    indirect = len(location) > 1 and location[-1] == _OP_DEREF and location[0] in _DEREFERENCED
    try:
        address, static = _address(location[:-1] if indirect else location, state, slide, base)
    except FrameUnreadable as exc:
        return FrameVariable(name, parameter, type_die, missing=exc.message)
    return FrameVariable(name, parameter, type_die, address=address, static=static, indirect=indirect)


def _address(expression: bytes, state: FrameState, slide: int, base: Callable[[], int]) -> tuple[int, bool]:
    """Where a variable located by `expression` is: (runtime address, is a static); FrameUnreadable otherwise."""
    if not expression:
        raise FrameUnreadable(OPTIMISED_OUT)
    op = expression[0]
    if op == _OP_FBREG:
        offset, end = read_sleb(expression, 1)
        if end == len(expression):
            return base() + offset, False
    elif _OP_BREG0 <= op <= _OP_BREG31:
        offset, end = read_sleb(expression, 1)
        if end == len(expression):
            return _register(state, op - _OP_BREG0) + offset, False
    elif op == _OP_ADDR and len(expression) == 9:
        return int.from_bytes(expression[1:9], "little") + slide, True
    elif _OP_REG0 <= op <= _OP_REG31 and len(expression) == 1:
        raise FrameUnreadable(f"in register {_register_name(op - _OP_REG0)}")
    if expression[-1] == _OP_STACK_VALUE:
        raise FrameUnreadable("a value computed from others (optimised code)")
    raise FrameUnreadable(f"at a location DWARF computes ({expression.hex()}), not followed")


def _frame_base(expression: object, state: FrameState) -> Callable[[], int]:
    """The frame base, evaluated when a variable needs it (FrameUnreadable then, saying why not)."""

    def fail(why: str) -> Callable[[], int]:
        def raise_() -> int:
            raise FrameUnreadable(why)

        return raise_

    if not isinstance(expression, bytes) or not expression:
        return fail("the function has no frame base")
    op = expression[0]
    if expression == bytes([_OP_CALL_FRAME_CFA]):
        cfa = state.cfa
        return fail("its frame's call frame address is not known") if cfa is None else lambda: cfa
    if _OP_REG0 <= op <= _OP_REG31 and len(expression) == 1:
        return lambda: _register(state, op - _OP_REG0)
    if _OP_BREG0 <= op <= _OP_BREG31:
        offset, end = read_sleb(expression, 1)
        if end == len(expression):
            return lambda: _register(state, op - _OP_BREG0) + offset
    return fail(f"frame base {expression.hex()} is not supported")


def _register(state: FrameState, register: int) -> int:
    value = state.registers.get(register)
    if value is None:
        raise FrameUnreadable(f"based on {_register_name(register)}, which is not known in this frame")
    return value


def _register_name(register: int) -> str:
    return REGISTER_NAMES[register] if register < len(REGISTER_NAMES) else f"register {register}"

