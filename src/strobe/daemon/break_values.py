"""A breakpoint's condition and a logpoint's message compiled for one of its sites: the program's values they name
become reads the agent makes at each hit, and the rest stays JavaScript.

    scope = site_scope(module_path, slide, static_pc, at_entry=False)    # what names mean there
    compiled = compile_text("n > 3 && acc->total != 0", scope)
    compiled.text     # "$v(0) > 3 && $v(1) != 0": JavaScript; $v(i) reads compiled.reads[i] at the hit
    compiled.reads    # the agent's ValueReads: where each value is (a register, a register + offset, an address),
                      # the pointers to follow, and how to read the bytes found there
    specs, warnings = compile_sites(breakpoint)   # the agent's BreakpointSpec of each site, compiled there

A name is, in this order: a parameter or local of the frame at the site (at a line: those in scope there, located
through their DWARF locations relative to the registers at the line's first instruction, the way a pause event
finds them; at a function's entry: its parameters, in the registers they arrive in), then a global or static of the
site's module. `.field`, `->field` and `[index]` steps follow it as debug_read follows them (`acc->total`,
`order.items[2]`, `gConfig->limits.max`); a `.name` on a value that is not a struct is JavaScript's (`s.length` of
a string). `args[i]` is the i-th integer argument at a function's entry. Scalars come as numbers (pointers as
their address), `char *` as the string it points to (at most 256 bytes). A name the site cannot read is refused
when the breakpoint is set, saying why (not in scope, in a register, optimised out, a struct without a field), so
that a typo never turns into a condition that is silently false.

The locations are computed once, symbolically: the frame's registers stand for themselves (marks far above any
address) and a variable's address comes out as one register plus an offset.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from strobe.daemon.breakpoint_state import Breakpoint, Site
from strobe.daemon.signatures import GPRS, register_plan
from strobe.errors import StrobeError, ValidationError
from strobe.instrument.requests import BreakpointSpec, ConditionArg, ReadKind, ValueRead
from strobe.symbols.addresses import locate
from strobe.symbols.cfi import cfa_rule
from strobe.symbols.expressions import STEP, ExpressionError, ReadRecipe, UnknownField, resolve_at, resolve_expression
from strobe.symbols.frame_locals import OPTIMISED_OUT, FrameUnreadable, FrameVariable, frame_variables
from strobe.symbols.frame_walk import REGISTER_NAMES, FrameState
from strobe.symbols.variables import VariableIndex, VariableNotFound, variable_index

MAX_READS = 16  # values one condition or message reads
MAX_STRING = 256  # bytes of a char * shown
_MARK_SHIFT = 64  # register r stands for (r + 1) << 64 in the symbolic frame: far from any address
_SCALARS = frozenset({"int", "uint", "float", "bool", "char", "pointer", "enum"})
_ARG_SIGNS = {"int": True, "char": True, "enum": True, "uint": False, "bool": False, "pointer": False}  # in registers
_REGISTER_BYTES = 8
_ROOT = re.compile(r"(?<![\w$.])([A-Za-z_][\w]*)")
_STRING = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`(?:[^`\\]|\\.)*`")
_JS_NAMES = frozenset({
    "args", "Math", "Number", "String", "Boolean", "JSON", "BigInt", "parseInt", "parseFloat", "isNaN", "isFinite",
    "undefined", "NaN", "Infinity", "true", "false", "null", "typeof", "instanceof", "in", "new", "void", "this",
    "Process", "Memory", "NULL", "Date", "Array", "Object",
})


@dataclass(frozen=True)
class RegisterArg:
    """A parameter at a function's entry: the integer register it arrives in, at its DWARF size and sign."""

    name: str
    reg: str
    size: int
    signed: bool


@dataclass
class SiteScope:
    """What names mean at one breakpoint site."""

    where: str  # "entry of parse_order", "orders.c:42"
    index: VariableIndex | None  # the site's module's variables (its globals), None without debug info
    slide: int
    at_entry: bool
    variables: dict[str, FrameVariable] = field(default_factory=dict)  # in scope at a line (symbolic addresses)
    registers: dict[str, RegisterArg] = field(default_factory=dict)  # at an entry: parameters in registers
    parameter_types: dict[str, int | None] = field(default_factory=dict)  # at an entry: their type DIEs
    entry_reads: dict[str, ValueRead] = field(default_factory=dict)  # at an entry: scalars in xmm or on the stack
    unreadable: str | None = None  # why the frame's variables cannot be located at all


