"""Per-unit-shape walking plans: abbreviations turned into lookup tables and small generated functions.

The scanner spends its time on millions of DIEs it does not care about and on about a million subprogram
and scope DIEs it must decode. A `UnitPlan` serves both, indexed by abbreviation code:

- `fast[code]`: for a one-byte code whose DIE has no children and a fixed size, the bytes to step over
  (code included), negated for a formal parameter (parameters are counted, everything else ignored);
- `kinds[code]` (FAST_*) for the other one-byte codes: a subprogram decoded by `subprograms[code]`; a DIE
  fixed but for one short block or expression (a `DW_AT_location`: step `block_pre[code]` bytes, a length
  byte below 0x80 and its block, then `block_post[code]`); or any other childless DIE, stepped over by
  `skippers[code]`;
- `actions[code]`: the general case (any code, children, scopes, sibling jumps), an `Action`.

Generated code is straight-line Python with one `struct` call per run of fixed-size attributes, compiled
once per abbreviation shape per process. It reads exactly what `dwarf_unit.Unit.read` would, in the same
attribute order, and fails the same way on malformed data: a faster spelling of the abbreviation.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, NamedTuple

from strobe.symbols.dwarf_forms import (
    FORM_ADDR,
    FORM_DATA1,
    FORM_DATA2,
    FORM_DATA4,
    FORM_DATA8,
    FORM_FLAG,
    FORM_FLAG_PRESENT,
    FORM_IMPLICIT_CONST,
    FORM_REF1,
    FORM_REF2,
    FORM_REF4,
    FORM_REF8,
    FORM_REF_ADDR,
    FORM_SEC_OFFSET,
    FORM_STRP,
    KIND_PARAM,
    KIND_SCOPE,
    KIND_SKIP_TREE,
    KIND_SUBPROGRAM,
    SLOT_DECLARATION,
    SLOT_FILE,
    SLOT_HIGH_ADDRESS,
    SLOT_HIGH_OFFSET,
    SLOT_INLINE,
    SLOT_LINE,
    SLOT_LINKAGE,
    SLOT_LOW,
    SLOT_NAME,
    SLOT_ORIGIN,
    SLOT_RANGES,
    SLOT_RANGES_INDEX,
    SLOT_SPEC,
    TAG_NAMESPACE,
    VAR_BLOCK1,
    VAR_BLOCK2,
    VAR_BLOCK4,
    VAR_BLOCK_LEB,
    VAR_INDIRECT,
    VAR_LEB,
    VAR_STRING,
    Abbrev,
    AbbrevDecl,
    compile_abbrev,
    read_uleb,
    skip_variable,
    u16_from,
    u32_from,
)

# Action kinds (what the walk does with a DIE that is on no fast path).
ACT_SKIP = 0  # step over the attributes; push a frame if it has children
ACT_PARAM = 1  # the same, counting a formal parameter of the enclosing function
ACT_SKIP_TREE = 2  # jump to DW_AT_sibling when it points forward, else walk the subtree
ACT_SCOPE = 3  # namespace/class/struct/union/interface/module: decode name and specification
ACT_SUBPROGRAM = 4  # decode into a record

Skipper = Callable[[bytes, int], int]
# scope decoder: (data, pos, base, read, strings, debug_str) -> (pos, name, specification)
# subprogram decoder: (data, pos, die, prefix, rust, base, unit, strings, debug_str) -> (pos, record)
# `strings` caches decoded .debug_str strings by offset (names repeat; linkage names do not, and skip it).
Decoder = Callable[..., tuple[Any, ...]]


class Action(NamedTuple):
    kind: int
    has_children: bool
    skip: Skipper
    decode: Decoder | None
    sibling_at: int
    sibling_form: int
    namespace: bool  # a DW_TAG_namespace (its anonymous form is named "(anonymous namespace)")


# Fast-path kinds of one-byte codes (UnitPlan.kinds).
FAST_OTHER = 0  # none: the general path (actions)
FAST_SUBPROGRAM = 1  # decode with subprograms[code]
FAST_SKIP = 2  # step over with skippers[code]
FAST_SKIP_PARAM = 3  # the same, counting a parameter
FAST_BLOCK = 4  # block_pre/block_post
FAST_BLOCK_PARAM = 5  # the same, counting a parameter


class UnitPlan(NamedTuple):
    fast: list[int]  # >0: bytes of a fixed childless DIE to step over; <0: the same for a parameter, negated
    kinds: list[int]  # FAST_* for the other one-byte codes
    block_pre: list[int]
    block_post: list[int]
    skippers: list[Skipper | None]
    subprograms: list[Decoder | None]
    children: list[bool]  # has_children, for one-byte codes
    actions: list[Action | None]


Shape = tuple[int, int, int]  # address size, offset size, version

# Compiled once per distinct abbreviation shape, shared by every unit and scan of this process (a few
# thousand shapes at most in practice; forgotten past _COMPILED_LIMIT so a long-lived daemon stays small).
_COMPILED: dict[tuple[Any, ...], Any] = {}
_COMPILED_LIMIT = 50_000


def build_unit_plan(decls: dict[int, AbbrevDecl], address_size: int, offset_size: int, version: int) -> UnitPlan:
    """The plan for one abbreviation table."""
    if len(_COMPILED) > _COMPILED_LIMIT:
        _COMPILED.clear()
    shape = (address_size, offset_size, version)
    size = max(decls, default=0) + 1
    fast = [0] * 256
    kinds = [FAST_OTHER] * 256
    block_pre = [0] * 256
    block_post = [0] * 256
    skippers: list[Skipper | None] = [None] * 256
    subprograms: list[Decoder | None] = [None] * 256
    children = [False] * 256
    actions: list[Action | None] = [None] * size
    for code, decl in decls.items():
        abbrev = _compile(decl, shape)
        kind = abbrev.kind
        if kind == KIND_SKIP_TREE:
            action = ACT_SKIP_TREE
        elif kind == KIND_SCOPE:
            action = ACT_SCOPE
        elif kind == KIND_SUBPROGRAM:
            action = ACT_SUBPROGRAM
        elif kind == KIND_PARAM:
            action = ACT_PARAM
        else:
            action = ACT_SKIP  # KIND_OTHER, and unit DIEs nested where they do not belong
        skipper = _skipper(abbrev.skip, shape)
        decoder: Decoder | None = None
        if action == ACT_SCOPE:
            decoder = _scope_decoder(abbrev, shape)
        elif action == ACT_SUBPROGRAM:
            decoder = _subprogram_decoder(abbrev, shape)
        actions[code] = Action(
            action, abbrev.has_children, skipper, decoder, abbrev.sibling_at, abbrev.sibling_form,
            decl.tag == TAG_NAMESPACE,
        )
        if code >= 0x80:
            continue
        children[code] = abbrev.has_children
        if action == ACT_SUBPROGRAM:
            kinds[code] = FAST_SUBPROGRAM
            subprograms[code] = decoder
        if abbrev.has_children or action not in (ACT_SKIP, ACT_PARAM):
            continue
        is_param = action == ACT_PARAM
        if abbrev.fixed >= 0:
            fast[code] = -(1 + abbrev.fixed) if is_param else 1 + abbrev.fixed
            continue
        steps = abbrev.skip
        blocks = [i for i, step in enumerate(steps) if step < 0]
        skippers[code] = skipper  # also for the block path: a block longer than 0x7f bytes needs it
        if len(blocks) == 1 and steps[blocks[0]] in (VAR_BLOCK_LEB, VAR_BLOCK1):
            at = blocks[0]
            block_pre[code] = 1 + sum(steps[:at])
            block_post[code] = sum(steps[at + 1 :])
            kinds[code] = FAST_BLOCK_PARAM if is_param else FAST_BLOCK
        else:
            kinds[code] = FAST_SKIP_PARAM if is_param else FAST_SKIP
    return UnitPlan(fast, kinds, block_pre, block_post, skippers, subprograms, children, actions)


def _compile(decl: AbbrevDecl, shape: Shape) -> Abbrev:
    key = ("abbrev", decl, shape)
    found: Abbrev | None = _COMPILED.get(key)
    if found is None:
        found = _COMPILED[key] = compile_abbrev(decl, *shape)
    return found


def _exec(source: str, shape: Shape, constants: dict[str, Any], name: str) -> Any:
    address_size, offset_size, version = shape
    scope: dict[str, Any] = {
        "read_uleb": read_uleb, "skip_variable": skip_variable, "u16_from": u16_from, "u32_from": u32_from,
        "ADDRESS_SIZE": address_size, "OFFSET_SIZE": offset_size, "VERSION": version, **constants,
    }
    exec(compile(source, f"<dwarf plan: {name}>", "exec"), scope)
    return scope[name]


# --- skipping ------------------------------------------------------------------------------------


def _skip_lines(steps: tuple[int, ...] | list[int], indent: str) -> list[str]:
    """Statements advancing `pos` over skip steps (ints as in Abbrev.skip)."""
    lines: list[str] = []
    for step in steps:
        if step >= 0:
            lines.append(f"{indent}pos += {step}")
        elif step == VAR_LEB:
            lines += [f"{indent}while data[pos] & 0x80:", f"{indent}    pos += 1", f"{indent}pos += 1"]
        elif step == VAR_STRING:
            lines.append(f"{indent}pos = data.index(0, pos) + 1")
        elif step == VAR_BLOCK_LEB:
            lines += [
                f"{indent}n = data[pos]",
                f"{indent}if n < 0x80:",
                f"{indent}    pos += 1 + n",
                f"{indent}else:",
                f"{indent}    n, pos = read_uleb(data, pos)",
                f"{indent}    pos += n",
            ]
        elif step == VAR_BLOCK1:
            lines.append(f"{indent}pos += 1 + data[pos]")
        elif step == VAR_BLOCK2:
            lines.append(f"{indent}pos += 2 + u16_from(data, pos)[0]")
        elif step == VAR_BLOCK4:
            lines.append(f"{indent}pos += 4 + u32_from(data, pos)[0]")
        else:  # VAR_INDIRECT
            lines.append(f"{indent}pos = skip_variable(data, pos, {VAR_INDIRECT}, ADDRESS_SIZE, OFFSET_SIZE, VERSION)")
    return lines


def _skipper(steps: tuple[int, ...], shape: Shape) -> Skipper:
    key = ("skip", steps, shape)
    found: Skipper | None = _COMPILED.get(key)
    if found is None:
        source = "\n".join(["def skip(data, pos):", *_skip_lines(steps, "    "), "    return pos"])
        found = _COMPILED[key] = _exec(source, shape, {}, "skip")
    return found


# --- decoding ------------------------------------------------------------------------------------

_SCOPE_WANTED = frozenset({SLOT_NAME, SLOT_SPEC})
_SUBPROGRAM_WANTED = frozenset(
    {SLOT_NAME, SLOT_LINKAGE, SLOT_LOW, SLOT_HIGH_OFFSET, SLOT_HIGH_ADDRESS, SLOT_FILE, SLOT_LINE, SLOT_INLINE,
     SLOT_DECLARATION, SLOT_SPEC, SLOT_ORIGIN, SLOT_RANGES, SLOT_RANGES_INDEX}
)
INT, ANY = "int", "any"  # what a slot is known to hold: always an int, or anything Unit.read may return


def _struct_code(form: int, shape: Shape) -> tuple[str, str] | None:
    """(struct format letter, how the unpacked integer becomes the value) for forms a struct call can read;
    None for the rest (read through Unit.read)."""
    address_size, offset_size, version = shape
    wide = {4: "I", 8: "Q"}
    if form == FORM_STRP:
        return (wide[offset_size], "string") if offset_size in wide else None
    letters = {FORM_DATA1: "B", FORM_DATA2: "H", FORM_DATA4: "I", FORM_DATA8: "Q"}
    if form in letters:
        return letters[form], "int"
    refs = {FORM_REF1: "B", FORM_REF2: "H", FORM_REF4: "I", FORM_REF8: "Q"}
    if form in refs:
        return refs[form], "ref"
    if form == FORM_ADDR:
        return (wide[address_size], "int") if address_size in wide else None
    if form == FORM_SEC_OFFSET:
        return (wide[offset_size], "int") if offset_size in wide else None
    if form == FORM_REF_ADDR:
        size = address_size if version <= 2 else offset_size
        return (wide[size], "int") if size in wide else None
    if form == FORM_FLAG:
        return "B", "flag"
    return None


class _Writer:
    """Emits the attribute reads of one decode plan. Afterwards `values[slot]` is a Python expression for
    the slot's final value (absent slots: no entry) and `kinds[slot]` says what it may hold."""

    def __init__(self, shape: Shape, wanted: frozenset[int]) -> None:
        self.shape = shape
        self.wanted = wanted
        self.lines: list[str] = []
        self.constants: dict[str, Any] = {}
        self.values: dict[int, str] = {}
        self.kinds: dict[int, str] = {}
        self.uses_read = False
        self.temps = 0
        # Steps for one struct call: int pads, ("read", slot, how, letter), ("const", slot, literal, kind).
        self.pending: list[Any] = []

    def temp(self) -> str:
        self.temps += 1
        return f"v{self.temps}"

    def assign(self, slot: int, expression: str, kind: str) -> None:
        if slot in self.wanted:
            self.values[slot] = expression
            previous = self.kinds.get(slot)
            self.kinds[slot] = kind if previous in (None, kind) else ANY

    def constant(self, slot: int, literal: str, kind: str) -> None:
        if slot in self.wanted:
            target = self.temp()
            self.lines.append(f"    {target} = {literal}")
            self.assign(slot, target, kind)

    def flush(self) -> None:
        """Read the pending values with one struct call; pads after the last value stay pending."""
        reads = [i for i, item in enumerate(self.pending) if not isinstance(item, int) and item[0] == "read"]
        if not reads:
            return
        taken = self.pending[: reads[-1] + 1]
        del self.pending[: reads[-1] + 1]
        fmt = "<"
        for item in taken:
            if isinstance(item, int):
                fmt += f"{item}x"
            elif item[0] == "read":
                fmt += item[3]
        unpacker = struct.Struct(fmt)
        name = f"_unpack{len(self.constants)}"
        self.constants[name] = unpacker.unpack_from
        targets = [self.temp() for _ in reads]
        self.lines.append(f"    {', '.join(targets)}{',' if len(targets) == 1 else ''} = {name}(data, pos)")
        self.lines.append(f"    pos += {unpacker.size}")
        read_targets = iter(targets)
        for item in taken:
            if isinstance(item, int):
                continue
            if item[0] == "const":
                self.constant(item[1], item[2], item[3])
                continue
            _, slot, how, _ = item
            target = next(read_targets)
            if slot not in self.wanted:
                continue
            if how == "string" and slot == SLOT_LINKAGE:
                decoded = f'debug_str[{target} : debug_str.index(0, {target})].decode("utf-8", "replace")'
                self.lines.append(f"    {target} = {decoded}")
                self.assign(slot, target, ANY)
            elif how == "string":
                text = f"s{target}"
                self.lines += [
                    f"    {text} = strings.get({target})",
                    f"    if {text} is None:",
                    f'        {text} = strings[{target}] = debug_str[{target} : debug_str.index(0, {target})].decode('
                    f'"utf-8", "replace")',
                ]
                self.assign(slot, text, ANY)
            elif how == "ref":
                self.assign(slot, f"(base + {target})", INT)
            elif how == "flag":
                self.lines.append(f"    {target} = {target} != 0")
                self.assign(slot, target, ANY)
            else:
                self.assign(slot, target, INT)

    def flush_pads(self) -> None:
        self.flush()
        pad = 0
        for item in self.pending:
            if isinstance(item, int):
                pad += item
            else:
                self.constant(item[1], item[2], item[3])
        self.pending.clear()
        if pad:
            self.lines.append(f"    pos += {pad}")

    def write(self, plan: tuple[int | tuple[int, int, int], ...]) -> None:
        for step in plan:
            if isinstance(step, int):
                if step >= 0:
                    self.pending.append(step)
                else:
                    self.flush_pads()
                    self.lines.extend(_skip_lines([step], "    "))
                continue
            slot, form, implicit = step
            if form == FORM_FLAG_PRESENT:
                self.pending.append(("const", slot, "True", ANY))
                continue
            if form == FORM_IMPLICIT_CONST:
                self.pending.append(("const", slot, repr(implicit), INT))
                continue
            code = _struct_code(form, self.shape)
            if code is not None:
                self.pending.append(("read", slot, code[1], code[0]))
                continue
            self.flush_pads()
            self.uses_read = True
            target = self.temp() if slot in self.wanted else "_"
            self.lines.append(f"    {target}, pos = read(pos, {form}, {implicit!r})")
            self.assign(slot, target, ANY)
        self.flush_pads()


