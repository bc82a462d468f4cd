"""How to decode the bytes of a value: `ValueLayout`, built from DWARF types (dwarf_types) to a chosen depth.

A layout says what kind of value sits at an address (int, float, pointer, struct…), its size, and for
compound kinds what is inside: struct fields at byte offsets (bitfields with a bit offset and size),
array element and count, enum names, the variants of a Rust enum. Types are named the way a user
spells them ("unsigned int", "MidiBuffer", "char*", "int[4]", "Option<u32>"); const, volatile and
typedefs are transparent (a typedef gives its name to the type it stands for).

Depth: a struct at depth 0 is `truncated` (decoded as "<struct>", no fields); each struct level below
the top uses one level; arrays and Rust enum wrappers use none. A pointer's `pointee` is only filled
while depth remains (it is informative: values are never followed by the decoder); `cstring` marks a
pointer to a 1-byte char whatever the depth: the agent reads it as a C string.

`wire(layout)` is the compact JSON form the agent gets; `read_size(layout)` how many bytes it must read
for the decoder (arrays beyond 100 elements, char arrays beyond 1024 chars and truncated structs are not
needed); `string_offsets(layout)` where, inside those bytes, the C-string pointers are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["int", "uint", "float", "bool", "char", "pointer", "enum", "struct", "array", "void", "function",
               "bytes"]

MAX_ARRAY_ITEMS = 100  # array elements decoded (spec: "Arrays capped at 100 elements")
MAX_STRING = 1024  # chars of a C string or char array (spec: "Strings truncated to 1024 chars")
MAX_READ = 65536  # bytes of one value read from the target at most (spec: debug_read `size` limit)


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    offset: int  # bytes from the start of the enclosing value (for a bitfield: of its first byte)
    layout: ValueLayout
    bit_offset: int | None = None  # bitfields: bits from the low bit of the byte at `offset` (little-endian)
    bit_size: int | None = None


@dataclass(frozen=True, slots=True)
class Variant:
    """One variant of a Rust-style enum: taken when the discriminant equals `value` (None: the default)."""

    value: int | None
    field: Field


@dataclass(frozen=True, slots=True)
class ValueLayout:
    kind: Kind
    type_name: str
    size: int
    fields: tuple[Field, ...] = ()  # struct (all at offset 0 for a union)
    element: ValueLayout | None = None  # array
    count: int = 0  # array elements (0 when unknown, e.g. a flexible array member)
    enumerators: tuple[tuple[int, str], ...] = ()  # enum: (value, name)
    signed: bool = False  # enum: its values are signed
    pointee: ValueLayout | None = None  # pointer: None beyond depth, for void*, or for a function pointer
    cstring: bool = False  # pointer to char: read as a C string of at most MAX_STRING bytes
    truncated: bool = False  # struct beyond the requested depth: shown as "<struct>"
    union: bool = False
    discriminant: Field | None = None  # Rust enum with variant parts
    variants: tuple[Variant, ...] = ()

    def field(self, name: str) -> Field | None:
        for candidate in self.fields:
            if candidate.name == name:
                return candidate
        return None


VOID = ValueLayout("void", "void", 0)


def read_size(layout: ValueLayout) -> int:
    """Bytes from the start of the value that `decode` needs (at most MAX_READ)."""
    return min(_needed(layout), MAX_READ)


def _needed(layout: ValueLayout) -> int:
    if layout.kind == "array" and layout.element is not None:
        element = layout.element
        if element.kind == "char" and element.size == 1:
            return min(layout.count, MAX_STRING)
        shown = min(layout.count, MAX_ARRAY_ITEMS)
        return 0 if shown == 0 else (shown - 1) * element.size + _needed(element)
    if layout.kind == "struct":
        if layout.truncated:
            return 0
        return max((_field_end(f) for f in layout.fields), default=0)
    if layout.kind == "enum" and layout.variants:
        ends = [_field_end(v.field) for v in layout.variants]
        if layout.discriminant is not None:
            ends.append(_field_end(layout.discriminant))
        return min(max(ends, default=0), layout.size) if layout.size else max(ends, default=0)
    return layout.size


def _field_end(field: Field) -> int:
    if field.bit_size is not None:
        return field.offset + ((field.bit_offset or 0) + field.bit_size + 7) // 8
    return field.offset + _needed(field.layout)


def string_offsets(layout: ValueLayout, base: int = 0, limit: int = 64) -> list[int]:
    """Offsets (from the start of the value) of the C-string pointers `decode` would show as strings,
    in the bytes of `read_size`; at most `limit` of them."""
    found: list[int] = []
    _strings(layout, base, found, limit)
    return found


def _strings(layout: ValueLayout, base: int, found: list[int], limit: int) -> None:
    if len(found) >= limit:
        return
    if layout.kind == "pointer":
        if layout.cstring:
            found.append(base)
    elif layout.kind == "struct" and not layout.truncated:
        for f in layout.fields:
            if f.bit_size is None:
                _strings(f.layout, base + f.offset, found, limit)
    elif layout.kind == "array" and layout.element is not None and layout.element.kind in ("pointer", "struct",
                                                                                           "array", "enum"):
        for i in range(min(layout.count, MAX_ARRAY_ITEMS)):
            _strings(layout.element, base + i * layout.element.size, found, limit)
    elif layout.kind == "enum":
        # Any variant may be the live one; the agent reads a string only where a non-null pointer is.
        for variant in layout.variants:
            _strings(variant.field.layout, base + variant.field.offset, found, limit)


def wire(layout: ValueLayout) -> dict[str, Any]:
    """The layout as plain JSON for the agent: {kind, type, size} plus, per kind, fields (each with
    name and offset, bitOffset/bitSize for bitfields), element/count, enumerators, string, truncated."""
    out: dict[str, Any] = {"kind": layout.kind, "type": layout.type_name, "size": layout.size}
    if layout.kind == "struct":
        if layout.truncated:
            out["truncated"] = True
        else:
            out["fields"] = [_wire_field(f) for f in layout.fields]
        if layout.union:
            out["union"] = True
    elif layout.kind == "array" and layout.element is not None:
        out["count"] = layout.count
        out["element"] = wire(layout.element)
    elif layout.kind == "enum":
        if layout.enumerators:
            out["enumerators"] = {str(value): name for value, name in layout.enumerators}
        if layout.discriminant is not None:
            out["discriminant"] = _wire_field(layout.discriminant)
            out["variants"] = [{"value": v.value, **_wire_field(v.field)} for v in layout.variants]
    elif layout.kind == "pointer" and layout.cstring:
        out["string"] = MAX_STRING
    return out


def _wire_field(field: Field) -> dict[str, Any]:
    out: dict[str, Any] = {"name": field.name, "offset": field.offset}
    if field.bit_size is not None:
        out["bitOffset"] = field.bit_offset or 0
        out["bitSize"] = field.bit_size
    out.update(wire(field.layout))
    return out
