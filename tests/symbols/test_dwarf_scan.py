"""The fast scanner against a plain pyelftools walk, and against hand-assembled DWARF using every form."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strobe.symbols.dwarf_forms import (
    AT_HIGH_PC,
    AT_LANGUAGE,
    AT_LOW_PC,
    AT_NAME,
    AT_SIBLING,
    AT_STR_OFFSETS_BASE,
    FORM_ADDR,
    FORM_ADDRX,
    FORM_ADDRX1,
    FORM_ADDRX2,
    FORM_ADDRX3,
    FORM_ADDRX4,
    FORM_BLOCK,
    FORM_BLOCK1,
    FORM_BLOCK2,
    FORM_BLOCK4,
    FORM_DATA1,
    FORM_DATA2,
    FORM_DATA4,
    FORM_DATA8,
    FORM_DATA16,
    FORM_EXPRLOC,
    FORM_FLAG,
    FORM_FLAG_PRESENT,
    FORM_GNU_ADDR_INDEX,
    FORM_GNU_REF_ALT,
    FORM_GNU_STR_INDEX,
    FORM_GNU_STRP_ALT,
    FORM_IMPLICIT_CONST,
    FORM_INDIRECT,
    FORM_LINE_STRP,
    FORM_LOCLISTX,
    FORM_REF1,
    FORM_REF2,
    FORM_REF4,
    FORM_REF8,
    FORM_REF_ADDR,
    FORM_REF_SIG8,
    FORM_REF_SUP4,
    FORM_REF_SUP8,
    FORM_REF_UDATA,
    FORM_RNGLISTX,
    FORM_SDATA,
    FORM_SEC_OFFSET,
    FORM_STRING,
    FORM_STRP,
    FORM_STRP_SUP,
    FORM_STRX,
    FORM_STRX1,
    FORM_STRX2,
    FORM_STRX3,
    FORM_STRX4,
    FORM_UDATA,
    KIND_SKIP_TREE,
    TAG_COMPILE_UNIT,
    TAG_NAMESPACE,
    TAG_SUBPROGRAM,
    compile_abbrev,
    parse_abbrev_table,
    read_sleb,
    read_uleb,
)
from strobe.symbols.dwarf_scan import ScannedFunction, scan_dwarf
from strobe.symbols.dwarf_unit import DwarfSections
from strobe.symbols.elf import open_elf, read_dwarf_sections
from tests.symbols.conftest import Programs
from tests.symbols.oracle import Entry, oracle_functions

WITH_DWARF = [
    "c", "c-dwarf4", "c-gz", "c-gz-gnu", "c-O2", "c-O2-dwarf4",
    "cxx", "cxx-dwarf4", "cxx-gz", "cxx-O2",
    "rust-legacy", "rust-v0",
]


def scan(path: Path) -> list[ScannedFunction]:
    with open_elf(path) as elf:
        return scan_dwarf(read_dwarf_sections(elf))


def entries(functions: list[ScannedFunction]) -> set[Entry]:
    return {(f.linkage, f.qualified, f.address, f.file, f.line, f.params, f.inlined_only) for f in functions}


@pytest.mark.parametrize("variant", WITH_DWARF)
def test_scanner_matches_pyelftools(programs: Programs, variant: str) -> None:
    binary = programs.build(variant)
    expected = oracle_functions(binary)
    assert entries(scan(binary)) == expected


def test_compressed_and_dwarf4_sections_give_the_same_functions(programs: Programs) -> None:
    def key(variant: str) -> set[tuple[str | None, int, str | None, int | None]]:
        return {(f.qualified, f.address, f.file, f.line) for f in scan(programs.build(variant))}

    assert key("c-gz") == key("c-gz-gnu") == key("c") == key("c-dwarf4")
    assert key("cxx-gz") == key("cxx") == key("cxx-dwarf4")


def test_no_dwarf_sections_scan_to_nothing() -> None:
    assert scan_dwarf(DwarfSections()) == []


# --- hand-assembled DWARF --------------------------------------------------------------------------


def uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def sleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        done = (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40)
        out.append(byte | (0 if done else 0x80))
        if done:
            return bytes(out)


def test_leb128_round_trip() -> None:
    for value in (0, 1, 127, 128, 300, 2**32 + 5, 2**63):
        assert read_uleb(uleb(value) + b"\xff", 0) == (value, len(uleb(value)))
    for value in (0, -1, 63, -64, 64, -65, -(2**40), 2**40):
        assert read_sleb(sleb(value), 0) == (value, len(sleb(value)))


def sample_values(offset_size: int) -> list[tuple[int, bytes]]:
    """One encoded value for every form the scanner must be able to skip."""
    off = b"\x07" * offset_size
    return [
        (FORM_ADDR, b"\x11" * 8), (FORM_BLOCK2, b"\x03\x00abc"), (FORM_BLOCK4, b"\x02\x00\x00\x00xy"),
        (FORM_DATA2, b"\x01\x02"), (FORM_DATA4, b"\x01" * 4), (FORM_DATA8, b"\x01" * 8), (FORM_STRING, b"inline\0"),
        (FORM_BLOCK, uleb(130) + b"b" * 130), (FORM_BLOCK1, b"\x02zz"), (FORM_DATA1, b"\x09"), (FORM_FLAG, b"\x01"),
        (FORM_SDATA, sleb(-300)), (FORM_STRP, b"\x00" * offset_size), (FORM_UDATA, uleb(1 << 20)),
        (FORM_REF_ADDR, off), (FORM_REF1, b"\x01"), (FORM_REF2, b"\x01\x00"), (FORM_REF4, b"\x01\x00\x00\x00"),
        (FORM_REF8, b"\x01" + b"\x00" * 7), (FORM_REF_UDATA, uleb(200)),
        (FORM_INDIRECT, uleb(FORM_DATA2) + b"\x05\x06"),
        (FORM_SEC_OFFSET, off), (FORM_EXPRLOC, uleb(3) + b"\x91\x68\x06"), (FORM_FLAG_PRESENT, b""),
        (FORM_STRX, uleb(0)), (FORM_ADDRX, uleb(0)), (FORM_REF_SUP4, b"\x00" * 4), (FORM_STRP_SUP, off),
        (FORM_DATA16, b"\x10" * 16), (FORM_LINE_STRP, b"\x00" * offset_size), (FORM_REF_SIG8, b"\x08" * 8),
        (FORM_IMPLICIT_CONST, b""), (FORM_LOCLISTX, uleb(129)), (FORM_RNGLISTX, uleb(1)), (FORM_REF_SUP8, b"\x00" * 8),
        (FORM_STRX1, b"\x00"), (FORM_STRX2, b"\x00\x00"), (FORM_STRX3, b"\x00" * 3), (FORM_STRX4, b"\x00" * 4),
        (FORM_ADDRX1, b"\x00"), (FORM_ADDRX2, b"\x00\x00"), (FORM_ADDRX3, b"\x00" * 3), (FORM_ADDRX4, b"\x00" * 4),
        (FORM_GNU_ADDR_INDEX, uleb(0)), (FORM_GNU_STR_INDEX, uleb(0)), (FORM_GNU_REF_ALT, off),
        (FORM_GNU_STRP_ALT, off),
    ]


class Assembler:
    """Just enough of an assembler to write abbreviations and DIEs by hand."""

    def __init__(self) -> None:
        self.abbrev = bytearray()
        self.code = 0

    def declare(self, tag: int, children: bool, attrs: list[tuple[int, int] | tuple[int, int, int]]) -> int:
        self.code += 1
        self.abbrev += uleb(self.code) + uleb(tag) + bytes([1 if children else 0])
        for attr in attrs:
            self.abbrev += uleb(attr[0]) + uleb(attr[1])
            if attr[1] == FORM_IMPLICIT_CONST:
                self.abbrev += sleb(attr[2])
        self.abbrev += b"\0\0"
        return self.code


def synthetic(version: int, offset_size: int) -> DwarfSections:
    """One unit where DIEs carrying one attribute of every form (vendor attribute codes) sit between and
    inside two functions: "first" (strx name, addrx low_pc) and "ns::inner" (two parameters)."""
    asm = Assembler()
    values = sample_values(offset_size)
    every_form = [(0x2100 + i, form, -3) if form == FORM_IMPLICIT_CONST else (0x2100 + i, form)
                  for i, (form, _) in enumerate(values)]
    blob = b"".join(value for _, value in values)
    strings = b"\0first\0"  # .debug_str: "first" at offset 1
    str_offsets = b"\0" * 8 + (1).to_bytes(offset_size, "little")  # DWARF 5 header, then index 0 -> "first"
    addrs = b"\0" * 8 + struct.pack("<Q", 0x401000)  # header, then index 0 -> 0x401000

    cu = asm.declare(TAG_COMPILE_UNIT, True, [(AT_NAME, FORM_STRX1), (AT_STR_OFFSETS_BASE, FORM_SEC_OFFSET),
                                              (0x73, FORM_SEC_OFFSET), (AT_LANGUAGE, FORM_DATA1)])
    variable = asm.declare(0x34, False, every_form)  # DW_TAG_variable: skipped by its skip plan
    first = asm.declare(TAG_SUBPROGRAM, False, [*every_form[:5], (AT_NAME, FORM_STRX1), *every_form[5:],
                                                (AT_LOW_PC, FORM_ADDRX1), (AT_HIGH_PC, FORM_DATA4),
                                                (0x3B, FORM_IMPLICIT_CONST, 42)])
    namespace = asm.declare(TAG_NAMESPACE, True, [(AT_NAME, FORM_STRING), *every_form])
    second = asm.declare(TAG_SUBPROGRAM, True, [(AT_NAME, FORM_STRING), (AT_LOW_PC, FORM_ADDR),
                                                (AT_HIGH_PC, FORM_ADDR), *every_form])
    param = asm.declare(0x05, False, [(AT_NAME, FORM_STRING)])
    enum = asm.declare(0x04, True, [(AT_SIBLING, FORM_REF4), (AT_NAME, FORM_STRING)])  # subtree skipped whole
    enumerator = asm.declare(0x28, False, [(AT_NAME, FORM_STRING)])

    body = bytearray()
    body += uleb(cu) + b"\x00" + (8).to_bytes(offset_size, "little") * 2 + b"\x1c"  # Rust, bases 8
    body += uleb(variable) + blob
    body += uleb(first) + blob[: sum(len(v) for _, v in values[:5])] + b"\x00"
    body += blob[sum(len(v) for _, v in values[:5]) :] + b"\x00" + struct.pack("<I", 0x20)
    body += uleb(namespace) + b"ns\0" + blob
    body += uleb(second) + b"inner\0" + struct.pack("<QQ", 0x402000, 0x402030) + blob
    body += uleb(param) + b"a\0" + uleb(param) + b"b\0" + b"\0"
    header_size = (4 if offset_size == 4 else 12) + 2 + (2 + offset_size if version >= 5 else offset_size + 1)
    sibling_at = header_size + len(body) + len(uleb(enum)) + 4 + 2 + len(uleb(enumerator)) + 2 + 1
    body += uleb(enum) + struct.pack("<I", sibling_at) + b"e\0" + uleb(enumerator) + b"X\0" + b"\0"
    body += b"\0"  # end of namespace
    body += b"\0"  # end of unit
    if version >= 5:
        header_rest = struct.pack("<HBB", version, 1, 8) + (0).to_bytes(offset_size, "little")
    else:
        header_rest = struct.pack("<H", version) + (0).to_bytes(offset_size, "little") + b"\x08"
    length = len(header_rest) + len(body)
    unit_length = struct.pack("<I", length) if offset_size == 4 else b"\xff\xff\xff\xff" + struct.pack("<Q", length)
    info = unit_length + header_rest + bytes(body)
    assert sibling_at == len(info) - 2  # the enumeration's sibling is the namespace's terminator
    return DwarfSections(info=info, abbrev=bytes(asm.abbrev) + b"\0", debug_str=strings,
                         str_offsets=str_offsets, addr=addrs)


@pytest.mark.parametrize(("version", "offset_size"), [(5, 4), (5, 8), (4, 4)])
def test_every_form_is_skipped_exactly(version: int, offset_size: int) -> None:
    """If any form were skipped by the wrong number of bytes, the functions after it would come out as garbage."""
    sections = synthetic(version, offset_size)

    functions = sorted(scan_dwarf(sections))
    assert [(f.address, f.size, f.name, f.qualified, f.line, f.params, f.rust) for f in functions] == [
        (0x401000, 0x20, "first", "first", 42, 0, True),
        (0x402000, 0x30, "inner", "ns::inner", None, 2, True),
    ]


def test_sibling_jump_needs_a_fixed_offset() -> None:
    """A DW_AT_sibling after a variable-size attribute cannot be reached without decoding: no jump plan."""
    asm = Assembler()
    fixed = asm.declare(0x04, True, [(AT_NAME, FORM_STRP), (AT_SIBLING, FORM_REF4)])
    variable = asm.declare(0x04, True, [(AT_NAME, FORM_STRING), (AT_SIBLING, FORM_REF4)])
    table = parse_abbrev_table(bytes(asm.abbrev) + b"\0", 0)
    planned = compile_abbrev(table[fixed], 8, 4, 5)
    assert (planned.kind, planned.sibling_at, planned.fixed) == (KIND_SKIP_TREE, 4, 8)
    assert compile_abbrev(table[variable], 8, 4, 5).kind != KIND_SKIP_TREE


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_malformed_dwarf_never_raises(data: st.DataObject) -> None:
    """Corrupted sections lose functions (the unit is skipped and logged), never the whole index."""
    good = synthetic(5, 4)
    info = bytearray(good.info)
    abbrev = bytearray(good.abbrev)
    for _ in range(data.draw(st.integers(1, 6))):
        target = data.draw(st.sampled_from([info, abbrev]))
        target[data.draw(st.integers(0, len(target) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(info)))
    sections = DwarfSections(info=bytes(info[:cut] if data.draw(st.booleans()) else info), abbrev=bytes(abbrev),
                             debug_str=good.debug_str, str_offsets=good.str_offsets, addr=good.addr)
    for function in scan_dwarf(sections):
        assert isinstance(function, ScannedFunction)