@dataclass
class Compiled:
    text: str  # JavaScript, with $v(i) for the program's values
    reads: list[ValueRead]
    names: list[str]  # the program's names it reads, as written


def site_scope(module: str, slide: int, static_pc: int, at_entry: bool, args: Sequence[RegisterArg] = (),
               where: str = "") -> SiteScope:
    """The names at the static address `static_pc` of `module` (loaded at `slide`): at a function's entry, `args`
    (its parameters' registers: condition_args) with their types; at a line, the frame's
    variables in scope there."""
    try:
        index: VariableIndex | None = variable_index(module)
    except StrobeError:
        index = None
    scope = SiteScope(where or hex(static_pc), index, slide, at_entry, registers={a.name: a for a in args},
                      entry_reads=entry_reads(module, static_pc) if at_entry else {})
    if index is None:
        scope.unreadable = "its module has no debug info"
        return scope
    located = locate(module, static_pc)
    start = located.function_start if located is not None else None
    if start is None:
        scope.unreadable = "no function with debug info is there"
        return scope
    rule = cfa_rule(module, static_pc)
    marks = {r: _mark(r) for r in range(len(REGISTER_NAMES))}
    state = FrameState(None if rule is None else marks[rule[0]] + rule[1], marks)
    try:
        found = frame_variables(index, start, static_pc, state, slide)
    except FrameUnreadable as exc:
        scope.unreadable = exc.message
        return scope
    except StrobeError as exc:
        scope.unreadable = exc.message
        return scope
    if at_entry:
        scope.parameter_types = {n: v.type_die for n, v in found.variables.items() if v.parameter}
    else:
        scope.variables = dict(found.variables)
    return scope


def compile_text(text: str, scope: SiteScope, reads: list[ValueRead] | None = None) -> Compiled:
    """`text` (a condition, or one `{…}` part of a message) with the program's names replaced by reads (appended to
    `reads` when given: $v numbers go on from there); a ValidationError saying why when a name cannot be read at the
    site."""
    reads = [] if reads is None else reads
    names: list[str] = []
    out: list[str] = []
    pos = 0
    for start, end, path in _paths(text):
        root = _ROOT.match(path)
        assert root is not None
        name = root.group(1)
        if name in _JS_NAMES and name not in (scope.registers if scope.at_entry else scope.variables):
            continue  # JavaScript's, unless the program has one there (C++'s `this`)
        read, used = _read(scope, path, text[end:].lstrip().startswith("("))
        if len(reads) >= MAX_READS:
            raise ValidationError(f"An expression reads at most {MAX_READS} of the program's values.")
        out.append(text[pos:start])
        out.append(f"$v({len(reads)})")
        out.append(path[used:])
        reads.append(read)
        names.append(path[:used])
        pos = end
    out.append(text[pos:])
    return Compiled("".join(out), reads, names)


def compile_message(template: str, scope: SiteScope, reads: list[ValueRead]) -> str:
    """A logpoint's message with each `{…}` part compiled (its reads appended to `reads`)."""
    return re.sub(r"\{([^{}]+)\}", lambda part: "{" + compile_text(part.group(1), scope, reads).text + "}", template)


def _paths(text: str) -> list[tuple[int, int, str]]:
    """(start, end, text) of each name with the `.field`, `->field` and `[index]` steps after it, outside strings."""
    strings = [(m.start(), m.end()) for m in _STRING.finditer(text)]
    found: list[tuple[int, int, str]] = []
    for match in _ROOT.finditer(text):
        start = match.start()
        if any(low <= start < high for low, high in strings) or (found and start < found[-1][1]):
            continue
        end = match.end()
        if text[end:].lstrip().startswith("("):
            continue  # a call: JavaScript's (Math.max(…))
        while (step := STEP.match(text, end)) is not None:
            end = step.end()
        found.append((start, end, text[start:end]))
    return found


