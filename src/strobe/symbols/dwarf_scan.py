"""A fast function scanner over .debug_info: abbreviations parsed once, attribute values skipped by form.

Only DW_TAG_subprogram DIEs are decoded (name, linkage name, low/high pc or the first range of
DW_AT_ranges, decl file/line, inline, declaration, specification, abstract origin), plus the name of
every enclosing namespace/class/struct/union so functions without a linkage name still get a qualified
name. Formal parameters are counted, not decoded. Subtrees that can never hold a function (inlined subroutines,
enumerations, subroutine types…) are jumped over with their DW_AT_sibling when it has a fixed offset.

`scan_dwarf` returns one `ScannedFunction` per concrete function (with code) and per inline function
that was never emitted out of line; names are not demangled here.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from strobe.symbols.dwarf_forms import (
    DECODE_ERRORS,
    FORM_ADDR,
    FORM_DATA1,
    FORM_DATA2,
    FORM_DATA8,
    FORM_FLAG_PRESENT,
    FORM_IMPLICIT_CONST,
    FORM_REF4,
    FORM_REF_ADDR,
    FORM_STRP,
    KIND_OTHER,
    KIND_PARAM,
    KIND_SCOPE,
    KIND_SKIP_TREE,
    KIND_SUBPROGRAM,
    KIND_UNIT,
    LANG_RUST,
    REF_SIZES,
    SLOT_COUNT,
    TAG_NAMESPACE,
    VAR_BLOCK_LEB,
    VAR_LEB,
    VAR_STRING,
    Abbrev,
    AbbrevDecl,
    compile_abbrev,
    parse_abbrev_table,
    read_uint,
    read_uleb,
    skip_variable,
    u16_from,
    u32_from,
    u64_from,
)
from strobe.symbols.dwarf_unit import UT_SKELETON, UT_SPLIT_TYPE, UT_TYPE, DwarfSections, Unit

log = logging.getLogger(__name__)

DW_INL_INLINED = 1
DW_INL_DECLARED_INLINED = 3
_MAX_HOPS = 8

# Fields of a subprogram record (a list, so parameter counts can be bumped in place).
R_OFFSET, R_NAME, R_LINKAGE, R_LOW, R_SIZE, R_FILE, R_LINE, R_INLINE = 0, 1, 2, 3, 4, 5, 6, 7
R_DECLARATION, R_SPEC, R_ORIGIN, R_PARAMS, R_PREFIX, R_RUST = 8, 9, 10, 11, 12, 13


class ScannedFunction(NamedTuple):
    address: int  # static low_pc; 0 when inlined_only
    size: int
    name: str | None  # DW_AT_name, from the DIE or the one it refers to
    qualified: str | None  # enclosing scopes + DW_AT_name
    linkage: str | None
    file: str | None
    line: int | None
    params: int
    inlined_only: bool
    rust: bool
    offset: int  # .debug_info offset of the DIE


class DwarfScan:
    """Walks every compile unit once; `functions()` then resolves specifications and origins."""

    def __init__(self, sections: DwarfSections) -> None:
        self.sections = sections
        self.records: list[list[Any]] = []
        self.by_offset: dict[int, list[Any]] = {}
        self.scope_names: dict[int, str] = {}
        self.failed_units = 0
        self.address_size = 8
        self._decls: dict[int, dict[int, AbbrevDecl]] = {}
        self._plans: dict[tuple[int, int, int, int], list[Abbrev | None]] = {}

    def run(self) -> DwarfScan:
        info = self.sections.info
        offset = 0
        while offset + 11 <= len(info):
            try:
                unit = Unit(self.sections, offset)
            except DECODE_ERRORS:
                self.failed_units += 1
                break
            if unit.end <= offset:
                break
            self.address_size = unit.address_size
            try:
                self._walk(unit)
            except DECODE_ERRORS as exc:
                self.failed_units += 1
                log.warning("skipping malformed DWARF unit at .debug_info+0x%x: %r", offset, exc)
            offset = unit.end
        return self

    # --- abbreviations ---------------------------------------------------------------------------
    def _abbrevs(self, unit: Unit) -> list[Abbrev | None]:
        plans = self._plans.get(unit.shape)
        if plans is None:
            decls = self._decls.get(unit.abbrev_offset)
            if decls is None:
                decls = self._decls[unit.abbrev_offset] = parse_abbrev_table(
                    self.sections.abbrev, unit.abbrev_offset
                )
            plans = [None] * (max(decls, default=0) + 1)
            for code, decl in decls.items():
                plans[code] = compile_abbrev(decl, unit.address_size, unit.offset_size, unit.version)
            self._plans[unit.shape] = plans
        return plans

    def _tag(self, unit: Unit, code: int) -> int:
        return self._decls[unit.abbrev_offset][code].tag

    # --- the walk --------------------------------------------------------------------------------
    def _walk(self, unit: Unit) -> None:
        data = self.sections.info
        abbrevs: list[Any] = self._abbrevs(unit)
        code, pos = read_uleb(data, unit.die_start)
        top = abbrevs[code] if code else None
        if top is None or top[0] != KIND_UNIT:
            return
        pos = unit.read_unit_die(self._decls[unit.abbrev_offset][code], pos)
        if unit.unit_type in (UT_TYPE, UT_SPLIT_TYPE, UT_SKELETON) or not top[1]:
            return
        end = unit.end
        base = unit.offset
        rust = unit.language == LANG_RUST
        records = self.records
        by_offset = self.by_offset
        scope_names = self.scope_names
        read = unit.read
        strings = self.sections.strings
        string_at = self.sections.string_at
        address_size, offset_size, version = unit.address_size, unit.offset_size, unit.version
        # Qualified prefix ("a::B::") for the children of each open DIE, or the record of an unnamed function.
        prefixes: list[Any] = [""]
        owners: list[list[Any] | None] = [None]  # the subprogram whose parameters are being counted
        while pos < end:
            die = pos
            code = data[pos]
            if code < 0x80:
                pos += 1
            else:
                code, pos = read_uleb(data, pos)
            if code == 0:
                if len(prefixes) == 1:
                    break
                prefixes.pop()
                owners.pop()
                continue
            abbrev = abbrevs[code]
            kind = abbrev[0]
            if kind in (KIND_OTHER, KIND_PARAM):
                if kind == KIND_PARAM:
                    owner = owners[-1]
                    if owner is not None:
                        owner[R_PARAMS] += 1
                fixed = abbrev[2]
                if fixed >= 0:
                    pos += fixed
                else:
                    for step in abbrev[3]:
                        if step >= 0:
                            pos += step
                        elif step == VAR_LEB:
                            while data[pos] & 0x80:
                                pos += 1
                            pos += 1
                        elif step == VAR_BLOCK_LEB and data[pos] < 0x80:  # a short DW_AT_location
                            pos += 1 + data[pos]
                        elif step == VAR_STRING:
                            pos = data.index(0, pos) + 1
                        else:
                            pos = skip_variable(data, pos, step, address_size, offset_size, version)
                if abbrev[1]:
                    prefixes.append(prefixes[-1])
                    owners.append(None)
                continue
            if kind == KIND_SKIP_TREE:
                at = pos + abbrev[5]
                form = abbrev[6]
                if form == FORM_REF_ADDR:
                    target = read_uint(data, at, address_size if version <= 2 else offset_size)
                else:
                    target = base + read_uint(data, at, REF_SIZES[form])
                if pos < target <= end:
                    pos = target
                    continue
                # A sibling that does not point forward: walk the subtree instead.
                pos = die
                code, pos = read_uleb(data, pos)
                for step in abbrev[3]:
                    pos = pos + step if step >= 0 else skip_variable(
                        data, pos, step, address_size, offset_size, version
                    )
                prefixes.append(prefixes[-1])
                owners.append(None)
                continue
            if kind != KIND_SCOPE and kind != KIND_SUBPROGRAM:  # a nested unit DIE: malformed, opaque
                for step in abbrev[3]:
                    pos = pos + step if step >= 0 else skip_variable(
                        data, pos, step, address_size, offset_size, version
                    )
                if abbrev[1]:
                    prefixes.append(prefixes[-1])
                    owners.append(None)
                continue
            # Scopes and subprograms: decode the attributes we need (common forms inline), skip the rest.
            values: list[Any] = [None] * SLOT_COUNT
            for step in abbrev[4]:
                if step.__class__ is int:
                    if step >= 0:
                        pos += step
                    elif step == VAR_BLOCK_LEB and data[pos] < 0x80:
                        pos += 1 + data[pos]
                    else:
                        pos = skip_variable(data, pos, step, address_size, offset_size, version)
                    continue
                slot, form, implicit = step
                if form == FORM_STRP and offset_size == 4:
                    offset: int = u32_from(data, pos)[0]
                    pos += 4
                    value: Any = strings.get(offset)
                    if value is None:
                        value = string_at(offset)
                elif form == FORM_DATA1:
                    value = data[pos]
                    pos += 1
                elif form == FORM_FLAG_PRESENT:
                    value = True
                elif form == FORM_IMPLICIT_CONST:
                    value = implicit
                elif form == FORM_REF4:
                    value = base + u32_from(data, pos)[0]
                    pos += 4
                elif form == FORM_DATA2:
                    value = u16_from(data, pos)[0]
                    pos += 2
                elif form == FORM_DATA8 or (form == FORM_ADDR and address_size == 8):
                    value = u64_from(data, pos)[0]
                    pos += 8
                else:
                    value, pos = read(pos, form, implicit)
                values[slot] = value
            (name, linkage, low, high_offset, high_address, file_index, line) = values[:7]
            (inline, declaration, spec, origin, ranges, ranges_index) = values[7:]
            prefix = prefixes[-1]
            if prefix.__class__ is not str:  # the children of a function without DW_AT_name: resolve now
                prefix = prefixes[-1] = self._child_prefix(prefix)
            if kind == KIND_SCOPE:
                qualified = scope_names.get(spec) if spec is not None else None
                if qualified is None:
                    if name is None:
                        name = (
                            "(anonymous namespace)" if self._tag(unit, code) == TAG_NAMESPACE else "{unnamed type}"
                        )
                    qualified = prefix + name
                scope_names[die] = qualified
                if abbrev[1]:
                    prefixes.append(qualified + "::")
                    owners.append(None)
                continue
            size = 0
            if low is not None:
                if high_offset is not None:
                    size = high_offset
                elif high_address is not None:
                    size = high_address - low
            elif (ranges is not None or ranges_index is not None) and not declaration:
                first = unit.first_range(ranges, False) if ranges is not None else unit.first_range(ranges_index, True)
                if first is not None:
                    low, size = first[0], first[1] - first[0]
            file = unit.file_name(file_index) if file_index.__class__ is int else None
            record = [die, name, linkage, low, size, file, line, inline, declaration, spec, origin, 0, prefix, rust]
            records.append(record)
            by_offset[die] = record
            if abbrev[1]:
                # Children are named after this function; without DW_AT_name that needs its origin, so it
                # is worked out only if a child actually asks (nested functions and types are rare).
                prefixes.append(f"{prefix}{name}::" if name is not None else record)
                owners.append(record)

    def _child_prefix(self, record: list[Any]) -> str:
        prefix, name = self._named_target(record)
        return f"{prefix}{name}::"

    def _named_target(self, record: list[Any]) -> tuple[str, str]:
        """(prefix, name) of the first DIE with a name along the origin/specification chain."""
        current: list[Any] | None = record
        for _ in range(_MAX_HOPS):
            if current is None:
                break
            if current[R_NAME] is not None:
                return current[R_PREFIX], current[R_NAME]
            ref = current[R_ORIGIN] if current[R_ORIGIN] is not None else current[R_SPEC]
            current = self.by_offset.get(ref) if ref is not None else None
        return record[R_PREFIX], "{unknown}"

    # --- resolution ------------------------------------------------------------------------------
    def functions(self) -> list[ScannedFunction]:
        tombstone = (1 << (8 * self.address_size)) - 2
        emitted_origins: set[int] = set()
        result: list[ScannedFunction] = []
        seen: set[tuple[str | None, str | None, int | None]] = set()
        for record in self.records:
            low = record[R_LOW]
            if record[R_DECLARATION] or low is None or not 0 < low < tombstone:
                continue
            if record[R_ORIGIN] is not None:
                emitted_origins.add(record[R_ORIGIN])
            function = self._resolve(record, low, record[R_SIZE], inlined_only=False)
            result.append(function)
            seen.add((function.linkage or function.qualified, function.file, function.line))
        for record in self.records:
            if (
                record[R_INLINE] in (DW_INL_INLINED, DW_INL_DECLARED_INLINED)
                and record[R_LOW] is None
                and not record[R_DECLARATION]
                and record[R_OFFSET] not in emitted_origins
            ):
                function = self._resolve(record, 0, 0, inlined_only=True)
                key = (function.linkage or function.qualified, function.file, function.line)
                if key not in seen and (function.name or function.linkage):
                    seen.add(key)
                    result.append(function)
        return result

    def _resolve(self, record: list[Any], address: int, size: int, *, inlined_only: bool) -> ScannedFunction:
        by_offset = self.by_offset
        name = qualified = linkage = file = None
        line = None
        params = record[R_PARAMS]
        current: list[Any] | None = record
        hops = 0
        while current is not None and hops < _MAX_HOPS:
            if linkage is None:
                linkage = current[R_LINKAGE]
            if current[R_NAME] is not None:  # the deepest name carries the real scope
                name = current[R_NAME]
                qualified = current[R_PREFIX] + name
            if file is None:
                file = current[R_FILE]
            if line is None:
                line = current[R_LINE]
            if not params:
                params = current[R_PARAMS]
            ref = current[R_ORIGIN] if current[R_ORIGIN] is not None else current[R_SPEC]
            current = by_offset.get(ref) if ref is not None else None
            hops += 1
        return ScannedFunction(
            address, size, name, qualified, linkage, file, line, params, inlined_only, record[R_RUST], record[R_OFFSET]
        )


def scan_dwarf(sections: DwarfSections) -> list[ScannedFunction]:
    """Every function of .debug_info: concrete ones with their static low_pc, inline-only ones at 0."""
    if not sections.info or not sections.abbrev:
        return []
    return DwarfScan(sections).run().functions()
