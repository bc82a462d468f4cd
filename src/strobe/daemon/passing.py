"""How a value travels into and out of a call: its eightbytes and their register classes (System V x86-64
calling convention, §3.2.3), or Rust's own ABI for aggregates. Pure: a ValueLayout in, a Passing out.

    sysv_passing(layout)   # struct { long id; double weight; } -> Passing(parts=[(0, 8, "int"), (8, 8, "sse")])
    sysv_passing(layout)   # a 24-byte struct -> Passing(memory=True)
    rust_passing(layout, returning=False)   # a 24-byte Rust struct -> Passing([(0, 8, "int")], reference=True)

A Passing lists (offset, size, class) parts, class INT (an integer register) or SSE (an xmm register), or
says the value goes in memory, through a hidden reference, or in x87 registers. Integers, pointers, bools,
chars and enums are INTEGER; float/double SSE; long double x87; structs of at most 16 bytes are split in
eightbytes classed by their fields (INTEGER wins over SSE), larger ones or ones with a misaligned field are
in memory. Rust (as rustc 1.95 compiles it) passes a value with the ABI of one or two scalars as those
scalars, other aggregates up to 8 bytes in one integer register, larger ones by reference.

Whether a C++ class goes through a hidden reference is not decided here (see daemon/function_dies.py).
TruncatedLayout: a struct in the value was cut by the layout depth (ask for a deeper layout);
UnknownPassing: this module cannot tell how the value travels (an enum with data, an unknown scalar).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from strobe.symbols.types import ValueLayout

_MAX_LEVEL = 12  # nesting levels looked into before a value counts as unknown

# Eightbyte classes.
NONE, INT, SSE, SSEUP, X87, X87UP, MEMORY = "none", "int", "sse", "sseup", "x87", "x87up", "memory"


class TruncatedLayout(Exception):
    """A struct inside a register-passed value was cut by the layout depth: ask again deeper."""


class UnknownPassing(Exception):
    """A value whose passing convention this module cannot tell."""


@dataclass
class Passing:
    """How one value travels: its eightbyte parts (offset, size, class), or memory / a hidden reference."""

    parts: list[tuple[int, int, str]] = field(default_factory=list)
    memory: bool = False
    reference: bool = False
    x87: bool = False


def is_aggregate(layout: ValueLayout) -> bool:
    return layout.kind in ("struct", "array") or (layout.kind == "enum" and bool(layout.variants))


def sysv_passing(layout: ValueLayout) -> Passing:
    size = layout.size
    if size > 16:
        return Passing(memory=True)
    if size == 0:
        return Passing()
    classes = [NONE] * ((size + 7) // 8)
    if not _merge_value(layout, 0, classes, 0):
        return Passing(memory=True)
    if MEMORY in classes:
        return Passing(memory=True)
    if X87 in classes or X87UP in classes:
        return Passing(x87=True)
    parts: list[tuple[int, int, str]] = []
    for i, cls in enumerate(classes):
        at = 8 * i
        if cls == SSEUP and parts and parts[-1][2] == SSE:
            parts[-1] = (parts[-1][0], parts[-1][1] + min(8, size - at), SSE)  # one xmm register for both
        elif cls in (INT, SSE, SSEUP):
            parts.append((at, min(8, size - at), INT if cls == INT else SSE))
    return Passing(parts)


def _merge_value(layout: ValueLayout, at: int, classes: list[str], level: int) -> bool:
    """Merge the classes of `layout`'s scalars (at byte `at`) into the eightbytes; False: a misaligned field."""
    kind = layout.kind
    if level > _MAX_LEVEL:
        raise UnknownPassing
    if kind == "struct":
        if layout.truncated:
            raise TruncatedLayout
        for f in layout.fields:
            if f.bit_size is not None:
                end = at + f.offset + ((f.bit_offset or 0) + f.bit_size + 7) // 8
                _merge_range(classes, at + f.offset, end, INT)
            elif not _merge_value(f.layout, at + f.offset, classes, level + 1):
                return False
        return True
    if kind == "array":
        if layout.element is None:
            raise UnknownPassing
        step = layout.element.size
        return all(_merge_value(layout.element, at + i * step, classes, level + 1) for i in range(layout.count))
    leaf = _leaf_classes(layout)
    align = (layout.size // 2 if layout.kind == "bytes" else min(layout.size, 16)) or 1  # complex: its parts'
    if at % align:
        return False
    for i, cls in enumerate(leaf):
        _merge_range(classes, at + 8 * i, at + min(8 * (i + 1), layout.size), cls)
    return True


def _leaf_classes(layout: ValueLayout) -> list[str]:
    kind, size, name = layout.kind, layout.size, layout.type_name
    if kind in ("int", "uint", "bool", "char", "pointer") or (kind == "enum" and not layout.variants):
        if size <= 8:
            return [INT]
        if size == 16:
            return [INT, INT]  # __int128
    elif kind == "float":
        if size <= 8:
            return [SSE]
        if "long double" in name or size in (10, 12):
            return [X87, X87UP]
        return [SSE, SSEUP]  # _Float128
    elif kind == "bytes":
        if "complex" in name:
            if size == 8:
                return [SSE]
            if size == 16:
                return [SSE, SSE]
            return [MEMORY]
        if name == "<member pointer>" and size in (8, 16):
            return [INT] * (size // 8)
    raise UnknownPassing


def _merge_range(classes: list[str], start: int, end: int, cls: str) -> None:
    for i in range(start // 8, min((max(end, start + 1) + 7) // 8, len(classes))):
        classes[i] = _merge(classes[i], cls)


def _merge(a: str, b: str) -> str:
    if a == b:
        return a
    if a == NONE:
        return b
    if b == NONE:
        return a
    if MEMORY in (a, b):
        return MEMORY
    if INT in (a, b):
        return INT
    if a in (X87, X87UP) or b in (X87, X87UP):
        return MEMORY
    return SSE


def rust_passing(layout: ValueLayout, returning: bool) -> Passing:
    """Rust's own ABI (as rustc 1.95 compiles it): a value with the ABI of one or two scalars is passed and
    returned as those scalars (a pair in two registers); other aggregates up to 8 bytes in one integer
    register, larger ones by reference (returned through a hidden pointer). An enum with data is a pair when
    its tag and every variant's data fit two scalars at fixed offsets, each offset one size and class whatever
    the variant (Option<u32>: tag, value; Option<&str>: pointer, length; Option<f64>: tag, then xmm), otherwise
    an aggregate like the others (checked against gdb's registers: tests/daemon/test_signatures.py)."""
    if layout.size <= 16:  # (one or two scalars take at most 16 bytes)
        leaves = _rust_scalars(layout, 0)  # an enum with data: UnknownPassing (rustc lays it out)
        if leaves is not None:
            return Passing([(at + 8 * i, min(8, leaf.size - 8 * i), cls) for at, leaf in leaves
                            for i, cls in enumerate(_leaf_classes(leaf))])
        if layout.size == 0:
            return Passing()
        if layout.size <= 8:
            return Passing([(0, layout.size, INT)])
    return Passing(memory=True) if returning else Passing([(0, 8, INT)], reference=True)


def _rust_scalars(layout: ValueLayout, at: int) -> list[tuple[int, ValueLayout]] | None:
    """The one or two scalars a Rust value is made of (newtypes looked through), or None."""
    if layout.kind in ("int", "uint", "bool", "char", "pointer", "float") or (
        layout.kind == "enum" and not layout.variants
    ):
        return [(at, layout)] if layout.size in (1, 2, 4, 8, 16) else None
    if layout.kind == "enum":
        return _rust_enum_scalars(layout, at)
    if layout.kind != "struct" or layout.union:
        return None
    if layout.truncated:
        raise TruncatedLayout
    fields = [f for f in layout.fields if f.layout.size > 0]
    if any(f.bit_size is not None for f in fields):
        return None
    if len(fields) == 1 and fields[0].offset == 0 and fields[0].layout.size == layout.size:
        return _rust_scalars(fields[0].layout, at)
    if len(fields) == 2:
        first, second = (_rust_scalars(f.layout, at + f.offset) for f in fields)
        if first is not None and second is not None and len(first) == 1 and len(second) == 1:
            return sorted([first[0], second[0]], key=lambda leaf: leaf[0])
    return None


def _rust_enum_scalars(layout: ValueLayout, at: int) -> list[tuple[int, ValueLayout]] | None:
    """The one or two scalars of a Rust enum with data whose tag and variants' data share them, or None."""
    slots: dict[int, ValueLayout] = {}
    parts: list[tuple[int, ValueLayout]] = []
    if layout.discriminant is not None:
        tag = _rust_scalars(layout.discriminant.layout, at + layout.discriminant.offset)
        if tag is None:
            return None
        parts += tag
    for variant in layout.variants:
        data = _variant_scalars(variant.field.layout, at + variant.field.offset)
        if data is None:
            return None
        parts += data
    for offset, leaf in parts:
        seen = slots.setdefault(offset, leaf)
        if seen.size != leaf.size or _leaf_classes(seen) != _leaf_classes(leaf):
            return None
    found = sorted(slots.items(), key=lambda slot: slot[0])
    if not found or len(found) > 2 or (len(found) == 2 and found[0][0] + found[0][1].size > found[1][0]):
        return None
    return found


def _variant_scalars(layout: ValueLayout, at: int) -> list[tuple[int, ValueLayout]] | None:
    """A variant's data as scalars at their offsets: none for a variant without data, None when not scalars."""
    if layout.kind != "struct" or layout.union:
        return None
    if layout.truncated:
        raise TruncatedLayout
    fields = [f for f in layout.fields if f.layout.size > 0]
    out: list[tuple[int, ValueLayout]] = []
    for f in fields:
        if f.bit_size is not None:
            return None
        leaves = _rust_scalars(f.layout, at + f.offset)
        if leaves is None:
            return None
        out += leaves
    return out if len(out) <= 2 else None