def _read(scope: SiteScope, path: str, called: bool) -> tuple[ValueRead, int]:
    """The read of `path` at the site and how much of `path` it covers. Trailing `.name` steps the program's types
    do not have are JavaScript's when they apply to a string (`owner.length`) or make a call (`x.toFixed(2)`:
    `called`); otherwise the type's error stands (`acc.total` of a pointer: use '->')."""
    root = _ROOT.match(path)
    assert root is not None
    first: ExpressionError | None = None
    for used in _prefixes(path):
        try:
            read = _resolve(scope, root.group(1), path[:used])
        except UnknownField:
            raise
        except ExpressionError as exc:
            first = first or exc
            continue
        if first is None or called or read["kind"] == "cstring":
            return read, used
        break
    assert first is not None
    raise first


def _prefixes(path: str) -> list[int]:
    """Lengths of `path` to try: whole first, then without each trailing `.name` step."""
    ends = [m.end() for m in re.finditer(r"(?:->|\.)\s*[A-Za-z_]\w*|\[[^\]]*\]", path)]
    root = _ROOT.match(path)
    assert root is not None
    lengths = [len(path)]
    for end in reversed([root.end(), *ends[:-1]]):
        if path[end:].lstrip().startswith("."):
            lengths.append(end)
        else:
            break
    return lengths


def _resolve(scope: SiteScope, name: str, path: str) -> ValueRead:
    if scope.at_entry and name in scope.registers:
        return _register_read(scope, scope.registers[name], path)
    if scope.at_entry and name in scope.entry_reads and path.strip() == name:
        return scope.entry_reads[name].copy()
    if scope.at_entry and name in scope.parameter_types:
        raise ValidationError(
            f"'{path}': '{name}' is a parameter of {scope.where} passed by value outside the integer registers (a "
            "struct in xmm registers or on the stack): at the function's entry a condition reads such a parameter "
            "only whole, and only a number. Break at a line of the function instead: there it is read from its "
            "frame, fields included.")
    if not scope.at_entry and name in scope.variables:
        return _frame_read(scope, scope.variables[name], path)
    if scope.index is not None:
        try:
            recipe = resolve_expression(scope.index, path)
        except VariableNotFound:
            pass
        else:
            return _memory_read(recipe, None, recipe.address + scope.slide)
    raise ValidationError(_unknown(scope, name))


def _unknown(scope: SiteScope, name: str) -> str:
    names = list(scope.registers if scope.at_entry else scope.variables)
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    kind = "parameter" if scope.at_entry else "parameter or local in scope"
    listed = ", ".join(names[:30]) or "none"
    missing = f" (its frame cannot be read: {scope.unreadable})" if scope.unreadable else ""
    return (f"'{name}' is not a {kind} at {scope.where}{missing}, nor a global of its module.{hint} Names there: "
            f"{listed}. Expressions are JavaScript over those names and globals, with '.field', '->field' and "
            "'[index]' steps (e.g. 'n > 3 && acc->total != 0').")


def _register_read(scope: SiteScope, arg: RegisterArg, path: str) -> ValueRead:
    """A parameter at a function's entry: the register itself, or the memory it points to when steps follow."""
    if path.strip() == arg.name:
        return {"reg": arg.reg, "add": 0, "derefs": [], "offset": 0, "size": arg.size, "kind": _int_kind(arg.signed),
                "load": False}
    if scope.index is None:
        raise ValidationError(f"'{path}' needs the type of '{arg.name}', and its module has no debug info.")
    recipe = resolve_at(scope.index, path, 0, scope.parameter_types.get(arg.name))
    if not recipe.derefs or recipe.derefs[0].offset != 0:
        raise ValidationError(f"'{path}': '{arg.name}' arrives in register {arg.reg} as a value, not an address: "
                              "only a pointer parameter's '->' and '[index]' steps can be followed at the entry.")
    return _memory_read(recipe, arg.reg, 0, skip_first=True)


