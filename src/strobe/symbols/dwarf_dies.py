"""Random access to the DIEs of .debug_info: one DIE's attributes by offset, its children, a unit's ranges.

For on-demand work on a handful of DIEs (the type of one variable, the parameters of one function), never
for whole-file walks (see dwarf_vars and dwarf_scan for those). A DIE is decoded completely: every
attribute value by form (references as absolute .debug_info offsets, -1 when they leave the file).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass

from strobe.symbols.dwarf_forms import (
    ADDRESS_FORMS,
    AT_HIGH_PC,
    AT_LOW_PC,
    AT_RANGES,
    AT_SIBLING,
    DECODE_ERRORS,
    FORM_RNGLISTX,
    AbbrevDecl,
    parse_abbrev_table,
    read_uint,
    read_uleb,
)
from strobe.symbols.dwarf_scan import list_units
from strobe.symbols.dwarf_unit import DwarfSections, Unit, Value

# Tags and attributes the type and signature readers use (DWARF 5, section 7.5).
TAG_ARRAY_TYPE = 0x01
TAG_CLASS_TYPE = 0x02
TAG_ENUMERATION_TYPE = 0x04
TAG_FORMAL_PARAMETER = 0x05
TAG_LEXICAL_BLOCK = 0x0B
TAG_MEMBER = 0x0D
TAG_POINTER_TYPE = 0x0F
TAG_REFERENCE_TYPE = 0x10
TAG_COMPILE_UNIT = 0x11
TAG_STRUCTURE_TYPE = 0x13
TAG_SUBROUTINE_TYPE = 0x15
TAG_TYPEDEF = 0x16
TAG_UNION_TYPE = 0x17
TAG_UNSPECIFIED_PARAMETERS = 0x18
TAG_VARIANT = 0x19
TAG_INHERITANCE = 0x1C
TAG_MODULE = 0x1E
TAG_PTR_TO_MEMBER_TYPE = 0x1F
TAG_SUBRANGE_TYPE = 0x21
TAG_BASE_TYPE = 0x24
TAG_CONST_TYPE = 0x26
TAG_ENUMERATOR = 0x28
TAG_SUBPROGRAM = 0x2E
TAG_VARIABLE = 0x34
TAG_VOLATILE_TYPE = 0x35
TAG_RESTRICT_TYPE = 0x37
TAG_INTERFACE_TYPE = 0x38
TAG_NAMESPACE = 0x39
TAG_UNSPECIFIED_TYPE = 0x3B
TAG_PARTIAL_UNIT = 0x3C
TAG_RVALUE_REFERENCE_TYPE = 0x42
TAG_ATOMIC_TYPE = 0x47
TAG_IMMUTABLE_TYPE = 0x4B
TAG_VARIANT_PART = 0x33

AT_NAME = 0x03
AT_BYTE_SIZE = 0x0B
AT_BIT_OFFSET = 0x0C
AT_BIT_SIZE = 0x0D
AT_LOCATION = 0x02
AT_CONST_VALUE = 0x1C
AT_UPPER_BOUND = 0x2F
AT_LOWER_BOUND = 0x22
AT_ABSTRACT_ORIGIN = 0x31
AT_ARTIFICIAL = 0x34
AT_COUNT = 0x37
AT_DATA_MEMBER_LOCATION = 0x38
AT_DECLARATION = 0x3C
AT_DISCR = 0x15
AT_DISCR_VALUE = 0x16
AT_ENCODING = 0x3E
AT_EXTERNAL = 0x3F
AT_SPECIFICATION = 0x47
AT_TYPE = 0x49
AT_DATA_BIT_OFFSET = 0x6B
AT_LINKAGE_NAME = 0x6E
AT_MIPS_LINKAGE_NAME = 0x2007


@dataclass(frozen=True, slots=True)
class Die:
    offset: int
    tag: int
    attrs: dict[int, Value]
    forms: dict[int, int]
    has_children: bool
    unit: Unit
    after_attrs: int  # where its first child (or, without children, its next sibling) starts

    def get(self, attr: int) -> Value:
        return self.attrs.get(attr)

    def ref(self, attr: int) -> int | None:
        """A reference attribute as a .debug_info offset (None if absent or not a usable reference)."""
        value = self.attrs.get(attr)
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None

    def integer(self, attr: int) -> int | None:
        value = self.attrs.get(attr)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def name(self) -> str | None:
        value = self.attrs.get(AT_NAME)
        return value if isinstance(value, str) else None

    @property
    def linkage_name(self) -> str | None:
        value = self.attrs.get(AT_LINKAGE_NAME, self.attrs.get(AT_MIPS_LINKAGE_NAME))
        return value if isinstance(value, str) else None


class DieReader:
    """Decodes DIEs of one file's .debug_info by offset. Not thread-safe: callers hold a lock."""

    def __init__(self, sections: DwarfSections) -> None:
        self.sections = sections
        self.units: list[Unit] = list_units(sections)[0]
        self._starts = [unit.offset for unit in self.units]
        self._prepared: set[int] = set()
        self._tables: dict[int, dict[int, AbbrevDecl]] = {}
        self._cache: dict[int, Die] = {}

    # --- units -----------------------------------------------------------------------------------
    def unit_at(self, offset: int) -> Unit | None:
        at = bisect_right(self._starts, offset) - 1
        if at < 0 or offset >= self.units[at].end:
            return None
        unit = self.units[at]
        self._prepare(unit)
        return unit

    def _table(self, unit: Unit) -> dict[int, AbbrevDecl]:
        table = self._tables.get(unit.abbrev_offset)
        if table is None:
            table = self._tables[unit.abbrev_offset] = parse_abbrev_table(self.sections.abbrev, unit.abbrev_offset)
        return table

    def _prepare(self, unit: Unit) -> None:
        """Decode the unit DIE once: strx/addrx/rnglistx values of the unit's other DIEs depend on it."""
        if unit.offset in self._prepared:
            return
        self._prepared.add(unit.offset)
        code, pos = read_uleb(self.sections.info, unit.die_start)
        decl = self._table(unit).get(code)
        if decl is not None:
            unit.read_unit_die(decl, pos)

    def unit_die(self, unit: Unit) -> Die:
        self._prepare(unit)
        return self.die(unit.die_start)

    # --- DIEs ------------------------------------------------------------------------------------
    def die(self, offset: int) -> Die:
        """The DIE at `offset`. Raises ValueError when no DIE starts there."""
        found = self._cache.get(offset)
        if found is not None:
            return found
        unit = self.unit_at(offset)
        if unit is None:
            raise ValueError(f"no DWARF unit contains .debug_info+0x{offset:x}")
        die = self._decode(unit, offset)
        if die is None:
            raise ValueError(f"no DIE at .debug_info+0x{offset:x}")
        if len(self._cache) > 200_000:
            self._cache.clear()
        self._cache[offset] = die
        return die

    def _decode(self, unit: Unit, offset: int) -> Die | None:
        try:
            code, pos = read_uleb(self.sections.info, offset)
            if code == 0:
                return None
            decl = self._table(unit)[code]
            attrs: dict[int, Value] = {}
            forms: dict[int, int] = {}
            for attr, form, implicit in decl.attrs:
                value, pos = unit.read(pos, form, implicit)
                attrs[attr] = value
                forms[attr] = form
        except DECODE_ERRORS as exc:
            raise ValueError(f"malformed DIE at .debug_info+0x{offset:x}: {exc!r}") from None
        return Die(offset, decl.tag, attrs, forms, decl.has_children, unit, pos)

    def children(self, die: Die) -> Iterator[Die]:
        """The direct children of `die`, in order."""
        if not die.has_children:
            return
        data = self.sections.info
        pos = die.after_attrs
        while pos < die.unit.end:
            if data[pos] == 0:
                return
            child = self._cache.get(pos) or self._decode(die.unit, pos)
            if child is None:
                return
            yield child
            pos = self.end_of(child)

    def end_of(self, die: Die) -> int:
        """Where the DIE after `die` and its subtree starts."""
        if not die.has_children:
            return die.after_attrs
        sibling = die.ref(AT_SIBLING)
        if sibling is not None and die.after_attrs <= sibling <= die.unit.end:
            return sibling
        data = self.sections.info
        pos = die.after_attrs
        while pos < die.unit.end:
            if data[pos] == 0:
                return pos + 1
            child = self._decode(die.unit, pos)
            if child is None:
                return pos + 1
            pos = self.end_of(child)
        return pos

    def follow(self, die: Die, attr: int) -> Die | None:
        """The DIE a reference attribute of `die` names, or None."""
        ref = die.ref(attr)
        if ref is None:
            return None
        try:
            return self.die(ref)
        except ValueError:
            return None

    # --- address ranges --------------------------------------------------------------------------
    def ranges(self, die: Die) -> list[tuple[int, int]]:
        """The [start, end) address ranges of a unit or subprogram DIE (low/high pc or DW_AT_ranges)."""
        low = die.integer(AT_LOW_PC)
        high = die.integer(AT_HIGH_PC)
        if low is not None and high is not None:
            end = high if die.forms.get(AT_HIGH_PC) in ADDRESS_FORMS else low + high
            return [(low, end)] if end > low else []
        value = die.integer(AT_RANGES)
        if value is None:
            return []
        try:
            return range_list(die.unit, value, die.forms.get(AT_RANGES) == FORM_RNGLISTX)
        except DECODE_ERRORS:
            return []


def range_list(unit: Unit, value: int, is_index: bool) -> list[tuple[int, int]]:
    """Every non-empty range of a DW_AT_ranges value (a section offset, or a DW_FORM_rnglistx index)."""
    if unit.version < 5 and not is_index:
        return _debug_ranges(unit, value)
    offset = value
    if is_index:
        at = unit.rnglists_base + value * unit.offset_size
        offset = unit.rnglists_base + read_uint(unit.sections.rnglists, at, unit.offset_size)
    return _rnglist(unit, offset)


def _debug_ranges(unit: Unit, offset: int) -> list[tuple[int, int]]:
    data, size = unit.sections.ranges, unit.address_size
    top = (1 << (8 * size)) - 1
    base = unit.base_address
    found: list[tuple[int, int]] = []
    pos = offset
    while pos + 2 * size <= len(data):
        begin, end = read_uint(data, pos, size), read_uint(data, pos + size, size)
        pos += 2 * size
        if begin == 0 and end == 0:
            break
        if begin == top:
            base = end
        elif end > begin:
            found.append((base + begin, base + end))
    return found


def _rnglist(unit: Unit, offset: int) -> list[tuple[int, int]]:
    return list(unit.rnglist(offset))
