"""Locals and parameters of a crashed frame, read from a dump of its stack through their DWARF locations.

    frame_locals(path, function_start, frame_pointer, stack_base, stack)   # {"count": 3, "buf": "0x7ff..."}

Only the simple, common case: a variable whose location is one `DW_OP_fbreg(offset)` in a function whose
frame base is `DW_OP_call_frame_cfa` or `DW_OP_breg6 (rbp)`, with the frame pointer set up the usual way
(push rbp; mov rbp, rsp: the CFA is rbp + 16). That is how gcc and clang build at -O0 and with
-fno-omit-frame-pointer. The caller checks the frame pointer is really this frame's (its return address
sits at rbp + 8); values that lie outside the dump say so; register or location-list variables are left out.
"""

from __future__ import annotations

from typing import Any

from strobe.symbols.decode import decode
from strobe.symbols.dwarf_dies import AT_LOCATION, AT_TYPE, TAG_FORMAL_PARAMETER, TAG_LEXICAL_BLOCK, TAG_VARIABLE
from strobe.symbols.dwarf_forms import read_sleb
from strobe.symbols.types import read_size
from strobe.symbols.variables import variable_index

AT_FRAME_BASE = 0x40
_OP_FBREG = 0x91
_OP_BREG_RBP = 0x76  # DW_OP_breg6: rbp + offset
_OP_CALL_FRAME_CFA = 0x9C
_MAX_LOCALS = 64
_DEPTH = 2  # struct levels shown


def frame_locals(
    path: str, function_start: int, frame_pointer: int, stack_base: int, stack: bytes
) -> dict[str, Any] | None:
    """{name: value} of the function's frame-based locals and parameters (innermost blocks included, whether
    or not the pc is in them), or None when DWARF does not describe the function or its frame base."""
    index = variable_index(path)
    die = index.function_die(function_start)
    if die is None:
        return None
    with index.lock:  # the DIE reader and the type table are not thread-safe
        base = _frame_base(die.get(AT_FRAME_BASE), frame_pointer)
        if base is None:
            return None
        reader = index.types.reader
        out: dict[str, Any] = {}
        pending = list(reader.children(die))
        while pending and len(out) < _MAX_LOCALS:
            child = pending.pop(0)
            if child.tag == TAG_LEXICAL_BLOCK:
                pending.extend(reader.children(child))
                continue
            if child.tag not in (TAG_VARIABLE, TAG_FORMAL_PARAMETER) or child.name is None:
                continue
            offset = _fbreg(child.get(AT_LOCATION))
            if offset is None:
                continue
            layout = index.types.layout(child.ref(AT_TYPE), _DEPTH)
            at, size = base + offset - stack_base, read_size(layout)
            if at < 0 or at + size > len(stack):
                out[child.name] = f"<outside the dumped stack: {hex(base + offset)}>"
            else:
                out[child.name] = decode(layout, stack[at : at + size])
        return out


def _frame_base(expression: object, frame_pointer: int) -> int | None:
    if not isinstance(expression, bytes) or not expression:
        return None
    if expression == bytes([_OP_CALL_FRAME_CFA]):
        return frame_pointer + 16  # the caller's rsp before the call: above the return address and saved rbp
    if expression[0] == _OP_BREG_RBP:
        offset, end = read_sleb(expression, 1)
        return frame_pointer + offset if end == len(expression) else None
    return None


def _fbreg(location: object) -> int | None:
    if not isinstance(location, bytes) or not location or location[0] != _OP_FBREG:
        return None
    offset, end = read_sleb(location, 1)
    return offset if end == len(location) else None