def _frame_read(scope: SiteScope, variable: FrameVariable, path: str) -> ValueRead:
    name = variable.name
    if variable.constant is not None and path.strip() == name:
        return {"add": 0, "derefs": [], "offset": 0, "size": 8, "kind": "int", "load": False,
                "constant": variable.constant}
    if variable.address is None:
        why = variable.missing or "not located"
        detail = ("the compiler kept no copy of it here" if why == OPTIMISED_OUT else why)
        raise ValidationError(f"'{name}' at {scope.where} cannot be read: {detail}. A build without optimisation "
                              "(-O0, a debug profile) keeps every variable in memory.")
    assert scope.index is not None
    recipe = resolve_at(scope.index, path, variable.address, variable.type_die, indirect=variable.indirect)
    if variable.static:
        return _memory_read(recipe, None, variable.address)
    register, offset = _unmark(variable.address)
    return _memory_read(recipe, register, offset)


def _memory_read(recipe: ReadRecipe, register: str | None, add: int, skip_first: bool = False) -> ValueRead:
    layout = recipe.layout
    derefs = [d.offset for d in recipe.derefs][1 if skip_first else 0:]
    base: ValueRead = {"add": add, "derefs": derefs, "offset": recipe.offset, "size": layout.size, "load": True,
                       "kind": "int"}
    if register is None:
        base["address"] = hex(add)
        base["add"] = 0
    else:
        base["reg"] = register
    if recipe.bit_size is not None:
        raise ValidationError(f"'{recipe.label}' is a bitfield: conditions and messages cannot read bitfields yet; "
                              "read it with debug_read while paused.")
    if layout.kind == "pointer" and layout.cstring:
        base["kind"], base["size"] = "cstring", 8
    elif layout.kind in _SCALARS and layout.size in (1, 2, 4, 8):
        signed = layout.kind == "int" or (layout.kind == "enum" and layout.signed) or (
            layout.kind == "char" and "unsigned" not in layout.type_name)
        kinds: dict[str, ReadKind] = {"float": "float", "bool": "bool", "pointer": "pointer"}
        base["kind"] = kinds.get(layout.kind, _int_kind(signed))
    else:
        fields = ", ".join(f.name for f in layout.fields[:12])
        what = f"a {layout.kind} ({layout.type_name})"
        hint = f": name one of its fields ({fields})" if fields else ": name one of its elements or fields"
        raise ValidationError(f"'{recipe.label}' is {what}{hint}. Conditions and messages read scalars, pointers "
                              "and C strings.")
    return base


def _int_kind(signed: bool) -> ReadKind:
    return "int" if signed else "uint"


def _mark(register: int) -> int:
    return (register + 1) << _MARK_SHIFT


def _unmark(address: int) -> tuple[str, int]:
    """(register name, offset) of a symbolic address: which register's mark it is near."""
    register = round(address / (1 << _MARK_SHIFT)) - 1
    if not 0 <= register < len(REGISTER_NAMES):
        raise ValidationError("A variable's location at this line is not relative to a register: it cannot be read "
                              "by a condition.")
    return REGISTER_NAMES[register], address - _mark(register)


def condition_args(module: str, static_address: int) -> list[ConditionArg]:
    """The scalar parameters of the function at `static_address` in `module` as a condition reads them: the integer
    register each arrives in, at its DWARF size and sign (none when DWARF does not describe the function: `args`
    is then empty)."""
    plan_text = register_plan(module, static_address) if static_address else None
    if plan_text is None:
        return []
    args: list[ConditionArg] = []
    for param in json.loads(plan_text).get("params", []):
        value, pieces = param.get("value") or {}, param.get("pieces") or []
        signed = _ARG_SIGNS.get(str(value.get("kind")))
        if signed is None or len(pieces) != 1 or pieces[0].get("reg") not in GPRS or param.get("reference"):
            continue  # (xmm registers and stack words: not in the registers a breakpoint's condition reads)
        if value.get("kind") == "enum":
            signed = bool(value.get("signed"))
        args.append({"name": str(param.get("name") or f"arg{len(args)}"), "reg": str(pieces[0]["reg"]),
                     "size": int(pieces[0]["size"]), "signed": signed})
    return args


