"""Global and static variables of .debug_info in one pass that skips what cannot hold one.

A variable is kept when its DW_AT_location is a static address: `DW_OP_addr a` (optionally followed by
`DW_OP_plus_uconst n`), or `DW_OP_addrx i` / `DW_OP_GNU_addr_index i` (DWARF 5, split-address forms).
Thread-locals (a location ending in DW_OP_form_tls_address / DW_OP_GNU_push_tls_address) are kept
without an address so a lookup can say why it cannot be read.

Names: the enclosing namespaces (Rust modules are namespaces too) + DW_AT_name: "audio::gTempo",
"vars_rs::engine::LEVEL", "(anonymous namespace)::gHidden". A definition that refers to its declaration
(DW_AT_specification: C++ namespace variables declared first, class static members) takes the
declaration's qualified name. Function-local statics are named after their function: "main::count".

What is skipped: the subtrees of types (classes, structs, enums…; class static members are named from
their linkage name instead of walking class bodies), of function declarations and of inlined calls, via
DW_AT_sibling when it sits at a fixed offset; every other attribute is stepped over by form without
being decoded, except the location of DW_TAG_variable DIEs, whose first operation is peeked at.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from strobe.symbols.demangle import demangle
from strobe.symbols.dwarf_dies import (
    AT_ABSTRACT_ORIGIN,
    AT_DECLARATION,
    AT_EXTERNAL,
    AT_LINKAGE_NAME,
    AT_LOCATION,
    AT_MIPS_LINKAGE_NAME,
    AT_NAME,
    AT_SPECIFICATION,
    TAG_CLASS_TYPE,
    TAG_INTERFACE_TYPE,
    TAG_LEXICAL_BLOCK,
    TAG_MODULE,
    TAG_NAMESPACE,
    TAG_STRUCTURE_TYPE,
    TAG_SUBPROGRAM,
    TAG_UNION_TYPE,
    TAG_VARIABLE,
    DieReader,
)
from strobe.symbols.dwarf_forms import (
    AT_SIBLING,
    DECODE_ERRORS,
    FORM_ADDRX,
    FORM_BLOCK,
    FORM_BLOCK1,
    FORM_BLOCK2,
    FORM_BLOCK4,
    FORM_EXPRLOC,
    FORM_GNU_ADDR_INDEX,
    FORM_GNU_STR_INDEX,
    FORM_INDIRECT,
    FORM_LOCLISTX,
    FORM_REF_ADDR,
    FORM_REF_UDATA,
    FORM_RNGLISTX,
    FORM_SDATA,
    FORM_STRING,
    FORM_STRX,
    FORM_UDATA,
    REF_SIZES,
    VAR_BLOCK1,
    VAR_BLOCK2,
    VAR_BLOCK4,
    VAR_BLOCK_LEB,
    VAR_INDIRECT,
    VAR_LEB,
    VAR_STRING,
    AbbrevDecl,
    fixed_form_size,
    parse_abbrev_table,
    read_uint,
    read_uleb,
    skip_variable,
)
from strobe.symbols.dwarf_scan import list_units
from strobe.symbols.dwarf_unit import UT_COMPILE, UT_PARTIAL, DwarfSections, Unit

log = logging.getLogger(__name__)

ANONYMOUS_NAMESPACE = "(anonymous namespace)"
OP_ADDR = 0x03
OP_PLUS_UCONST = 0x23
OP_ADDRX = 0xA1
OP_GNU_ADDR_INDEX = 0xFB
OP_FORM_TLS_ADDRESS = 0x9B
OP_GNU_PUSH_TLS_ADDRESS = 0xE0

_VARIABLE_FORMS: dict[int, int] = {
    FORM_SDATA: VAR_LEB, FORM_UDATA: VAR_LEB, FORM_REF_UDATA: VAR_LEB, FORM_STRX: VAR_LEB, FORM_ADDRX: VAR_LEB,
    FORM_LOCLISTX: VAR_LEB, FORM_RNGLISTX: VAR_LEB, FORM_GNU_ADDR_INDEX: VAR_LEB, FORM_GNU_STR_INDEX: VAR_LEB,
    FORM_STRING: VAR_STRING, FORM_BLOCK1: VAR_BLOCK1, FORM_BLOCK2: VAR_BLOCK2, FORM_BLOCK4: VAR_BLOCK4,
    FORM_BLOCK: VAR_BLOCK_LEB, FORM_EXPRLOC: VAR_BLOCK_LEB, FORM_INDIRECT: VAR_INDIRECT,
}
_LOCATION_FORMS = frozenset({FORM_EXPRLOC, FORM_BLOCK1, FORM_BLOCK2, FORM_BLOCK4, FORM_BLOCK})
_STRUCT_TAGS = frozenset({TAG_STRUCTURE_TYPE, TAG_CLASS_TYPE, TAG_UNION_TYPE, TAG_INTERFACE_TYPE})
_SCOPE_TAGS = frozenset({TAG_NAMESPACE, TAG_MODULE})

# What to do with a DIE of one abbreviation.
A_SKIP = 0  # step over its attributes; walk its children (if any) in the same scope
A_TREE = 1  # jump over it and its subtree with DW_AT_sibling (walk like A_SKIP if that fails)
A_VAR = 2  # a variable with a location: peek at it, decode the DIE if it is a static address
A_DECL = 3  # a variable declaration: remember its qualified name for definitions that refer to it
A_SCOPE = 4  # a namespace (or a struct walked for want of a sibling): its name prefixes its children
A_FUNC = 5  # a function definition: its children are named after it (worked out only if needed)
A_TYPE = 6  # a struct/class/union: skipped like A_TREE, but walked inside a function (lambdas, local classes)


class Action(NamedTuple):
    kind: int
    has_children: bool
    fixed: int  # byte size of all attributes, -1 if one has a variable size
    steps: tuple[int, ...]  # to step over all attributes: byte counts (>0) and variable-size classes (<0)
    to_location: tuple[int, ...]  # A_VAR: steps up to DW_AT_location
    location_form: int
    sibling_at: int  # A_TREE: byte offset of DW_AT_sibling in the attributes
    sibling_form: int
    attrs: tuple[tuple[int, int, int], ...]
    tag: int
    definition: bool  # A_TYPE: a struct/class/union definition (not a declaration)
    to_name: tuple[int, ...]  # A_TYPE: steps up to DW_AT_name
    name_form: int  # its form, 0 if the abbreviation has no DW_AT_name


class ScannedVariable(NamedTuple):
    name: str  # qualified: "audio::Clock::instances", "main::count", "vars_rs::CONFIG"
    address: int | None  # static address; None for a thread-local
    die: int  # .debug_info offset of the defining DIE
    unit: int  # .debug_info offset of its unit
    external: bool  # visible to other units (False: a file or function static)


class LazyScope(NamedTuple):
    """The scope of the children of a function (or of a class inside one): named `<parent><name>::` once a
    static inside asks."""

    die: int
    parent: Any  # str prefix or another LazyScope


def _steps(attrs: list[tuple[int, int, int]], unit: Unit) -> tuple[tuple[int, ...], int]:
    steps: list[int] = []
    fixed = 0
    all_fixed = True
    for _, form, _ in attrs:
        size = fixed_form_size(form, unit.address_size, unit.offset_size, unit.version)
        if size is None:
            all_fixed = False
            steps.append(_VARIABLE_FORMS[form])
        elif size:
            fixed += size
            if steps and steps[-1] > 0:
                steps[-1] += size
            else:
                steps.append(size)
    return tuple(steps), fixed if all_fixed else -1


def compile_action(decl: AbbrevDecl, unit: Unit) -> Action:
    attrs = list(decl.attrs)
    names = [attr for attr, _, _ in attrs]
    steps, fixed = _steps(attrs, unit)
    sibling_at, sibling_form, offset = -1, 0, 0
    for attr, form, _ in attrs:
        size = fixed_form_size(form, unit.address_size, unit.offset_size, unit.version)
        if attr == AT_SIBLING and (form in REF_SIZES or form == FORM_REF_ADDR):
            sibling_at, sibling_form = offset, form
            break
        if size is None:
            break
        offset += size
    tag = decl.tag
    kind = A_SKIP
    to_location: tuple[int, ...] = ()
    location_form = 0
    if tag == TAG_VARIABLE:
        if AT_LOCATION in names and attrs[names.index(AT_LOCATION)][1] in _LOCATION_FORMS:
            kind = A_VAR
            at = names.index(AT_LOCATION)
            to_location = _steps(attrs[:at], unit)[0]
            location_form = attrs[at][1]
        elif AT_DECLARATION in names:
            kind = A_DECL
    elif decl.has_children:
        if tag in _SCOPE_TAGS:
            kind = A_SCOPE
        elif tag == TAG_SUBPROGRAM and AT_DECLARATION not in names:
            kind = A_FUNC
        elif tag == TAG_LEXICAL_BLOCK:
            kind = A_SKIP
        elif tag in _STRUCT_TAGS:
            kind = A_TYPE
        else:
            kind = A_TREE if sibling_at >= 0 else A_SKIP
    to_name: tuple[int, ...] = ()
    name_form = 0
    if kind == A_TYPE and AT_NAME in names:
        at = names.index(AT_NAME)
        to_name, name_form = _steps(attrs[:at], unit)[0], attrs[at][1]
    return Action(kind, decl.has_children, fixed, steps, to_location, location_form, sibling_at, sibling_form,
                  decl.attrs, tag, kind == A_TYPE and AT_DECLARATION not in names, to_name, name_form)


def _skip(steps: tuple[int, ...], data: bytes, pos: int, unit: Unit) -> int:
    for step in steps:
        if step > 0:
            pos += step
        elif step == VAR_LEB:
            while data[pos] & 0x80:
                pos += 1
            pos += 1
        elif step == VAR_STRING:
            pos = data.index(0, pos) + 1
        elif step == VAR_BLOCK_LEB:
            length = data[pos]
            if length < 0x80:
                pos += 1 + length
            else:
                length, pos = read_uleb(data, pos)
                pos += length
        else:
            pos = skip_variable(data, pos, step, unit.address_size, unit.offset_size, unit.version)
    return pos


def static_location(expr: bytes, unit: Unit) -> tuple[int | None, bool] | None:
    """(address, thread_local) of a location expression naming a static address, else None."""
    if not expr:
        return None
    op = expr[0]
    size = unit.address_size
    if op == OP_ADDR and len(expr) >= 1 + size:
        address = read_uint(expr, 1, size)
        rest = expr[1 + size :]
        if not rest:
            return address, False
        if rest[0] == OP_PLUS_UCONST:
            offset, end = read_uleb(rest, 1)
            if end == len(rest):
                return address + offset, False
    elif op in (OP_ADDRX, OP_GNU_ADDR_INDEX):
        index, end = read_uleb(expr, 1)
        if end == len(expr):
            found = unit.address_index(index)
            return (found, False) if found is not None else None
    if expr[-1] in (OP_FORM_TLS_ADDRESS, OP_GNU_PUSH_TLS_ADDRESS):
        return None, True
    return None


class VariableScan:
    """Walks every compile unit once; `variables()` then names definitions that refer to declarations."""

    def __init__(self, sections: DwarfSections, reader: DieReader) -> None:
        self.sections = sections
        self.reader = reader
        self.found: list[ScannedVariable] = []
        self.failed_units = 0
        self._decl_names: dict[int, str] = {}
        # Definitions naming their declaration: (die, unit, address, external, ref, own linkage name).
        self._pending: list[tuple[int, int, int | None, bool, int, str | None]] = []
        self._actions: dict[tuple[int, int, int, int], list[Action | None]] = {}
        self._func_names: dict[int, str] = {}
        # The first struct/class/union definition of each name outside functions, by DW_AT_name.
        self.struct_types: dict[str, int] = {}

    def run(self) -> VariableScan:
        units, failed = list_units(self.sections)
        self.failed_units = failed
        for unit in units:
            try:
                self._walk(unit)
            except DECODE_ERRORS as exc:
                self.failed_units += 1
                log.warning("skipping malformed DWARF unit at .debug_info+0x%x: %r", unit.offset, exc)
        return self

    def _plan(self, unit: Unit) -> list[Action | None]:
        plan = self._actions.get(unit.shape)
        if plan is None:
            table = parse_abbrev_table(self.sections.abbrev, unit.abbrev_offset)
            plan = [None] * (max(table, default=0) + 1)
            for code, decl in table.items():
                plan[code] = compile_action(decl, unit)
            self._actions[unit.shape] = plan
        return plan

    def _walk(self, unit: Unit) -> None:
        data = self.sections.info
        plan = self._plan(unit)
        code, pos = read_uleb(data, unit.die_start)
        top = plan[code] if 0 < code < len(plan) else None
        if top is None or unit.unit_type not in (UT_COMPILE, UT_PARTIAL):
            return
        decl = AbbrevDecl(0, top.has_children, top.attrs)
        pos = unit.read_unit_die(decl, pos)
        if not top.has_children:
            return
        end = unit.end
        read = unit.read
        stack: list[Any] = []
        prefix: Any = ""
        while pos < end:
            code = data[pos]
            die = pos
            if code < 0x80:
                pos += 1
            else:
                code, pos = read_uleb(data, pos)
            if not code:
                if not stack:
                    break
                prefix = stack.pop()
                continue
            action = plan[code]
            if action is None:
                raise ValueError(f"unknown abbreviation {code} at .debug_info+0x{die:x}")
            kind = action[0]
            if kind == A_TYPE:
                if prefix.__class__ is not str:  # a class local to a function, or a lambda's closure type
                    fixed = action[2]
                    pos = pos + fixed if fixed >= 0 else _skip(action[3], data, pos, unit)
                    stack.append(prefix)
                    prefix = LazyScope(die, prefix)
                    continue
                if action[10] and action[12]:
                    name, _ = read(_skip(action[11], data, pos, unit), action[12], 0)
                    if name.__class__ is str and name not in self.struct_types:
                        self.struct_types[name] = die
                kind = A_TREE if action[6] >= 0 else A_SCOPE
            if kind == A_SKIP:
                fixed = action[2]
                pos = pos + fixed if fixed >= 0 else _skip(action[3], data, pos, unit)
                if action[1]:
                    stack.append(prefix)
                continue
            if kind == A_TREE:
                at = pos + action[6]
                form = action[7]
                if form == FORM_REF_ADDR:
                    target = read_uint(data, at, unit.address_size if unit.version <= 2 else unit.offset_size)
                else:
                    target = unit.offset + read_uint(data, at, REF_SIZES[form])
                if pos < target <= end:
                    pos = target
                    continue
                pos = _skip(action[3], data, pos, unit)
                stack.append(prefix)
                continue
            if kind == A_VAR:
                at = _skip(action[4], data, pos, unit)
                form = action[5]
                if form == FORM_EXPRLOC:
                    length, start = (data[at], at + 1) if data[at] < 0x80 else read_uleb(data, at)
                    op = data[start] if length else 0
                    if op != OP_ADDR and op != OP_ADDRX and op != OP_GNU_ADDR_INDEX and (
                        not length or data[start + length - 1] not in (OP_FORM_TLS_ADDRESS, OP_GNU_PUSH_TLS_ADDRESS)
                    ):
                        pos = _skip(action[3], data, pos, unit)
                        if action[1]:
                            stack.append(prefix)
                        continue
                attrs: dict[int, Any] = {}
                for attr, attr_form, implicit in action[8]:
                    attrs[attr], pos = read(pos, attr_form, implicit)
                self._variable(die, unit, attrs, prefix)
                if action[1]:
                    stack.append(prefix)
                continue
            if kind == A_FUNC:
                fixed = action[2]
                pos = pos + fixed if fixed >= 0 else _skip(action[3], data, pos, unit)
                stack.append(prefix)
                prefix = LazyScope(die, prefix)
                continue
            # A_DECL / A_SCOPE: decode the attributes.
            name = None
            for attr, attr_form, implicit in action[8]:
                value, pos = read(pos, attr_form, implicit)
                if attr == AT_NAME:
                    name = value
            if kind == A_DECL:
                if isinstance(name, str) and prefix.__class__ is str:
                    self._decl_names[die] = prefix + name
                if action[1]:
                    stack.append(prefix)
                continue
            stack.append(prefix)
            if prefix.__class__ is str:
                if not isinstance(name, str):
                    name = ANONYMOUS_NAMESPACE if action.tag == TAG_NAMESPACE else "{unnamed}"
                prefix = f"{prefix}{name}::"

    def _variable(self, die: int, unit: Unit, attrs: dict[int, Any], prefix: Any) -> None:
        expr = attrs.get(AT_LOCATION)
        located = static_location(expr, unit) if isinstance(expr, bytes) else None
        if located is None:
            return
        address, _ = located
        external = bool(attrs.get(AT_EXTERNAL))
        ref = attrs.get(AT_SPECIFICATION, attrs.get(AT_ABSTRACT_ORIGIN))
        name = attrs.get(AT_NAME)
        linkage = attrs.get(AT_LINKAGE_NAME, attrs.get(AT_MIPS_LINKAGE_NAME))
        if isinstance(ref, int) and not isinstance(ref, bool) and ref >= 0:
            own = linkage if isinstance(linkage, str) else None
            self._pending.append((die, unit.offset, address, external, ref, own))
            return
        if not isinstance(name, str):
            if not isinstance(linkage, str):
                return
            name = demangle(linkage).name
            prefix = ""
        self.found.append(ScannedVariable(self._prefix(prefix) + name, address, die, unit.offset, external))

    # --- names -----------------------------------------------------------------------------------
    def _prefix(self, scope: Any) -> str:
        if scope.__class__ is str:
            return str(scope)
        name = self._func_names.get(scope.die)
        if name is None:
            name = self._func_names[scope.die] = self._function_name(scope)
        return name + "::"

    def _function_name(self, scope: LazyScope) -> str:
        try:
            die = self.reader.die(scope.die)
        except ValueError:
            return "{function}"
        if die.tag in _STRUCT_TAGS and die.name is None:
            lambda_ = any(c.tag == TAG_SUBPROGRAM and c.name == "operator()" for c in self.reader.children(die))
            return self._prefix(scope.parent) + ("{lambda}" if lambda_ else "{unnamed type}")
        if die.name is not None:
            return self._prefix(scope.parent) + die.name
        for attr in (AT_SPECIFICATION, AT_ABSTRACT_ORIGIN):
            target = self.reader.follow(die, attr)
            if target is None:
                continue
            if target.linkage_name is not None:
                return demangle(target.linkage_name).name
            if target.name is not None:
                return self._prefix(scope.parent) + target.name
        return self._prefix(scope.parent) + "{function}"

    def _declared_name(self, ref: int, linkage: str | None) -> tuple[str | None, bool]:
        """(qualified name, external) of a definition that refers to its declaration `ref`: the name recorded
        for the declaration, else the definition's own linkage name, else the declaration's."""
        name = self._decl_names.get(ref)
        if name is None and linkage is not None:
            name = demangle(linkage).name
        try:
            target = self.reader.die(ref)
        except ValueError:
            return name, False
        external = bool(target.get(AT_EXTERNAL))
        if name is None:
            name = demangle(target.linkage_name).name if target.linkage_name is not None else target.name
        return name, external

    def variables(self) -> list[ScannedVariable]:
        result = list(self.found)
        for die, unit, address, external, ref, linkage in self._pending:
            name, declared_external = self._declared_name(ref, linkage)
            if name:
                result.append(ScannedVariable(name, address, die, unit, external or declared_external))
        return result


def scan_variables(
    sections: DwarfSections, reader: DieReader | None = None
) -> tuple[list[ScannedVariable], dict[str, int]]:
    """Every global/static variable with a static address (or thread-local) in .debug_info, and the offset of
    the first struct/class/union definition of each name (to complete types only declared where used)."""
    if not sections.info or not sections.abbrev:
        return [], {}
    scan = VariableScan(sections, reader or DieReader(sections)).run()
    return scan.variables(), scan.struct_types

