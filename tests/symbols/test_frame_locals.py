"""frame_variables(): which variables are in scope at a pc and where they are, for gcc -O0 (frame base: the CFA) and
Rust debug builds (frame base: rsp), compared with the DWARF locations pyelftools decodes; frame_values() over a
fabricated stack; and every location form a variable can have, on fabricated DIEs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from elftools.elf.elffile import ELFFile

from strobe.symbols.addresses import line_sites
from strobe.symbols.dwarf_dies import AT_CONST_VALUE, AT_LOCATION, AT_NAME, TAG_VARIABLE, Die
from strobe.symbols.expressions import resolve_at
from strobe.symbols.frame_locals import (
    OPTIMISED_OUT,
    FrameScope,
    FrameUnreadable,
    FrameVariable,
    _frame_base,
    _variable,
    frame_values,
    frame_variables,
)
from strobe.symbols.frame_walk import RBP, RBX, RSP, FrameState, StackDump
from strobe.symbols.index import build_index
from strobe.symbols.variables import variable_index

TARGETS = Path(__file__).parents[1] / "targets"
CFA = 0x7FFF_1000


def fbreg_offsets(path: Path, function: str) -> dict[str, int]:
    """name -> DW_OP_fbreg offset of the function's variables, as pyelftools decodes them (the reference)."""
    out: dict[str, int] = {}
    with path.open("rb") as stream:
        dwarf = ELFFile(stream).get_dwarf_info()
        for unit in dwarf.iter_CUs():
            for die in unit.iter_DIEs():
                if die.tag != "DW_TAG_subprogram" or die.attributes.get("DW_AT_name") is None:
                    continue
                if die.attributes["DW_AT_name"].value.decode() != function:
                    continue
                for child in die.iter_children():
                    stack = [child]
                    while stack:
                        node = stack.pop()
                        stack.extend(node.iter_children())
                        location = node.attributes.get("DW_AT_location")
                        if location is None or "DW_AT_name" not in node.attributes:
                            continue
                        expression = bytes(location.value)
                        if expression and expression[0] == 0x91:
                            out[node.attributes["DW_AT_name"].value.decode()] = _sleb(expression[1:])
    return out


def _sleb(data: bytes) -> int:
    result, shift = 0, 0
    for byte in data:
        result |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            if byte & 0x40:
                result -= 1 << shift
            break
    return result


def start_of(path: Path, name: str) -> int:
    index = build_index(str(path))
    return next(f.address for f in index.functions if f.name == name)


def line_address(path: Path, source: str, needle: str) -> int:
    text = (TARGETS / source).read_text()
    line = text[: text.index(needle)].count("\n") + 1
    sites = line_sites(str(path), source.rsplit("/", 1)[-1], line)
    assert sites is not None and sites.addresses
    return sites.addresses[0]


def test_gcc_frames_are_based_on_the_cfa_and_blocks_scope_by_pc(c_target: Callable[[str], Path]) -> None:
    binary = c_target("frames")
    index = variable_index(binary)
    start = start_of(binary, "price_cart")
    offsets = fbreg_offsets(binary, "price_cart")
    state = FrameState(CFA, {RSP: CFA - 0x40})

    in_loop = frame_variables(index, start, line_address(binary, "frames.c", "subtotal += items"), state, 0)
    assert list(in_loop.variables) == ["items", "count", "subtotal", "percent", "total", "i"]
    assert all(v.address == CFA + offsets[name] for name, v in in_loop.variables.items())
    assert in_loop.variables["items"].parameter and not in_loop.variables["subtotal"].parameter

    at_call = frame_variables(index, start, line_address(binary, "frames.c", "int total = apply_discount"), state, 0)
    assert "i" not in at_call.variables  # the loop's block does not hold the call
    assert at_call.function == "price_cart" and not at_call.rust


def test_rust_frames_are_based_on_rsp(rust_target: Callable[[str], Path]) -> None:
    binary = rust_target("rust_frames")
    index = variable_index(binary)
    start = start_of(binary, "rust_frames::weigh")
    offsets = fbreg_offsets(binary, "weigh")
    sp = CFA - 0x48
    pc = line_address(binary, "rust_frames/src/main.rs", "extra += scaled")
    scope = frame_variables(index, start, pc, FrameState(CFA, {RSP: sp}), 0)
    assert scope.rust and {"base", "bonus", "extra", "scaled"} <= set(scope.variables)
    assert all(v.address == sp + offsets[name] for name, v in scope.variables.items())

    values = frame_values(scope, stack_with(sp, {offsets["base"]: 10, offsets["bonus"]: 7, offsets["extra"]: 37}))
    assert (values["base"], values["bonus"], values["extra"]) == (10, 7, 37)


def test_a_frame_whose_registers_are_not_known(rust_target: Callable[[str], Path]) -> None:
    binary = rust_target("rust_frames")
    scope = frame_variables(variable_index(binary), start_of(binary, "rust_frames::weigh"),
                            line_address(binary, "rust_frames/src/main.rs", "extra += scaled"), FrameState(None, {}), 0)
    assert all(v.address is None and "rsp, which is not known" in str(v.missing) for v in scope.variables.values())