def _scope_decoder(abbrev: Abbrev, shape: Shape) -> Decoder:
    key = ("scope", abbrev.decode, shape)
    found: Decoder | None = _COMPILED.get(key)
    if found is None:
        writer = _Writer(shape, _SCOPE_WANTED)
        writer.write(abbrev.decode)
        values = writer.values
        lines = ["def decode(data, pos, base, read, strings, debug_str):", *writer.lines,
                 f"    return pos, {values.get(SLOT_NAME, 'None')}, {values.get(SLOT_SPEC, 'None')}"]
        found = _COMPILED[key] = _exec("\n".join(lines), shape, writer.constants, "decode")
    return found


def _subprogram_decoder(abbrev: Abbrev, shape: Shape) -> Decoder:
    key = ("subprogram", abbrev.decode, shape)
    found: Decoder | None = _COMPILED.get(key)
    if found is None:
        source, constants = subprogram_source(abbrev.decode, shape)
        found = _COMPILED[key] = _exec(source, shape, constants, "decode")
    return found


def subprogram_source(plan: tuple[int | tuple[int, int, int], ...], shape: Shape) -> tuple[str, dict[str, Any]]:
    """Source of `decode(data, pos, die, prefix, rust, base, unit, strings, debug_str) -> (pos, record)`,
    the scanner's record list [die, name, linkage, low, size, file, line, inline, declaration, spec, origin,
    params=0, prefix, rust], with the size and file rules of the scanner specialised to this abbreviation."""
    writer = _Writer(shape, _SUBPROGRAM_WANTED)
    writer.write(plan)
    lines = ["def decode(data, pos, die, prefix, rust, base, unit, strings, debug_str):"]
    if writer.uses_read:
        lines.append("    read = unit.read")
    lines += writer.lines
    values, kinds = writer.values, writer.kinds

    def value(slot: int) -> str:
        return values.get(slot, "None")

    low = value(SLOT_LOW)
    size_lines, size = _size_lines(values, kinds)
    if size_lines:
        lines += size_lines
        low = "low"
    if SLOT_FILE not in values:
        file = "None"
    elif kinds[SLOT_FILE] == INT:
        file = f"unit.file_name({values[SLOT_FILE]})"
    else:
        lines.append(f"    file_index = {values[SLOT_FILE]}")
        file = "unit.file_name(file_index) if file_index.__class__ is int else None"
    record = [
        "die", value(SLOT_NAME), value(SLOT_LINKAGE), low, size, file, value(SLOT_LINE), value(SLOT_INLINE),
        value(SLOT_DECLARATION), value(SLOT_SPEC), value(SLOT_ORIGIN), "0", "prefix", "rust",
    ]
    lines.append(f"    return pos, [{', '.join(record)}]")
    return "\n".join(lines), writer.constants


