"""DWARF 2-5 constants, LEB128, value readers by form, and abbreviation tables compiled into plans.

The scanner never builds an object per attribute. Each abbreviation is compiled once per unit shape
(abbrev offset, address size, offset size, version) into an `Abbrev` tuple:

- `fixed`: total byte size of the DIE's attributes when every form has a fixed size, else -1;
- `skip`: the same walk as steps: a non-negative int skips that many bytes, a negative int is a
  variable-size form class (LEB, string, block…) that must be read to be skipped;
- `decode`: for the DIE kinds we read (subprograms, scopes), the same walk where each attribute we care
  about is a `(slot, form, implicit_const)` tuple saying where its value goes (SLOT_*), and the rest are
  skip steps as in `skip`;
- `sibling_at`: for DIEs whose subtree can never hold a function, the byte offset of a fixed-size
  `DW_AT_sibling` inside the DIE, so the whole subtree is skipped with one read.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

# --- forms ---------------------------------------------------------------------------------------
FORM_ADDR = 0x01
FORM_BLOCK2 = 0x03
FORM_BLOCK4 = 0x04
FORM_DATA2 = 0x05
FORM_DATA4 = 0x06
FORM_DATA8 = 0x07
FORM_STRING = 0x08
FORM_BLOCK = 0x09
FORM_BLOCK1 = 0x0A
FORM_DATA1 = 0x0B
FORM_FLAG = 0x0C
FORM_SDATA = 0x0D
FORM_STRP = 0x0E
FORM_UDATA = 0x0F
FORM_REF_ADDR = 0x10
FORM_REF1 = 0x11
FORM_REF2 = 0x12
FORM_REF4 = 0x13
FORM_REF8 = 0x14
FORM_REF_UDATA = 0x15
FORM_INDIRECT = 0x16
FORM_SEC_OFFSET = 0x17
FORM_EXPRLOC = 0x18
FORM_FLAG_PRESENT = 0x19
FORM_STRX = 0x1A
FORM_ADDRX = 0x1B
FORM_REF_SUP4 = 0x1C
FORM_STRP_SUP = 0x1D
FORM_DATA16 = 0x1E
FORM_LINE_STRP = 0x1F
FORM_REF_SIG8 = 0x20
FORM_IMPLICIT_CONST = 0x21
FORM_LOCLISTX = 0x22
FORM_RNGLISTX = 0x23
FORM_REF_SUP8 = 0x24
FORM_STRX1 = 0x25
FORM_STRX2 = 0x26
FORM_STRX3 = 0x27
FORM_STRX4 = 0x28
FORM_ADDRX1 = 0x29
FORM_ADDRX2 = 0x2A
FORM_ADDRX3 = 0x2B
FORM_ADDRX4 = 0x2C
FORM_GNU_ADDR_INDEX = 0x1F01
FORM_GNU_STR_INDEX = 0x1F02
FORM_GNU_REF_ALT = 0x1F20
FORM_GNU_STRP_ALT = 0x1F21

ADDRESS_FORMS = frozenset(
    {FORM_ADDR, FORM_ADDRX, FORM_ADDRX1, FORM_ADDRX2, FORM_ADDRX3, FORM_ADDRX4, FORM_GNU_ADDR_INDEX}
)

# --- attributes ----------------------------------------------------------------------------------
AT_SIBLING = 0x01
AT_NAME = 0x03
AT_STMT_LIST = 0x10
AT_LOW_PC = 0x11
AT_HIGH_PC = 0x12
AT_LANGUAGE = 0x13
AT_COMP_DIR = 0x1B
AT_INLINE = 0x20
AT_ABSTRACT_ORIGIN = 0x31
AT_ARTIFICIAL = 0x34
AT_DECL_FILE = 0x3A
AT_DECL_LINE = 0x3B
AT_DECLARATION = 0x3C
AT_EXTERNAL = 0x3F
AT_SPECIFICATION = 0x47
AT_RANGES = 0x55
AT_LINKAGE_NAME = 0x6E
AT_STR_OFFSETS_BASE = 0x72
AT_ADDR_BASE = 0x73
AT_RNGLISTS_BASE = 0x74
AT_MIPS_LINKAGE_NAME = 0x2007
AT_GNU_ADDR_BASE = 0x2133

# Decoded attributes land in fixed slots of a per-DIE list; the slot also carries the form class where
# it changes the meaning (high_pc as an address or an offset, ranges as an offset or an index).
SLOT_NAME, SLOT_LINKAGE, SLOT_LOW, SLOT_HIGH_OFFSET, SLOT_HIGH_ADDRESS, SLOT_FILE, SLOT_LINE = 0, 1, 2, 3, 4, 5, 6
SLOT_INLINE, SLOT_DECLARATION, SLOT_SPEC, SLOT_ORIGIN, SLOT_RANGES, SLOT_RANGES_INDEX = 7, 8, 9, 10, 11, 12
SLOT_COUNT = 13

SUBPROGRAM_SLOTS: dict[int, int] = {
    AT_NAME: SLOT_NAME, AT_LINKAGE_NAME: SLOT_LINKAGE, AT_MIPS_LINKAGE_NAME: SLOT_LINKAGE, AT_LOW_PC: SLOT_LOW,
    AT_HIGH_PC: SLOT_HIGH_OFFSET, AT_DECL_FILE: SLOT_FILE, AT_DECL_LINE: SLOT_LINE, AT_INLINE: SLOT_INLINE,
    AT_DECLARATION: SLOT_DECLARATION, AT_SPECIFICATION: SLOT_SPEC, AT_ABSTRACT_ORIGIN: SLOT_ORIGIN,
    AT_RANGES: SLOT_RANGES,
}
SCOPE_SLOTS: dict[int, int] = {AT_NAME: SLOT_NAME, AT_SPECIFICATION: SLOT_SPEC, AT_DECLARATION: SLOT_DECLARATION}

# --- tags ----------------------------------------------------------------------------------------
TAG_CLASS_TYPE = 0x02
TAG_FORMAL_PARAMETER = 0x05
TAG_LEXICAL_BLOCK = 0x0B
TAG_COMPILE_UNIT = 0x11
TAG_STRUCTURE_TYPE = 0x13
TAG_UNION_TYPE = 0x17
TAG_MODULE = 0x1E
TAG_SUBPROGRAM = 0x2E
TAG_INTERFACE_TYPE = 0x38
TAG_NAMESPACE = 0x39
TAG_PARTIAL_UNIT = 0x3C
TAG_TYPE_UNIT = 0x41
TAG_SKELETON_UNIT = 0x4A

SCOPE_TAGS = frozenset(
    {TAG_NAMESPACE, TAG_CLASS_TYPE, TAG_STRUCTURE_TYPE, TAG_UNION_TYPE, TAG_INTERFACE_TYPE, TAG_MODULE}
)
UNIT_TAGS = frozenset({TAG_COMPILE_UNIT, TAG_PARTIAL_UNIT, TAG_TYPE_UNIT, TAG_SKELETON_UNIT})
# Children of these may hold function definitions or declarations: the walk descends into them.
CONTAINER_TAGS = SCOPE_TAGS | UNIT_TAGS | {TAG_SUBPROGRAM, TAG_LEXICAL_BLOCK}

LANG_RUST = 0x1C

REF_SIZES = {FORM_REF1: 1, FORM_REF2: 2, FORM_REF4: 4, FORM_REF8: 8}  # unit-relative references

# DIE kinds the scanner dispatches on.
KIND_OTHER = 0
KIND_SUBPROGRAM = 1
KIND_SCOPE = 2
KIND_PARAM = 3
KIND_SKIP_TREE = 4
KIND_UNIT = 5

# Variable-size form classes used in skip plans (negative so they never clash with byte counts).
VAR_LEB = -1
VAR_STRING = -2
VAR_BLOCK1 = -3
VAR_BLOCK2 = -4
VAR_BLOCK4 = -5
VAR_BLOCK_LEB = -6
VAR_INDIRECT = -7

_VARIABLE: dict[int, int] = {
    FORM_SDATA: VAR_LEB, FORM_UDATA: VAR_LEB, FORM_REF_UDATA: VAR_LEB, FORM_STRX: VAR_LEB, FORM_ADDRX: VAR_LEB,
    FORM_LOCLISTX: VAR_LEB, FORM_RNGLISTX: VAR_LEB, FORM_GNU_ADDR_INDEX: VAR_LEB, FORM_GNU_STR_INDEX: VAR_LEB,
    FORM_STRING: VAR_STRING, FORM_BLOCK1: VAR_BLOCK1, FORM_BLOCK2: VAR_BLOCK2, FORM_BLOCK4: VAR_BLOCK4,
    FORM_BLOCK: VAR_BLOCK_LEB, FORM_EXPRLOC: VAR_BLOCK_LEB, FORM_INDIRECT: VAR_INDIRECT,
}

# What malformed DWARF can raise while being decoded; callers drop the unit or value, never the index.
DECODE_ERRORS = (IndexError, ValueError, KeyError, TypeError, AttributeError, RecursionError, struct.error)

# Raw unpackers returning 1-tuples, for hot loops that cannot afford a wrapper call.
u16_from = struct.Struct("<H").unpack_from
u32_from = struct.Struct("<I").unpack_from
u64_from = struct.Struct("<Q").unpack_from


def u16(data: bytes, pos: int) -> int:
    value: int = u16_from(data, pos)[0]
    return value


def u32(data: bytes, pos: int) -> int:
    value: int = u32_from(data, pos)[0]
    return value


def u64(data: bytes, pos: int) -> int:
    value: int = u64_from(data, pos)[0]
    return value



def initial_length(data: bytes, offset: int) -> tuple[int, int, int]:
    """A DWARF unit's initial length at `offset`: (length, where what it measures starts, offset size: 4 in
    32-bit DWARF, 8 in 64-bit DWARF, announced by a 0xffffffff escape)."""
    length = u32(data, offset)
    if length == 0xFFFFFFFF:
        return u64(data, offset + 4), offset + 12, 8
    return length, offset + 4, 4

def read_uint(data: bytes, pos: int, size: int) -> int:
    if size == 4:
        return u32(data, pos)
    if size == 8:
        return u64(data, pos)
    if size == 1:
        return data[pos]
    if size == 2:
        return u16(data, pos)
    return int.from_bytes(data[pos : pos + size], "little")


def read_uleb(data: bytes, pos: int) -> tuple[int, int]:
    byte = data[pos]
    if byte < 0x80:
        return byte, pos + 1
    result = byte & 0x7F
    shift = 7
    while True:
        pos += 1
        byte = data[pos]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos + 1
        shift += 7


def read_sleb(data: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            if byte & 0x40:
                result -= 1 << shift
            return result, pos


def read_cstr(data: bytes, pos: int) -> tuple[bytes, int]:
    end = data.index(0, pos)
    return data[pos:end], end + 1


def fixed_form_size(form: int, address_size: int, offset_size: int, version: int) -> int | None:
    """Byte size of a fixed-size form, or None for a variable-size one. Raises ValueError if unknown."""
    if form in _VARIABLE:
        return None
    if form == FORM_ADDR:
        return address_size
    if form == FORM_REF_ADDR:
        return address_size if version <= 2 else offset_size
    if form in (FORM_STRP, FORM_LINE_STRP, FORM_STRP_SUP, FORM_SEC_OFFSET, FORM_GNU_REF_ALT, FORM_GNU_STRP_ALT):
        return offset_size
    size = _FIXED.get(form)
    if size is None:
        raise ValueError(f"unknown DWARF form 0x{form:x}")
    return size


_FIXED: dict[int, int] = {
    FORM_DATA1: 1, FORM_DATA2: 2, FORM_DATA4: 4, FORM_DATA8: 8, FORM_DATA16: 16, FORM_FLAG: 1,
    FORM_FLAG_PRESENT: 0, FORM_IMPLICIT_CONST: 0, FORM_REF1: 1, FORM_REF2: 2, FORM_REF4: 4, FORM_REF8: 8,
    FORM_REF_SIG8: 8, FORM_REF_SUP4: 4, FORM_REF_SUP8: 8, FORM_STRX1: 1, FORM_STRX2: 2, FORM_STRX3: 3,
    FORM_STRX4: 4, FORM_ADDRX1: 1, FORM_ADDRX2: 2, FORM_ADDRX3: 3, FORM_ADDRX4: 4,
}


def skip_variable(data: bytes, pos: int, kind: int, address_size: int, offset_size: int, version: int) -> int:
    """Skip one variable-size value of class `kind` (a VAR_* constant) starting at `pos`."""
    if kind == VAR_LEB:
        while data[pos] & 0x80:
            pos += 1
        return pos + 1
    if kind == VAR_STRING:
        return data.index(0, pos) + 1
    if kind == VAR_BLOCK_LEB:
        length, pos = read_uleb(data, pos)
        return pos + length
    if kind == VAR_BLOCK1:
        return pos + 1 + data[pos]
    if kind == VAR_BLOCK2:
        return pos + 2 + u16(data, pos)
    if kind == VAR_BLOCK4:
        return pos + 4 + u32(data, pos)
    # VAR_INDIRECT: the form itself is in the data.
    form, pos = read_uleb(data, pos)
    return skip_form(data, pos, form, address_size, offset_size, version)


def skip_form(data: bytes, pos: int, form: int, address_size: int, offset_size: int, version: int) -> int:
    size = fixed_form_size(form, address_size, offset_size, version)
    if size is not None:
        return pos + size
    return skip_variable(data, pos, _VARIABLE[form], address_size, offset_size, version)


class AbbrevDecl(NamedTuple):
    tag: int
    has_children: bool
    attrs: tuple[tuple[int, int, int], ...]  # (attribute, form, implicit_const)


class Abbrev(NamedTuple):
    kind: int
    has_children: bool
    fixed: int
    skip: tuple[int, ...]
    decode: tuple[int | tuple[int, int, int], ...]
    sibling_at: int
    sibling_form: int


def parse_abbrev_table(data: bytes, offset: int) -> dict[int, AbbrevDecl]:
    """Parse one abbreviation table of .debug_abbrev starting at `offset`."""
    return parse_abbrev_table_at(data, offset)[0]


def parse_abbrev_table_at(data: bytes, offset: int) -> tuple[dict[int, AbbrevDecl], int]:
    """Parse one abbreviation table starting at `offset`; also return where it ends."""
    table: dict[int, AbbrevDecl] = {}
    pos = offset
    size = len(data)
    while pos < size:
        code = data[pos]
        if code < 0x80:
            pos += 1
        else:
            code, pos = read_uleb(data, pos)
        if code == 0:
            break
        tag = data[pos]
        if tag < 0x80:
            pos += 1
        else:
            tag, pos = read_uleb(data, pos)
        has_children = data[pos] != 0
        pos += 1
        attrs: list[tuple[int, int, int]] = []
        while True:
            attr = data[pos]
            form = data[pos + 1]
            if attr < 0x80 and form < 0x80:  # both one byte: the common case
                pos += 2
            else:
                attr, pos = read_uleb(data, pos)
                form, pos = read_uleb(data, pos)
            if attr == 0 and form == 0:
                break
            implicit = 0
            if form == FORM_IMPLICIT_CONST:
                implicit, pos = read_sleb(data, pos)
            attrs.append((attr, form, implicit))
        table[code] = AbbrevDecl(tag, has_children, tuple(attrs))
    return table, pos


def _kind(decl: AbbrevDecl) -> int:
    tag = decl.tag
    if tag == TAG_SUBPROGRAM:
        return KIND_SUBPROGRAM
    if tag in SCOPE_TAGS:
        return KIND_SCOPE
    if tag == TAG_FORMAL_PARAMETER:
        return KIND_PARAM
    if tag in UNIT_TAGS:
        return KIND_UNIT
    return KIND_OTHER


def compile_abbrev(decl: AbbrevDecl, address_size: int, offset_size: int, version: int) -> Abbrev:
    kind = _kind(decl)
    slots = SUBPROGRAM_SLOTS if kind == KIND_SUBPROGRAM else SCOPE_SLOTS if kind == KIND_SCOPE else {}
    skip: list[int] = []
    decode: list[int | tuple[int, int, int]] = []
    fixed_total = 0
    all_fixed = True
    sibling_at = -1
    sibling_form = 0
    for attr, form, implicit in decl.attrs:
        size = fixed_form_size(form, address_size, offset_size, version)
        if attr == AT_SIBLING and all_fixed and (form in REF_SIZES or form == FORM_REF_ADDR):
            sibling_at, sibling_form = fixed_total, form
        step = _VARIABLE[form] if size is None else size
        if size is None:
            all_fixed = False
        else:
            fixed_total += size
        _append_skip(skip, step)
        slot = slots.get(attr)
        if slot is None:
            _append_skip(decode, step)
            continue
        if slot == SLOT_HIGH_OFFSET and form in ADDRESS_FORMS:
            slot = SLOT_HIGH_ADDRESS
        elif slot == SLOT_RANGES and form == FORM_RNGLISTX:
            slot = SLOT_RANGES_INDEX
        decode.append((slot, form, implicit))
    if kind == KIND_OTHER and decl.has_children and decl.tag not in CONTAINER_TAGS and sibling_at >= 0:
        kind = KIND_SKIP_TREE
    return Abbrev(
        kind, decl.has_children, fixed_total if all_fixed else -1, tuple(skip), tuple(decode), sibling_at, sibling_form
    )


def _append_skip(steps: list[Any], step: int) -> None:
    """Append a skip step, merging runs of fixed sizes; zero-size steps vanish."""
    if step == 0:
        return
    if step > 0 and steps and isinstance(steps[-1], int) and steps[-1] > 0:
        steps[-1] += step
    else:
        steps.append(step)