def stack_with(base: int, words: dict[int, int]) -> StackDump:
    data = bytearray(0x100)
    for offset, value in words.items():
        data[offset : offset + 8] = value.to_bytes(8, "little")
    return StackDump(base, bytes(data))


def die(**attrs: Any) -> Die:
    values = {AT_NAME: "v", **{_ATTRS[k]: v for k, v in attrs.items()}}
    return Die(0, TAG_VARIABLE, values, {}, False, None, 0)  # type: ignore[arg-type]


_ATTRS = {"location": AT_LOCATION, "const": AT_CONST_VALUE}


@pytest.mark.parametrize(("attrs", "expected"), [
    ({"location": bytes([0x91, 0x70])}, FrameVariable("v", False, None, address=CFA - 16)),  # fbreg -16
    ({"location": bytes([0x73, 0x08])}, FrameVariable("v", False, None, address=0x5000 + 8)),  # breg3 (rbx) +8
    ({"location": bytes([0x91, 0x08, 0x06])}, FrameVariable("v", False, None, address=CFA + 8, indirect=True)),
    ({"location": bytes([0x03]) + (0x4010).to_bytes(8, "little")},
     FrameVariable("v", False, None, address=0x4010 + 0x100, static=True)),  # a function's static, relocated
    ({"location": bytes([0x53])}, FrameVariable("v", False, None, missing="in register rbx")),
    ({"location": 0x120}, FrameVariable("v", False, None, missing=(
        "its location changes with the pc (a location list: optimised code)"))),
    ({}, FrameVariable("v", False, None, missing=OPTIMISED_OUT)),
    ({"const": 42}, FrameVariable("v", False, None, constant=42)),
    ({"location": bytes([0x50, 0x9F])}, FrameVariable("v", False, None, missing=(
        "a value computed from others (optimised code)"))),
])
def test_every_location_form(attrs: dict[str, Any], expected: FrameVariable) -> None:
    state = FrameState(CFA, {RBX: 0x5000})
    assert _variable(die(**attrs), state, 0x100, lambda: CFA) == expected


def test_values_that_cannot_be_read_say_why(c_target: Callable[[str], Path]) -> None:
    binary = c_target("frames")
    index = variable_index(binary)
    real = frame_variables(index, start_of(binary, "price_cart"), start_of(binary, "price_cart") + 8,
                           FrameState(CFA, {}), 0)
    int_type = real.variables["count"].type_die
    variables = {
        "kept": FrameVariable("kept", False, int_type, missing="in register rbx"),
        "gone": FrameVariable("gone", False, int_type, missing=OPTIMISED_OUT),
        "far": FrameVariable("far", False, int_type, address=0x10),
        "here": FrameVariable("here", False, int_type, address=0x1004),
        "fixed": FrameVariable("fixed", False, int_type, constant=3),
    }
    values = frame_values(FrameScope("f", variables, index), StackDump(0x1000, bytes(4) + (77).to_bytes(4, "little")))
    assert values == {"kept": "<in register rbx: not captured>", "gone": "<optimised out>",
                      "far": "<outside the dumped stack, at 0x10: not captured>", "here": 77, "fixed": 3}


@pytest.mark.parametrize(("expression", "expected"), [
    (bytes([0x9C]), CFA),  # DW_OP_call_frame_cfa: gcc
    (bytes([0x56]), 0x6000),  # DW_OP_reg6 (rbp): clang -O0
    (bytes([0x57]), 0x7000),  # DW_OP_reg7 (rsp): Rust debug builds
    (bytes([0x77, 0x10]), 0x7010),  # DW_OP_breg7 +16
])
def test_frame_base_forms(expression: bytes, expected: int) -> None:
    assert _frame_base(expression, FrameState(CFA, {RBP: 0x6000, RSP: 0x7000}))() == expected


def test_frame_bases_that_cannot_be_used_say_why() -> None:
    cases = {bytes([0x9C]): FrameState(None, {}), bytes([0x56]): FrameState(CFA, {}), bytes([0x10, 0x01]):
             FrameState(CFA, {}), None: FrameState(CFA, {})}
    reasons = []
    for expression, state in cases.items():
        with pytest.raises(FrameUnreadable) as raised:
            _frame_base(expression, state)()
        reasons.append(raised.value.message)
    assert reasons == ["its frame's call frame address is not known",
                       "based on rbp, which is not known in this frame", "frame base 1001 is not supported",
                       "the function has no frame base"]


def test_a_local_whose_slot_holds_its_address_is_read_through_it(c_target: Callable[[str], Path]) -> None:
    """DW_OP_fbreg n, DW_OP_deref (Rust closures' captures): the read recipe first follows the slot's pointer."""
    binary = c_target("frames")
    index = variable_index(binary)
    scope = frame_variables(index, start_of(binary, "checkout"), start_of(binary, "checkout") + 8,
                            FrameState(CFA, {}), 0)
    items = scope.variables["items"]
    direct = resolve_at(index, "items[1].qty", 0x1000, items.type_die)
    through = resolve_at(index, "items[1].qty", 0x1000, items.type_die, indirect=True)
    assert (direct.address, direct.derefs, direct.offset) == (0x1000, (), 16 + 12)
    assert (through.address, [d.offset for d in through.derefs], through.offset) == (0x1000, [0], 16 + 12)