def entry_reads(module: str, static_address: int) -> dict[str, ValueRead]:
    """The scalar parameters of the function at `static_address` that arrive outside the integer registers, as a
    condition reads them at its entry: a float or double from its xmm register, a scalar passed on the stack from
    its word above the return address (rsp + 8 + 8k)."""
    plan_text = register_plan(module, static_address) if static_address else None
    out: dict[str, ValueRead] = {}
    for param in json.loads(plan_text).get("params", []) if plan_text else []:
        value, pieces = param.get("value") or {}, param.get("pieces") or []
        kind, name = str(value.get("kind")), str(param.get("name"))
        if kind not in _SCALARS or len(pieces) != 1 or param.get("reference"):
            continue
        reg, size = str(pieces[0].get("reg")), int(pieces[0].get("size", 0))
        kinds: dict[str, ReadKind] = {"float": "float", "bool": "bool", "pointer": "pointer"}
        signed = kind in ("int", "char") or (kind == "enum" and bool(value.get("signed")))
        read_kind = kinds.get(kind, _int_kind(signed))
        if reg.startswith("xmm") and kind == "float" and size in (4, 8):
            out[name] = {"reg": reg, "add": 0, "derefs": [], "offset": 0, "size": size, "kind": "float", "load": False}
        elif reg.startswith("stack") and size in (1, 2, 4, 8):
            out[name] = {"reg": "rsp", "add": 8 + 8 * int(reg[5:]), "derefs": [], "offset": 0, "size": size,
                         "kind": read_kind, "load": True}
    return out


def entry_arguments(module: str, static_address: int, registers: dict[str, str]) -> dict[str, int]:
    """The scalar arguments of a function stopped at its entry, by name, from their registers."""
    out: dict[str, int] = {}
    for arg in condition_args(module, static_address):
        raw = int(registers.get(arg["reg"], "0x0"), 16) & ((1 << (8 * min(arg["size"], _REGISTER_BYTES))) - 1)
        bits = 8 * arg["size"]
        out[arg["name"]] = raw - (1 << bits) if arg["signed"] and raw >= 1 << (bits - 1) else raw
    return out


def compile_sites(bp: Breakpoint) -> tuple[list[BreakpointSpec], list[str]]:
    """The agent's spec of each site of `bp`, its condition and message compiled there (daemon/break_values.py).
    A site where they name what it cannot read is left out with a warning; when that is every site, the first
    site's error is raised (ValidationError)."""
    specs: list[BreakpointSpec] = []
    kept: list[Site] = []
    errors: list[tuple[Site, ValidationError]] = []
    for site in bp.sites:
        f = site.traceable
        args = condition_args(f.module, f.info.address) if f is not None else []
        spec: BreakpointSpec = {"id": f"{bp.id}#{len(specs)}", "kind": "line" if site.kind == "line" else "entry",
                                "address": hex(site.address), "args": args, "values": []}
        try:
            if bp.condition is not None or (bp.log is not None and "{" in bp.log):
                scope = _site_scope(site, args)
                if bp.condition is not None:
                    spec["condition"] = compile_text(bp.condition, scope, spec["values"]).text
                if bp.log is not None:
                    spec["log"] = compile_message(bp.log, scope, spec["values"])
            elif bp.log is not None:
                spec["log"] = bp.log
        except ValidationError as exc:
            errors.append((site, exc))
            continue
        if bp.hit_count is not None:
            spec["hitCount"] = bp.hit_count
        if bp.all_threads:
            spec["allThreads"] = True
        specs.append(spec)
        kept.append(site)
    if errors and not specs:
        raise errors[0][1]
    bp.sites = kept
    return specs, [f"{'Logpoint' if bp.log is not None else 'Breakpoint'} {bp.id}: not set at "
                   f"{site.function or hex(site.address)}: {exc.message}" for site, exc in errors]


def _site_scope(site: Site, args: list[ConditionArg]) -> SiteScope:
    registers = [RegisterArg(a["name"], a["reg"], a["size"], a["signed"]) for a in args]
    if site.kind != "line" and site.traceable is not None:
        f = site.traceable
        return site_scope(f.module, f.runtime_address - f.info.address, f.info.address, True, registers,
                          f"the entry of {f.name}")
    where = f"{os.path.basename(site.file or '?')}:{site.line}"
    if site.module is None:
        return SiteScope(where, None, 0, site.kind != "line", unreadable="its module is not known")
    return site_scope(site.module, site.slide, site.address - site.slide, site.kind != "line", registers, where)