def _size_lines(values: dict[int, str], kinds: dict[int, str]) -> tuple[list[str], str]:
    """The scanner's size rule, specialised to the attributes this abbreviation has: (statements, the size
    expression). With statements, the (possibly range-derived) low_pc is in the local `low`."""
    has = values.__contains__
    low_is_int = has(SLOT_LOW) and kinds[SLOT_LOW] == INT
    high_offset, high_address = values.get(SLOT_HIGH_OFFSET), values.get(SLOT_HIGH_ADDRESS)
    if low_is_int and high_offset is not None and kinds[SLOT_HIGH_OFFSET] == INT:
        return [], high_offset  # the common case: low_pc address, high_pc length
    if not has(SLOT_LOW) and not has(SLOT_RANGES) and not has(SLOT_RANGES_INDEX):
        return [], "0"  # a declaration or an abstract instance
    out = [f"    low = {values.get(SLOT_LOW, 'None')}", "    size = 0"]
    high: list[str] = []
    if high_offset is not None:
        high = [f"if {high_offset} is not None:", f"    size = {high_offset}"]
        if high_address is not None:
            high += [f"elif {high_address} is not None:", f"    size = {high_address} - low"]
    elif high_address is not None:
        high = [f"if {high_address} is not None:", f"    size = {high_address} - low"]
    ranges_lines: list[str] = []
    if has(SLOT_RANGES) or has(SLOT_RANGES_INDEX):
        ranges, index = values.get(SLOT_RANGES, "None"), values.get(SLOT_RANGES_INDEX, "None")
        ranges_lines = [
            f"({ranges} is not None or {index} is not None) and not {values.get(SLOT_DECLARATION, 'None')}:",
            f"        first = unit.first_range({ranges}, False) if {ranges} is not None else "
            f"unit.first_range({index}, True)",
            "        if first is not None:",
            "            low, size = first[0], first[1] - first[0]",
        ]
    if low_is_int:
        out += [f"    {line}" for line in high]
        return out, "size"
    out.append("    if low is not None:")
    out += [f"        {line}" for line in high] or ["        pass"]
    if ranges_lines:
        out.append(f"    elif {ranges_lines[0]}")
        out += ranges_lines[1:]
    return out, "size"
