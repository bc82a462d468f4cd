"""A fast function scanner over .debug_info: abbreviations parsed once, attribute values skipped by form.

Only DW_TAG_subprogram DIEs are decoded (name, linkage name, low/high pc or the first range of
DW_AT_ranges, decl file/line, inline, declaration, specification, abstract origin), plus the name of
every enclosing namespace/class/struct/union so functions without a linkage name still get a qualified
name. Formal parameters are counted, not decoded. Subtrees that can never hold a function (inlined subroutines,
enumerations, subroutine types…) are jumped over with their DW_AT_sibling when it has a fixed offset.
How each abbreviation is stepped over or decoded is compiled once (see dwarf_plan).

`scan_dwarf` returns one `ScannedFunction` per concrete function (with code) and per inline function
that was never emitted out of line; names are not demangled here.

A scan can also cover a contiguous run of units only (`DwarfScan(sections, span)`), so big binaries are
scanned in parallel (dwarf_worker). Such a partial scan is exact unless a reference leaves its span (LTO
and dwz output do that); it then sets `crossing` and the caller scans the whole file instead.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from strobe.symbols.dwarf_forms import (
    DECODE_ERRORS,
    FORM_REF_ADDR,
    LANG_RUST,
    REF_SIZES,
    TAG_COMPILE_UNIT,
    TAG_PARTIAL_UNIT,
    TAG_SKELETON_UNIT,
    TAG_TYPE_UNIT,
    AbbrevDecl,
    parse_abbrev_table_at,
    read_uint,
    read_uleb,
)
from strobe.symbols.dwarf_plan import (
    ACT_PARAM,
    ACT_SKIP_TREE,
    ACT_SUBPROGRAM,
    FAST_BLOCK,
    FAST_BLOCK_PARAM,
    FAST_SKIP_PARAM,
    FAST_SUBPROGRAM,
    UnitPlan,
    build_unit_plan,
)
from strobe.symbols.dwarf_unit import UT_SKELETON, UT_SPLIT_TYPE, UT_TYPE, DwarfSections, Unit

log = logging.getLogger(__name__)

DW_INL_INLINED = 1
DW_INL_DECLARED_INLINED = 3
_MAX_HOPS = 8
_UNIT_TAGS = (TAG_COMPILE_UNIT, TAG_PARTIAL_UNIT, TAG_TYPE_UNIT, TAG_SKELETON_UNIT)

# Fields of a subprogram record (a list, so the parameter count can be set when its children end).
R_OFFSET, R_NAME, R_LINKAGE, R_LOW, R_SIZE, R_FILE, R_LINE, R_INLINE = 0, 1, 2, 3, 4, 5, 6, 7
R_DECLARATION, R_SPEC, R_ORIGIN, R_PARAMS, R_PREFIX, R_RUST = 8, 9, 10, 11, 12, 13

# A function as a plain tuple, in ScannedFunction's field order (cheaper to build and to pickle).
Row = tuple[int, int, str | None, str | None, str | None, str | None, Any, int, bool, bool, int]


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


def list_units(sections: DwarfSections) -> tuple[list[Unit], int]:
    """The units of .debug_info in order, and 1 if the header after the last one is unreadable."""
    info = sections.info
    units: list[Unit] = []
    offset = 0
    while offset + 11 <= len(info):
        try:
            unit = Unit(sections, offset)
        except DECODE_ERRORS:
            return units, 1
        if unit.end <= offset:
            break
        units.append(unit)
        offset = unit.end
    return units, 0


class DwarfScan:
    """Walks compile units once; `functions()` then resolves specifications and origins."""

    def __init__(self, sections: DwarfSections, span: tuple[int, int] | None = None) -> None:
        self.sections = sections
        self.records: list[list[Any]] = []
        self.by_offset: dict[int, list[Any]] = {}
        self.scope_names: dict[int, str] = {}
        self.failed_units = 0
        self.address_size = 8
        self.partial = span is not None and span != (0, len(sections.info))
        self.span = span if span is not None else (0, len(sections.info))
        self.crossing = False  # a partial scan followed a reference out of `span`
        self._decls: dict[int, dict[int, AbbrevDecl]] = {}
        self._plans: dict[tuple[int, int, int, int], UnitPlan] = {}
        self._plans_by_table: dict[tuple[bytes, int, int, int], UnitPlan] = {}  # identical tables of other units

    def run(self, units: list[Unit] | None = None) -> DwarfScan:
        """Walk `units` (default: every unit of the file)."""
        if units is None:
            units, self.failed_units = list_units(self.sections)
        for unit in units:
            self.address_size = unit.address_size
            try:
                self._walk(unit)
            except DECODE_ERRORS as exc:
                self.failed_units += 1
                log.warning("skipping malformed DWARF unit at .debug_info+0x%x: %r", unit.offset, exc)
        return self

    # --- abbreviations ---------------------------------------------------------------------------
    def _plan(self, unit: Unit) -> UnitPlan:
        plan = self._plans.get(unit.shape)
        if plan is None:
            abbrev = self.sections.abbrev
            decls, end = parse_abbrev_table_at(abbrev, unit.abbrev_offset)
            self._decls[unit.abbrev_offset] = decls
            key = (abbrev[unit.abbrev_offset : end], unit.address_size, unit.offset_size, unit.version)
            plan = self._plans_by_table.get(key)
            if plan is None:
                plan = self._plans_by_table[key] = build_unit_plan(
                    decls, unit.address_size, unit.offset_size, unit.version
                )
            self._plans[unit.shape] = plan
        return plan

    # --- the walk --------------------------------------------------------------------------------
    def _walk(self, unit: Unit) -> None:
        data = self.sections.info
        plan = self._plan(unit)
        code, pos = read_uleb(data, unit.die_start)
        top = plan.actions[code] if code else None
        decl = self._decls[unit.abbrev_offset].get(code)
        if top is None or decl is None or decl.tag not in _UNIT_TAGS:
            return
        pos = unit.read_unit_die(decl, pos)
        if unit.unit_type in (UT_TYPE, UT_SPLIT_TYPE, UT_SKELETON) or not decl.has_children:
            return
        data = self.sections.info
        end = unit.end
        base = unit.offset
        rust = unit.language == LANG_RUST
        records = self.records
        by_offset = self.by_offset
        scope_names = self.scope_names
        read = unit.read
        strings = self.sections.strings
        debug_str = self.sections.debug_str
        address_size, offset_size, version = unit.address_size, unit.offset_size, unit.version
        fast, kinds, children = plan.fast, plan.kinds, plan.children
        block_pre, block_post = plan.block_pre, plan.block_post
        skippers: list[Any] = plan.skippers
        subprograms: list[Any] = plan.subprograms
        actions: list[Any] = plan.actions
        # The open DIEs: qualified prefix ("a::B::") of their children, or the record of an unnamed function
        # whose prefix is worked out if a child asks; the function whose parameters are counted; that count.
        stack: list[tuple[Any, list[Any] | None, int]] = []
        prefix: Any = ""
        owner: list[Any] | None = None
        nparams = 0
        try:
            while pos < end:
                code = data[pos]
                if not code:  # the end of a list of children
                    pos += 1
                    if not stack:
                        break
                    if owner is not None:
                        owner[11] = nparams  # R_PARAMS
                    prefix, owner, nparams = stack.pop()
                    continue
                step = fast[code]
                if step:
                    if step > 0:
                        pos += step
                    else:
                        pos -= step
                        nparams += 1
                    continue
                kind = kinds[code]
                if kind == FAST_SUBPROGRAM:
                    if prefix.__class__ is not str:  # the children of a function without DW_AT_name
                        prefix = self._child_prefix(prefix)
                    pos, record = subprograms[code](data, pos + 1, pos, prefix, rust, base, unit, strings, debug_str)
                    records.append(record)
                    by_offset[record[0]] = record
                    if children[code]:
                        # Children are named after this function ("<prefix><name>::", or after the DIE its
                        # origin/specification names): worked out only if a child asks, as few ever do.
                        stack.append((prefix, owner, nparams))
                        prefix = owner = record
                        nparams = 0
                    continue
                # (A parameter counts before its attributes are read, even if they turn out malformed.)
                if kind >= FAST_BLOCK:
                    if kind == FAST_BLOCK_PARAM:
                        nparams += 1
                    at = pos + block_pre[code]
                    length = data[at]
                    pos = at + 1 + length + block_post[code] if length < 0x80 else skippers[code](data, pos + 1)
                    continue
                if kind:  # FAST_SKIP or FAST_SKIP_PARAM
                    if kind == FAST_SKIP_PARAM:
                        nparams += 1
                    pos = skippers[code](data, pos + 1)
                    continue
                die = pos
                if code < 0x80:
                    pos += 1
                else:
                    code, pos = read_uleb(data, pos)
                    if code == 0:  # a null entry spelled in more than one byte
                        if not stack:
                            break
                        if owner is not None:
                            owner[11] = nparams  # R_PARAMS
                        prefix, owner, nparams = stack.pop()
                        continue
                action = actions[code]
                kind, has_children, decode = action[0], action[1], action[3]
                if kind == ACT_SUBPROGRAM:
                    if prefix.__class__ is not str:  # the children of a function without DW_AT_name
                        prefix = self._child_prefix(prefix)
                    pos, record = decode(data, pos, die, prefix, rust, base, unit, strings, debug_str)
                    records.append(record)
                    by_offset[die] = record
                    if has_children:
                        # Children are named after this function ("<prefix><name>::", or after the DIE its
                        # origin/specification names): worked out only if a child asks, as few ever do.
                        stack.append((prefix, owner, nparams))
                        prefix = owner = record
                        nparams = 0
                    continue
                if kind <= ACT_PARAM:  # ACT_SKIP or ACT_PARAM
                    if kind == ACT_PARAM:
                        nparams += 1
                    pos = action[2](data, pos)
                    if has_children:
                        stack.append((prefix, owner, nparams))
                        owner, nparams = None, 0
                    continue
                if kind == ACT_SKIP_TREE:
                    at = pos + action[4]
                    form = action[5]
                    if form == FORM_REF_ADDR:
                        target = read_uint(data, at, address_size if version <= 2 else offset_size)
                    else:
                        target = base + read_uint(data, at, REF_SIZES[form])
                    if pos < target <= end:
                        pos = target
                        continue
                    # A sibling that does not point forward: walk the subtree instead.
                    pos = action[2](data, pos)
                    stack.append((prefix, owner, nparams))
                    owner, nparams = None, 0
                    continue
                # ACT_SCOPE
                if prefix.__class__ is not str:
                    prefix = self._child_prefix(prefix)
                pos, name, spec = decode(data, pos, base, read, strings, debug_str)
                qualified = None
                if spec is not None:
                    qualified = scope_names.get(spec)
                    if qualified is None:
                        self._lost(spec)
                if qualified is None:
                    if name is None:
                        name = "(anonymous namespace)" if action[6] else "{unnamed type}"
                    qualified = prefix + name
                scope_names[die] = qualified
                if has_children:
                    stack.append((prefix, owner, nparams))
                    prefix, owner, nparams = qualified + "::", None, 0
        finally:
            # Parameters counted in frames that were never closed (a malformed unit) still count.
            for _, open_owner, count in [*stack, (prefix, owner, nparams)]:
                if open_owner is not None:
                    open_owner[R_PARAMS] = count

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
            if current is None and ref is not None:
                self._lost(ref)
        return record[R_PREFIX], "{unknown}"

    # --- resolution ------------------------------------------------------------------------------
    def _lost(self, ref: Any) -> None:
        """A reference found no record here: in a partial scan, one into another part means this part
        cannot be resolved alone."""
        low, high = self.span
        if ref.__class__ is int and self.partial and not low <= ref < high and 0 <= ref < len(self.sections.info):
            self.crossing = True

    def rows(self, address_size: int | None = None) -> tuple[list[Row], list[Row]]:
        """(concrete functions, inline-only candidates), both in DIE order. The candidates are not yet
        de-duplicated against functions of other parts of the file: see `combine`."""
        tombstone = (1 << (8 * (address_size or self.address_size))) - 2
        emitted_origins: set[int] = set()
        concrete: list[Row] = []
        append = concrete.append
        by_offset = self.by_offset
        for record in self.records:
            low = record[3]
            if record[8] or low is None or not 0 < low < tombstone:
                continue
            if record[10] is not None:
                emitted_origins.add(record[10])
            # _resolve, inlined (record fields by number: globals cost in a loop run once per function).
            name = qualified = linkage = file = line = None
            params = record[11]
            current = record
            hops = 0
            while hops < _MAX_HOPS:
                if linkage is None and isinstance(current[2], str):  # (malformed DWARF: a name of another form)
                    linkage = current[2]
                if isinstance(current[1], str):  # the deepest name carries the real scope
                    name = current[1]
                    qualified = current[12] + name
                if file is None:
                    file = current[5]
                if line is None:
                    line = current[6]
                if not params:
                    params = current[11]
                ref = current[10]
                if ref is None:
                    ref = current[9]
                    if ref is None:
                        break
                found = by_offset.get(ref)
                if found is None:
                    self._lost(ref)
                    break
                current = found
                hops += 1
            append((low, record[4], name, qualified, linkage, file, line, params, False, record[13],
                    record[0]))
        candidates: list[Row] = []
        for record in self.records:
            if (
                record[R_INLINE] in (DW_INL_INLINED, DW_INL_DECLARED_INLINED)
                and record[R_LOW] is None
                and not record[R_DECLARATION]
                and record[R_OFFSET] not in emitted_origins
            ):
                candidates.append(self._resolve(record, 0, 0, True))
        return concrete, candidates

    def functions(self) -> list[ScannedFunction]:
        concrete, candidates = self.rows()
        return [ScannedFunction._make(row) for row in combine([concrete], [candidates])]

    def _resolve(self, record: list[Any], address: int, size: int, inlined_only: bool) -> Row:
        by_offset = self.by_offset
        name = qualified = linkage = file = line = None
        params = record[R_PARAMS]
        current: list[Any] | None = record
        hops = 0
        while current is not None and hops < _MAX_HOPS:
            if linkage is None and isinstance(current[R_LINKAGE], str):  # (malformed DWARF: a name of another form)
                linkage = current[R_LINKAGE]
            if isinstance(current[R_NAME], str):  # the deepest name carries the real scope
                name = current[R_NAME]
                qualified = current[R_PREFIX] + name
            if file is None:
                file = current[R_FILE]
            if line is None:
                line = current[R_LINE]
            if not params:
                params = current[R_PARAMS]
            ref = current[R_ORIGIN]
            if ref is None:
                ref = current[R_SPEC]
                if ref is None:
                    break
            current = by_offset.get(ref)
            if current is None:
                self._lost(ref)
            hops += 1
        return (address, size, name, qualified, linkage, file, line, params, inlined_only, record[R_RUST],
                record[R_OFFSET])


def combine(concrete: list[list[Row]], candidates: list[list[Row]]) -> list[Row]:
    """Concrete functions of every part in order, then the inline-only candidates not already listed
    (same linkage or qualified name, file and line), first come first served."""
    result: list[Row] = []
    for part in concrete:
        result += part
    seen = {(row[4] or row[3], row[5], row[6]) for row in result}
    for part in candidates:
        for row in part:
            key = (row[4] or row[3], row[5], row[6])
            if key not in seen and (row[2] or row[4]):
                seen.add(key)
                result.append(row)
    return result


def scan_rows(sections: DwarfSections) -> list[Row]:
    """Every function of .debug_info as rows in ScannedFunction's field order, in one process."""
    if not sections.info or not sections.abbrev:
        return []
    scan = DwarfScan(sections).run()
    concrete, candidates = scan.rows()
    return combine([concrete], [candidates])


def scan_dwarf(sections: DwarfSections) -> list[ScannedFunction]:
    """Every function of .debug_info: concrete ones with their static low_pc, inline-only ones at 0."""
    return [ScannedFunction._make(row) for row in scan_rows(sections)]
