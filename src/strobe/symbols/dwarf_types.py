"""DWARF type DIEs turned into `ValueLayout`s, and the type navigation the expression resolver needs.

Read on demand with a DieReader: base types, pointers and references, const/volatile/typedef (transparent),
arrays (multi-dimensional: `gGrid[1]` is an `int[3]`), enums, structs/classes/unions with the members of
C++ base classes (DW_TAG_inheritance at a constant offset; virtual bases, whose offset is only known at
run time, are left out) and anonymous struct/union members flattened into their parent, bitfields
(DW_AT_data_bit_offset, or the DWARF 2/3 DW_AT_bit_offset), Rust enums with variant parts (decoded by
their discriminant; DW_AT_discr_list ranges are not read: such variants only match as the default).
A type is named after its typedef when it has one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

from strobe.symbols.dwarf_dies import (
    AT_ARTIFICIAL,
    AT_BIT_OFFSET,
    AT_BIT_SIZE,
    AT_BYTE_SIZE,
    AT_CONST_VALUE,
    AT_COUNT,
    AT_DATA_BIT_OFFSET,
    AT_DATA_MEMBER_LOCATION,
    AT_DECLARATION,
    AT_DISCR,
    AT_DISCR_VALUE,
    AT_ENCODING,
    AT_EXTERNAL,
    AT_LOWER_BOUND,
    AT_TYPE,
    AT_UPPER_BOUND,
    TAG_ARRAY_TYPE,
    TAG_ATOMIC_TYPE,
    TAG_BASE_TYPE,
    TAG_CLASS_TYPE,
    TAG_CONST_TYPE,
    TAG_ENUMERATION_TYPE,
    TAG_ENUMERATOR,
    TAG_FORMAL_PARAMETER,
    TAG_IMMUTABLE_TYPE,
    TAG_INHERITANCE,
    TAG_INTERFACE_TYPE,
    TAG_MEMBER,
    TAG_POINTER_TYPE,
    TAG_PTR_TO_MEMBER_TYPE,
    TAG_REFERENCE_TYPE,
    TAG_RESTRICT_TYPE,
    TAG_RVALUE_REFERENCE_TYPE,
    TAG_STRUCTURE_TYPE,
    TAG_SUBRANGE_TYPE,
    TAG_SUBROUTINE_TYPE,
    TAG_TYPEDEF,
    TAG_UNION_TYPE,
    TAG_UNSPECIFIED_PARAMETERS,
    TAG_UNSPECIFIED_TYPE,
    TAG_VARIANT,
    TAG_VARIANT_PART,
    TAG_VOLATILE_TYPE,
    Die,
    DieReader,
)
from strobe.symbols.dwarf_forms import read_uleb
from strobe.symbols.types import VOID, Field, Kind, ValueLayout, Variant

TRANSPARENT_TAGS = frozenset(
    {TAG_CONST_TYPE, TAG_VOLATILE_TYPE, TAG_RESTRICT_TYPE, TAG_ATOMIC_TYPE, TAG_IMMUTABLE_TYPE}
)
STRUCT_TAGS = frozenset({TAG_STRUCTURE_TYPE, TAG_CLASS_TYPE, TAG_UNION_TYPE, TAG_INTERFACE_TYPE})
POINTER_TAGS = frozenset({TAG_POINTER_TYPE, TAG_REFERENCE_TYPE, TAG_RVALUE_REFERENCE_TYPE})
_POINTER_SUFFIX = {TAG_POINTER_TYPE: "*", TAG_REFERENCE_TYPE: "&", TAG_RVALUE_REFERENCE_TYPE: "&&"}
_MAX_HOPS = 32  # typedef/cv chains longer than this are malformed

# DW_ATE_* base type encodings
ATE_BOOLEAN = 0x02
ATE_FLOAT = 0x04
ATE_SIGNED = 0x05
ATE_SIGNED_CHAR = 0x06
ATE_UNSIGNED = 0x07
ATE_UNSIGNED_CHAR = 0x08
ATE_UTF = 0x10
DW_OP_PLUS_UCONST = 0x23
DW_OP_CONSTU = 0x10


class Member(NamedTuple):
    name: str
    offset: int
    type: int | None  # type DIE offset (None: void / unknown)
    bit_offset: int | None
    bit_size: int | None


class TypeRef(NamedTuple):
    """A type as the expression resolver walks it: a type DIE (None for void), with the first `skipped`
    dimensions of a multi-dimensional array already indexed."""

    die: int | None
    skipped: int = 0


class TypeTable:
    """Layouts and members of the types of one file, memoized. Not thread-safe: callers hold a lock."""

    def __init__(self, reader: DieReader) -> None:
        self.reader = reader
        self._layouts: dict[tuple[int | None, int, int], ValueLayout] = {}
        self._members: dict[int, tuple[Member, ...]] = {}
        self._names: dict[tuple[int | None, int], str] = {}
        # Finds the definition of a struct only declared where it is used (`struct Engine;`): set by the owner.
        self.find_definition: Callable[[Die], int | None] | None = None

    def complete(self, die: Die) -> Die:
        """The definition of a declared-only struct/class/union when one is known, else `die`."""
        if die.tag in STRUCT_TAGS and die.get(AT_DECLARATION) and self.find_definition is not None:
            ref = self.find_definition(die)
            if ref is not None and ref != die.offset:
                try:
                    return self.reader.die(ref)
                except ValueError:
                    pass
        return die

    # --- navigation (expressions) ----------------------------------------------------------------
    def strip(self, ref: int | None) -> Die | None:
        """The DIE behind typedefs and cv-qualifiers (None for void or an unreadable type)."""
        for _ in range(_MAX_HOPS):
            if ref is None or ref < 0:
                return None
            try:
                die = self.reader.die(ref)
            except ValueError:
                return None
            if die.tag == TAG_TYPEDEF or die.tag in TRANSPARENT_TAGS:
                ref = die.ref(AT_TYPE)
                continue
            return self.complete(die)
        return None

    def view(self, t: TypeRef) -> ValueLayout:
        """The layout of `t` without expanding structs (kind, name, size)."""
        return self.layout(t.die, 0, t.skipped)

    def pointee(self, t: TypeRef) -> TypeRef | None:
        """What a pointer or reference type points to (TypeRef(None) for void*), or None if `t` is not one."""
        die = self.strip(t.die)
        if t.skipped or die is None or die.tag not in POINTER_TAGS:
            return None
        return TypeRef(die.ref(AT_TYPE))

    def is_reference(self, t: TypeRef) -> bool:
        """A C++ (lvalue or rvalue) reference type."""
        die = self.strip(t.die)
        return not t.skipped and die is not None and die.tag in (TAG_REFERENCE_TYPE, TAG_RVALUE_REFERENCE_TYPE)

    def element(self, t: TypeRef) -> tuple[TypeRef, int] | None:
        """(element type, element count) of an array type, or None if `t` is not an array."""
        die = self.strip(t.die)
        if die is None or die.tag != TAG_ARRAY_TYPE:
            return None
        dims = self.dimensions(die)
        if t.skipped >= len(dims):
            return None
        count = dims[t.skipped]
        if t.skipped + 1 < len(dims):
            return TypeRef(die.offset, t.skipped + 1), count
        return TypeRef(die.ref(AT_TYPE)), count

    def is_struct(self, t: TypeRef) -> bool:
        die = self.strip(t.die)
        return not t.skipped and die is not None and die.tag in STRUCT_TAGS

    def members(self, ref: int) -> tuple[Member, ...]:
        """Data members of a struct/class/union DIE at their offsets: those of base classes first (shadowed
        ones renamed "Base::name"), anonymous struct/union members flattened, static members left out."""
        found = self._members.get(ref)
        if found is None:
            found = self._members[ref] = tuple(self._collect_members(ref, 0))
        return found

    def _collect_members(self, ref: int, level: int) -> list[Member]:
        die = self.strip(ref)
        if die is None or die.tag not in STRUCT_TAGS or level > 16:
            return []
        inherited: list[tuple[str, Member]] = []
        own: list[Member] = []
        for child in self.reader.children(die):
            if child.tag == TAG_INHERITANCE:
                offset = member_offset(child)
                base = child.ref(AT_TYPE)
                if offset is None or base is None:
                    continue  # a virtual base: its offset is only known at run time
                base_name = self.name(base)
                inherited += [(base_name, m._replace(offset=m.offset + offset))
                              for m in self._collect_members(base, level + 1)]
            elif child.tag == TAG_MEMBER:
                member = self._member(child)
                if member is None:
                    continue
                if member.name:
                    own.append(member)
                else:  # an anonymous struct/union: its members belong to the parent
                    inner = self._collect_members(member.type, level + 1) if member.type is not None else []
                    own += [m._replace(offset=m.offset + member.offset) for m in inner]
        names = {m.name for m in own}
        result: list[Member] = []
        for base_name, m in inherited:
            shown = m.name if m.name not in names else f"{base_name}::{m.name}"
            names.add(shown)
            result.append(m._replace(name=shown))
        return result + own

    def _member(self, die: Die) -> Member | None:
        if die.get(AT_DECLARATION) or (die.get(AT_EXTERNAL) and AT_DATA_MEMBER_LOCATION not in die.attrs):
            return None  # a static member (DWARF 4 style)
        type_ref = die.ref(AT_TYPE)
        offset = member_offset(die)
        bit_size = die.integer(AT_BIT_SIZE)
        if bit_size is None:
            if offset is None:
                if AT_DATA_MEMBER_LOCATION in die.attrs:
                    return None  # an offset computed at run time
                offset = 0  # union members
            return Member(die.name or "", offset, type_ref, None, None)
        bits = die.integer(AT_DATA_BIT_OFFSET)
        if bits is None:
            base = offset or 0
            legacy = die.integer(AT_BIT_OFFSET)
            if legacy is None:
                bits = base * 8
            else:  # DWARF 2/3: counted from the most significant bit of a storage unit (little-endian)
                storage = die.integer(AT_BYTE_SIZE) or self.layout(type_ref, 0).size
                bits = base * 8 + storage * 8 - legacy - bit_size
        elif offset is not None:
            bits += offset * 8
        return Member(die.name or "", bits // 8, type_ref, bits % 8, bit_size)

    def dimensions(self, die: Die) -> list[int]:
        dims: list[int] = []
        for child in self.reader.children(die):
            if child.tag != TAG_SUBRANGE_TYPE:
                continue
            count = child.integer(AT_COUNT)
            if count is None:
                upper = child.integer(AT_UPPER_BOUND)
                lower = child.integer(AT_LOWER_BOUND) or 0
                # A reference (VLA) or a missing bound (flexible array member): unknown.
                count = upper - lower + 1 if upper is not None and child.forms.get(AT_UPPER_BOUND) not in _REFS else 0
            dims.append(max(count, 0))
        return dims or [0]

    # --- names -----------------------------------------------------------------------------------
    def name(self, ref: int | None, skipped: int = 0) -> str:
        key = (ref, skipped)
        found = self._names.get(key)
        if found is None:
            found = self._names[key] = self._name(ref, skipped, 0)
        return found

    def _name(self, ref: int | None, skipped: int, hops: int) -> str:
        if ref is None:
            return "void"
        if ref < 0 or hops > _MAX_HOPS:
            return "<unknown type>"
        try:
            die = self.reader.die(ref)
        except ValueError:
            return "<unknown type>"
        tag = die.tag
        if tag in TRANSPARENT_TAGS:
            return self._name(die.ref(AT_TYPE), skipped, hops + 1)
        if tag == TAG_ARRAY_TYPE:
            dims = self.dimensions(die)[skipped:]
            return self._name(die.ref(AT_TYPE), 0, hops + 1) + "".join(f"[{n}]" if n else "[]" for n in dims)
        if die.name is not None:
            return die.name
        if tag in POINTER_TAGS:
            target = self.strip(die.ref(AT_TYPE))
            suffix = _POINTER_SUFFIX[tag]
            if target is not None and target.tag == TAG_SUBROUTINE_TYPE:
                returns, params = self._signature_parts(target, hops)
                return f"{returns} ({suffix})({params})"
            return self._name(die.ref(AT_TYPE), 0, hops + 1) + suffix
        if tag == TAG_SUBROUTINE_TYPE:
            returns, params = self._signature_parts(die, hops)
            return f"{returns}({params})"
        if tag in STRUCT_TAGS:
            return "<anonymous union>" if tag == TAG_UNION_TYPE else "<anonymous struct>"
        if tag == TAG_ENUMERATION_TYPE:
            return "<anonymous enum>"
        if tag == TAG_PTR_TO_MEMBER_TYPE:
            return "<member pointer>"
        return "<unknown type>"

    def _signature_parts(self, die: Die, hops: int) -> tuple[str, str]:
        params = []
        for child in self.reader.children(die):
            if child.tag == TAG_FORMAL_PARAMETER and not child.get(AT_ARTIFICIAL):
                params.append(self._name(child.ref(AT_TYPE), 0, hops + 1))
            elif child.tag == TAG_UNSPECIFIED_PARAMETERS:
                params.append("...")
        return self._name(die.ref(AT_TYPE), 0, hops + 1), ", ".join(params)

    # --- layouts ---------------------------------------------------------------------------------
    def layout(self, ref: int | None, depth: int = 1, skipped: int = 0) -> ValueLayout:
        """How to decode a value of type `ref` (None: void), structs expanded `depth` levels deep."""
        depth = max(depth, 0)
        key = (ref, depth, skipped)
        found = self._layouts.get(key)
        if found is None:
            found = self._layouts[key] = self._build(ref, depth, skipped, 0)
        return found

    def _build(self, ref: int | None, depth: int, skipped: int, hops: int) -> ValueLayout:
        if ref is None:
            return VOID
        name = self.name(ref, skipped)
        if ref < 0 or hops > _MAX_HOPS:
            return ValueLayout("void", name, 0)
        try:
            die = self.reader.die(ref)
        except ValueError:
            return ValueLayout("void", name, 0)
        tag = die.tag
        if tag == TAG_TYPEDEF or tag in TRANSPARENT_TAGS:
            inner = self._build(die.ref(AT_TYPE), depth, skipped, hops + 1)
            return replace(inner, type_name=name) if tag == TAG_TYPEDEF else inner
        if tag == TAG_BASE_TYPE:
            return self._base(die, name)
        if tag in POINTER_TAGS:
            return self._pointer(die, name, depth)
        if tag == TAG_ARRAY_TYPE:
            return self._array(die, name, depth, skipped, hops)
        if tag == TAG_ENUMERATION_TYPE:
            return self._enum(die, name)
        if tag in STRUCT_TAGS:
            return self._struct(self.complete(die), name, depth)
        size = die.integer(AT_BYTE_SIZE) or 0
        if tag == TAG_SUBROUTINE_TYPE:
            return ValueLayout("function", name, 0)
        if tag == TAG_PTR_TO_MEMBER_TYPE:
            return ValueLayout("bytes", name, size or die.unit.address_size)
        if tag == TAG_UNSPECIFIED_TYPE:  # decltype(nullptr)
            return ValueLayout("pointer", name, size or die.unit.address_size)
        return ValueLayout("bytes", name, size)

    def _base(self, die: Die, name: str) -> ValueLayout:
        size = die.integer(AT_BYTE_SIZE) or 0
        encoding = die.integer(AT_ENCODING)
        kind: Kind
        if encoding == ATE_BOOLEAN:
            kind = "bool"
        elif encoding == ATE_FLOAT and size in (2, 4, 8, 10, 12, 16):
            kind = "float"
        elif (encoding in (ATE_SIGNED_CHAR, ATE_UNSIGNED_CHAR) and size == 1 and die.name == "char") or (
            encoding == ATE_UTF and size in (1, 2, 4)
        ):
            kind = "char"
        elif encoding in (ATE_SIGNED, ATE_SIGNED_CHAR):
            kind = "int"
        elif encoding in (ATE_UNSIGNED, ATE_UNSIGNED_CHAR):
            kind = "uint"
        else:
            kind = "bytes"  # complex, decimal, fixed-point: shown as bytes
        return ValueLayout(kind, name, size)

    def _pointer(self, die: Die, name: str, depth: int) -> ValueLayout:
        size = die.integer(AT_BYTE_SIZE) or die.unit.address_size
        target_ref = die.ref(AT_TYPE)
        target = self.strip(target_ref)
        cstring = (
            die.tag == TAG_POINTER_TYPE and target is not None and target.tag == TAG_BASE_TYPE
            and target.integer(AT_BYTE_SIZE) == 1 and target.name == "char"
        )
        pointee = None
        if depth > 0 and target is not None and target.tag != TAG_SUBROUTINE_TYPE:
            pointee = self.layout(target_ref, depth - 1)
        return ValueLayout("pointer", name, size, pointee=pointee, cstring=cstring)

    def _array(self, die: Die, name: str, depth: int, skipped: int, hops: int) -> ValueLayout:
        dims = self.dimensions(die)
        count = dims[min(skipped, len(dims) - 1)]
        if skipped + 1 < len(dims):
            element = self.layout(die.offset, depth, skipped + 1)
        else:
            element = self.layout(die.ref(AT_TYPE), depth)
        size = count * element.size
        if not skipped and len(dims) == 1 and die.integer(AT_BYTE_SIZE):
            size = die.integer(AT_BYTE_SIZE) or size
        return ValueLayout("array", name, size, element=element, count=count)

    def _enum(self, die: Die, name: str) -> ValueLayout:
        size = die.integer(AT_BYTE_SIZE) or 4
        values: list[tuple[int, str]] = []
        for child in self.reader.children(die):
            value = child.integer(AT_CONST_VALUE)
            if child.tag == TAG_ENUMERATOR and value is not None and child.name is not None:
                values.append((value, child.name))
        underlying = self.strip(die.ref(AT_TYPE))
        signed = any(value < 0 for value, _ in values) or (
            underlying is not None and underlying.integer(AT_ENCODING) in (ATE_SIGNED, ATE_SIGNED_CHAR)
        )
        return ValueLayout("enum", name, size, enumerators=tuple(values), signed=signed)

    def _struct(self, die: Die, name: str, depth: int) -> ValueLayout:
        size = die.integer(AT_BYTE_SIZE) or 0
        union = die.tag == TAG_UNION_TYPE
        parts = [child for child in self.reader.children(die) if child.tag == TAG_VARIANT_PART]
        if parts:
            return self._variants(parts[0], name, size, depth)
        if depth <= 0 or die.get(AT_DECLARATION):
            return ValueLayout("struct", name, size, truncated=True, union=union)
        fields = tuple(
            Field(m.name, m.offset, self.layout(m.type, depth - 1), m.bit_offset, m.bit_size)
            for m in self.members(die.offset)
        )
        return ValueLayout("struct", name, size, fields=fields, union=union)

    def _variants(self, part: Die, name: str, size: int, depth: int) -> ValueLayout:
        """A Rust enum: the discriminant member and one payload member per variant."""
        discriminant = None
        discr_die = self.reader.follow(part, AT_DISCR)
        if discr_die is not None:
            offset = member_offset(discr_die) or 0
            discriminant = Field(discr_die.name or "<discriminant>", offset, self.layout(discr_die.ref(AT_TYPE), 0))
        variants: list[Variant] = []
        for child in self.reader.children(part):
            if child.tag != TAG_VARIANT:
                continue
            value = child.integer(AT_DISCR_VALUE)
            for member in self.reader.children(child):
                if member.tag == TAG_MEMBER:
                    offset = member_offset(member) or 0
                    payload = self.layout(member.ref(AT_TYPE), depth)
                    variants.append(Variant(value, Field(member.name or "?", offset, payload)))
                    break
        return ValueLayout("enum", name, size, discriminant=discriminant, variants=tuple(variants))


_REFS = frozenset({0x10, 0x11, 0x12, 0x13, 0x14, 0x15})  # DW_FORM_ref_addr, ref1/2/4/8, ref_udata


def member_offset(die: Die) -> int | None:
    """DW_AT_data_member_location as a constant, or None if absent or computed at run time."""
    value = die.get(AT_DATA_MEMBER_LOCATION)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, bytes) and value and value[0] in (DW_OP_PLUS_UCONST, DW_OP_CONSTU):
        number, end = read_uleb(value, 1)  # DWARF 2 style: DW_OP_plus_uconst N
        return number if end == len(value) else None
    return None
