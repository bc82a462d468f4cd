"""Variable expressions (`gClock->counter`, `gRoot.inner.link->value`, `gInts[3]`) resolved into read recipes.

    recipe = resolve_expression(variable_index(path), "gClock->counter", depth=1)
    recipe.to_wire(slide)      # what the agent executes: root address, pointers to follow, offset, layout
    recipe.decode(data)        # the JSON value of the bytes the agent read at the final address

Grammar: a variable name (qualified with "::" as needed, or "file.c::name" for a file static) followed by
`.field`, `->field` and `[index]` steps. At most 256 characters and 4 dereferences (each `->`, and each
index applied to a pointer). The agent starts at `address` (relocated by the module's slide); for each
Deref it adds `offset`, reads a pointer there (failing with "Null pointer at <label>" on NULL) and
continues from that pointer; then it adds `offset` and reads `read_size(layout)` bytes.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from dataclasses import dataclass
from typing import Any

from strobe.errors import ValidationError
from strobe.symbols.decode import decode
from strobe.symbols.dwarf_types import TypeRef, TypeTable
from strobe.symbols.types import Field, ValueLayout, read_size, string_offsets, wire
from strobe.symbols.variables import VariableIndex

MAX_EXPRESSION = 256
MAX_DEREFS = 4

_NAME = re.compile(
    r"\s*(?:[^\s:.\[\]<>()-]+\.[A-Za-z0-9+]+::)?"  # an optional "file.c::" prefix
    r"(?:::)?[A-Za-z_$][\w$]*(?:<[^()\[\]]*?>)?(?:\s*::\s*[A-Za-z_$~][\w$]*(?:<[^()\[\]]*?>)?)*"
)
STEP = re.compile(r"\s*(?:(->|\.)\s*([A-Za-z_$][\w$]*)|\[\s*(0[xX][0-9a-fA-F]+|\d+)\s*\])")
_RAW_READ = "debug_read({ address: '0x...', size, type })"


class ExpressionError(ValidationError):
    """A variable expression that cannot be parsed or resolved; the message says how to fix it."""


class ExpressionLimit(ExpressionError):
    """An expression beyond the 256-character or 4-dereference limit."""


class UnknownField(ExpressionError):
    def __init__(self, message: str, fields: list[str]) -> None:
        super().__init__(message)
        self.fields = fields


@dataclass(frozen=True, slots=True)
class Deref:
    offset: int  # added to the current address, then a pointer is read there
    label: str  # the expression up to that pointer, e.g. "gClock" (for "Null pointer at gClock")


@dataclass(frozen=True, slots=True)
class ReadRecipe:
    label: str  # the expression as given
    module: str  # path of the ELF whose static addresses these are (relocated later by the caller)
    address: int  # static address of the root variable
    derefs: tuple[Deref, ...]
    offset: int  # added after the last deref (or to address when no deref)
    layout: ValueLayout  # what is read at the final address, expanded to the requested struct depth
    bit_offset: int | None = None  # a bitfield: its bits start this many bits into the byte at `offset`
    bit_size: int | None = None

    @property
    def size(self) -> int:
        """Bytes to read at the final address."""
        if self.bit_size is not None:
            return ((self.bit_offset or 0) + self.bit_size + 7) // 8
        return read_size(self.layout)

    def to_wire(self, slide: int = 0) -> dict[str, Any]:
        """The recipe as JSON for the agent, with the root address relocated by `slide` (module base minus
        the ELF's image base). `strings`: offsets, in the bytes read, of char* pointers to read as C strings."""
        out: dict[str, Any] = {
            "label": self.label,
            "address": f"0x{self.address + slide:x}",
            "derefs": [{"offset": d.offset, "label": d.label} for d in self.derefs],
            "offset": self.offset,
            "size": self.size,
            "typeKind": self.layout.kind,
            "typeName": self.layout.type_name,
            "layout": wire(self.layout),
        }
        if self.bit_size is not None:
            out["bitOffset"] = self.bit_offset or 0
            out["bitSize"] = self.bit_size
        else:
            out["strings"] = string_offsets(self.layout)
        return out

    def decode(self, data: bytes, strings: dict[int, str] | None = None) -> Any:
        """The JSON value of the bytes read at the final address (`strings`: C strings read behind char*)."""
        if self.bit_size is None:
            return decode(self.layout, data, strings)
        holder = ValueLayout("struct", "", self.size, fields=(Field("v", 0, self.layout, self.bit_offset,
                                                                      self.bit_size),))
        return decode(holder, data)["v"]


@dataclass(frozen=True, slots=True)
class Step:
    op: str  # ".", "->" or "[]"
    name: str  # field name, or the index as written
    index: int
    start: int  # where the step starts in the expression (its label is the text before)


def parse(text: str) -> tuple[str, list[Step]]:
    """(root variable name, steps) of an expression; ExpressionError if it is not one."""
    if len(text) > MAX_EXPRESSION:
        raise ExpressionLimit(
            f"The expression is {len(text)} characters long; the limit is {MAX_EXPRESSION}. Name the variable "
            f"with fewer qualifiers (a unique last part is enough: 'counter' for 'app::engine::counter'), or read "
            f"the address directly with {_RAW_READ}."
        )
    match = _NAME.match(text)
    if match is None or not match.group().strip():
        raise ExpressionError(
            f"'{text}' does not start with a variable name. Expressions are a global or static variable "
            "followed by '.field', '->field' or '[index]', e.g. 'gClock->counter' or 'gBuffers[2].size'."
        )
    root = re.sub(r"\s*::\s*", "::", match.group().strip())
    steps: list[Step] = []
    pos = match.end()
    while pos < len(text) and text[pos:].strip():
        step = STEP.match(text, pos)
        if step is None:
            rest = text[pos:].lstrip()
            raise ExpressionError(_syntax_hint(text, len(text) - len(rest), rest))
        op, name, number = step.groups()
        start = pos + len(text[pos:]) - len(text[pos:].lstrip())
        if number is not None:
            steps.append(Step("[]", number, int(number, 0), start))
        else:
            steps.append(Step(op, name, 0, start))
        pos = step.end()
    arrows = sum(1 for s in steps if s.op == "->")
    if arrows > MAX_DEREFS:
        fourth = [s for s in steps if s.op == "->"][MAX_DEREFS]
        raise _too_many(text, arrows, text[: fourth.start].strip())
    return root, steps


def _syntax_hint(text: str, at: int, rest: str) -> str:
    where = f"at position {at} of '{text}' ('{rest[:20]}')"
    if rest.startswith(("(", "*", "&", "+", "-", "/", "=", "!", "<", ">")) and not rest.startswith("->"):
        return (f"Unexpected '{rest[0]}' {where}: expressions are a variable name with '.field', '->field' "
                "and '[index]' steps only: no calls, casts, dereference operators or arithmetic.")
    if rest.startswith("["):
        return f"Bad index {where}: an index is a non-negative integer, e.g. 'gInts[3]' or 'gTable[0x10]'."
    if rest.startswith(("->", ".")):
        return f"A field name must follow '{rest[:2].rstrip()}' {where}, e.g. 'gClock->counter'."
    return (f"Cannot read the expression {where}. Write a variable name followed by '.field', '->field' or "
            "'[index]' steps, e.g. 'gRoot.inner.link->value'.")


def _too_many(text: str, count: int, prefix: str) -> ExpressionLimit:
    return ExpressionLimit(
        f"'{text}' dereferences {count} pointers; the limit is {MAX_DEREFS} per expression. Read '{prefix}' "
        f"first (a pointer: its value is an address), then read what it points to with {_RAW_READ}."
    )


def resolve_expression(index: VariableIndex, text: str, depth: int = 1) -> ReadRecipe:
    """The read recipe of a variable expression (see the module doc). Raises VariableNotFound,
    AmbiguousVariable, ExpressionError or NoDebugSymbols with a message saying what to do instead."""
    root, steps = parse(text)
    variable = index.lookup(root)
    if variable.address is None:
        raise ExpressionError(
            f"'{variable.name}' is thread-local: every thread has its own copy, at an address known only at run "
            "time, so it cannot be read by name yet. Trace a function that uses it and read it there instead."
        )
    with index.lock:
        return _Resolver(index.types, text, root).run(variable.address, index.type_of(variable), steps, depth,
                                                      index.path)


def resolve_at(index: VariableIndex, text: str, address: int, type_die: int | None, depth: int = 1,
               indirect: bool = False) -> ReadRecipe:
    """The read recipe of an expression whose root variable is at a runtime `address` with the type `type_die` (a
    paused frame's local: symbols/frame_locals.py; `indirect`: `address` holds a pointer to it); its steps are
    followed as a global's. The recipe's address is already runtime: relocate it by 0."""
    root, steps = parse(text)
    with index.lock:
        recipe = _Resolver(index.types, text, root).run(address, TypeRef(type_die), steps, depth, index.path)
    if not indirect:
        return recipe
    if len(recipe.derefs) >= MAX_DEREFS:
        raise _too_many(text, len(recipe.derefs) + 1, root)
    return dataclasses.replace(recipe, derefs=(Deref(0, f"{root} (its slot holds its address)"), *recipe.derefs))


class _Resolver:
    def __init__(self, types: TypeTable, text: str, root: str) -> None:
        self.types = types
        self.text = text
        self.root = root

    def run(self, address: int, t: TypeRef, steps: list[Step], depth: int, module: str) -> ReadRecipe:
        derefs: list[Deref] = []
        offset = 0
        bits: tuple[int | None, int | None] = (None, None)
        for step in steps:
            label = self.text[: step.start].strip()
            if bits[1] is not None:
                raise ExpressionError(f"'{label}' is a bitfield (an integer): it has no fields, pointee or elements.")
            if step.op != "->":  # C++ references are used with '.' and '[]': they are followed implicitly
                t, offset = self._through_reference(t, offset, derefs, label)
            if step.op == ".":
                t, offset, bits = self._member(t, offset, step, label)
                continue
            if step.op == "->":
                t = self._deref(t, label, step)
                derefs.append(Deref(offset, label))
                if len(derefs) > MAX_DEREFS:
                    raise _too_many(self.text, len(derefs), label)
                t, offset, bits = self._member(t, 0, step, label + "->")
                continue
            element = self.types.element(t)
            if element is not None:
                t, count = element
                if count and step.index >= count:
                    raise ExpressionError(
                        f"Index {step.index} is out of range for '{label}' ({self.types.view(t).type_name}"
                        f"[{count}]): valid indexes are 0 to {count - 1}."
                    )
                offset += step.index * self.types.view(t).size
                continue
            pointee = self.types.pointee(t)
            if pointee is None:
                raise ExpressionError(
                    f"'{label}' is {_a(self.types.view(t))}, not an array or pointer: it cannot be indexed."
                )
            t = self._deref(t, label, step)
            derefs.append(Deref(offset, label))
            if len(derefs) > MAX_DEREFS:
                raise _too_many(self.text, len(derefs), label)
            offset = step.index * self.types.view(t).size
        if bits[1] is None:
            t, offset = self._through_reference(t, offset, derefs, self.text.strip())
        layout = self.types.layout(t.die, depth, t.skipped)
        return ReadRecipe(self.text.strip(), module, address, tuple(derefs), offset, layout, bits[0], bits[1])

    def _through_reference(self, t: TypeRef, offset: int, derefs: list[Deref], label: str) -> tuple[TypeRef, int]:
        if not self.types.is_reference(t):
            return t, offset
        pointee = self.types.pointee(t)
        if pointee is None or pointee.die is None:
            return t, offset
        derefs.append(Deref(offset, label))
        if len(derefs) > MAX_DEREFS:
            raise _too_many(self.text, len(derefs), label)
        return pointee, 0

    def _deref(self, t: TypeRef, label: str, step: Step) -> TypeRef:
        pointee = self.types.pointee(t)
        view = self.types.view(t)
        if pointee is None:
            if self.types.is_struct(t) and step.op == "->":
                raise ExpressionError(
                    f"'{label}' is not a pointer (it is {_a(view)}); use '.' instead of '->': "
                    f"'{label}.{step.name}'."
                )
            raise ExpressionError(f"'{label}' is {_a(view)}, not a pointer: it cannot be dereferenced.")
        if pointee.die is None or self.types.strip(pointee.die) is None:
            raise ExpressionError(
                f"'{label}' is {_a(view)}: what it points to has no type in the debug info. Read "
                f"'{label}' to get the address, then {_RAW_READ} with the size and type you expect."
            )
        return pointee

    def _member(self, t: TypeRef, offset: int, step: Step, label: str) -> tuple[TypeRef, int,
                                                                                 tuple[int | None, int | None]]:
        owner = label.removesuffix("->")
        if not self.types.is_struct(t):
            view = self.types.view(t)
            if self.types.pointee(t) is not None and step.op == ".":
                raise ExpressionError(
                    f"'{owner}' is a pointer ({view.type_name}); use '->' instead of '.': '{owner}->{step.name}'."
                )
            what = "what it points to" if step.op == "->" else f"'{owner}'"
            raise ExpressionError(
                f"{what} is {_a(view)}, not a struct, class or union: it has no field "
                f"'{step.name}'."
            )
        die = self.types.strip(t.die)
        assert die is not None
        members = self.types.members(die.offset)
        exact = [m for m in members if m.name == step.name]
        for member in exact or [m for m in members if m.name.endswith("::" + step.name)]:
            if member.bit_size is not None:
                return TypeRef(member.type), offset + member.offset, (member.bit_offset, member.bit_size)
            return TypeRef(member.type), offset + member.offset, (None, None)
        names = [m.name for m in members]
        type_name = self.types.view(t).type_name
        close = difflib.get_close_matches(step.name, names, n=3, cutoff=0.5)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        listed = ", ".join(names[:40]) + (f" ... ({len(names)} in all)" if len(names) > 40 else "")
        where = f"what '{owner}' points to ({type_name})" if step.op == "->" else f"'{owner}' ({type_name})"
        raise UnknownField(
            f"{where[0].upper()}{where[1:]} has no field '{step.name}'.{hint} Its fields: {listed or '(none)'}.",
            names,
        )


def _a(view: ValueLayout) -> str:
    """"an 'int'", "a 'MidiBuffer' (struct)": how a type is named in messages."""
    article = "an " if view.type_name[:1].lower() in "aeiou" else "a "
    kind = "" if view.kind in view.type_name or view.kind in ("int", "uint", "float", "bool") else f" ({view.kind})"
    return f"{article}'{view.type_name}'{kind}"
