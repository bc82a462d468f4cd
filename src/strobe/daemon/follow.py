"""Pointer arguments and return values followed at call time, to `serializationDepth` struct levels.

A traced function's register plan (daemon/signatures.py) says which captured register holds which
parameter. Where a parameter (or the return value) is a pointer to a struct or class, a C++ object passed or
returned through a hidden reference, or a `char*`, the agent follows it while the call is being recorded
(agent/src/native/follow.ts) and the host decodes what it copied (daemon/follow_decode.py):

    plan = follow_plan(register_plan_json, signature, levels=3)   # None: nothing to follow
    plan.wire(func_id, version)                                   # the agent's FollowFunction

Levels: every struct shown uses one, whether passed behind a pointer or nested by value; following a pointer
costs nothing by itself. With 3, a `Node* head` shows head, head->next and head->next->next; the third
node's `next` stays an address, and a struct nested beyond the levels shows as "<TypeName>". Only pointers
to structs (and C strings) are followed: an `int*` may be an array, so it stays an address. A pointer back to
a node on the way down shows as "<circular ref to head->next>", unreadable memory as "<unreadable: ...>".

A node of the plan is one (struct type, levels left) pair: how many bytes to copy, where the C-string pointers
are inside them, and which pointer fields lead to which node. Nodes are shared between the places they
appear, and capped per function (MAX_NODES) so a type with many pointer fields cannot blow the plan up.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from strobe.daemon import lang_values as lang
from strobe.daemon.signatures import GPRS
from strobe.symbols.dwarf_dies import AT_TYPE
from strobe.symbols.signatures import FunctionSignature
from strobe.symbols.types import MAX_ARRAY_ITEMS, ValueLayout, read_size
from strobe.symbols.variables import VariableIndex, variable_index

RAX = 6  # a slot's register: 0-5 are rdi..r9 on entry; 6 is rax on exit (a[0] of the exit record)
MAX_NODES = 64  # (struct type, levels left) nodes per function
MAX_POINTERS = 16  # pointer fields followed per node
RETURN_KEY = "r"
_TAG_TEMPLATE_TYPE_PARAM = 0x2F
_MAX_STRINGS = 64  # C strings read per node
_LANG_DEPTH = 8  # extra type-table levels: a Rust String's pointer sits 6 structs deep


@dataclass(frozen=True, slots=True)
class Child:
    offset: int  # of the pointer, in the node's bytes
    path: tuple[str | int, ...]  # where its value sits in the node's decoded JSON
    node: int


@dataclass(frozen=True, slots=True)
class CountedChild:
    """Counted data owned by a value in the node's bytes: its data pointer at `offset`, its count at `count`
    (an end pointer when `end`); `node` is the array node of its elements."""

    offset: int
    count: int
    end: bool
    node: int


@dataclass(frozen=True, slots=True)
class Node:
    layout: ValueLayout | None  # what the bytes at the pointee decode as; None: a C string
    children: tuple[Child, ...] = ()
    counted: tuple[CountedChild, ...] = ()
    size: int = 0  # bytes to copy (at least read_size(layout))
    cap: int = 0  # > 0: an array node: at most `cap` elements of `layout`, behind a CountedChild
    element: int | None = None  # array node: the node whose strings/pointers/counted data each element has
    text: bool = False  # array node: UTF-8 text
    strings: tuple[int, ...] = ()  # offsets of the C-string pointers (none inside language values)

    def wire(self) -> dict[str, Any]:
        if self.layout is None:
            return {"n": 0, "t": 1}
        if self.cap:
            out: dict[str, Any] = {"n": self.layout.size, "t": 2, "m": self.cap}
            if self.element is not None:
                out["e"] = self.element
            return out
        out = {"n": max(read_size(self.layout), self.size)}
        if self.strings:
            out["s"] = list(self.strings)
        if self.children:
            out["p"] = [[c.offset, c.node] for c in self.children]
        if self.counted:
            out["q"] = [[c.offset, c.count, 1 if c.end else 0, c.node] for c in self.counted]
        return out


@dataclass(frozen=True, slots=True)
class Slot:
    key: str  # the parameter's index ("0", "1"...) or "r" for the return value
    register: int  # 0-5 rdi..r9 (on entry) or RAX (on exit); the first of `words`
    node: int
    name: str  # how circular references name it: the parameter's name, or "return"
    words: tuple[int, ...] = ()  # a value held in these registers (in order), copied as the node's bytes


@dataclass(frozen=True, slots=True)
class FollowPlan:
    nodes: tuple[Node, ...]
    slots: tuple[Slot, ...]
    shapes: Mapping[int, lang.Shape] = dataclasses.field(default_factory=dict)  # by id() of the node layouts
    pinned: tuple[ValueLayout, ...] = dataclasses.field(default=(), compare=False, repr=False)  # keeps those ids

    def wire(self, func_id: int, version: int) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": func_id, "version": version, "nodes": [n.wire() for n in self.nodes],
            "slots": [[s.key, s.register, s.node] for s in self.slots if not s.words]}
        words = [[s.key, list(s.words), s.node] for s in self.slots if s.words]
        if words:
            out["words"] = words
        return out


def plan_function(module_path: str, static_address: int, register_plan: str | None, levels: int) -> FollowPlan | None:
    """The follow plan of the function at `static_address` (its static low_pc) from its register plan JSON;
    reads the DWARF types deep enough for `levels`."""
    if not register_plan:
        return None
    index = variable_index(module_path)
    with index.lock:  # the index's DIE reader and type table are not thread-safe
        # A struct level behind a pointer takes two levels of the type table (the pointer, then the struct).
        signature = index.signature(static_address, 2 * levels + 1 + _LANG_DEPTH)
        if signature is None:
            return None
        return follow_plan(json.loads(register_plan), signature, levels, _TemplateArgs(index, 2 * levels + _LANG_DEPTH))


class _TemplateArgs:
    """The layouts of a generic type's type parameters (DW_TAG_template_type_param), found through the type
    table that built its layout. Called with the index's lock held."""

    def __init__(self, index: VariableIndex, depth: int) -> None:
        self.types = index.types
        self.depth = depth
        self._refs: dict[int, int] | None = None

    def __call__(self, layout: ValueLayout) -> Sequence[ValueLayout]:
        if self._refs is None:  # every layout the table built, by identity: its DIE
            self._refs = {id(v): key[0] for key, v in self.types._layouts.items() if key[0] is not None}
        ref = self._refs.get(id(layout))
        die = self.types.strip(ref) if ref is not None else None
        if die is None:
            return ()
        found = []
        for child in self.types.reader.children(die):
            if child.tag == _TAG_TEMPLATE_TYPE_PARAM:
                found.append(self.types.layout(child.ref(AT_TYPE), self.depth))
        return found


def follow_plan(register_plan: Mapping[str, Any], signature: FunctionSignature, levels: int,
                template_args: lang.TemplateArgs | None = None) -> FollowPlan | None:
    """What to follow for a function, from its register plan (parsed JSON) and its DWARF signature; None when
    no parameter or return value is worth following. `template_args`: a generic type's type arguments."""
    builder = _Builder(template_args)
    slots: list[Slot] = []
    params = [p for p in register_plan.get("params", ()) if isinstance(p, dict)]
    for i, (entry, param) in enumerate(zip(params, signature.params, strict=False)):
        slot = builder.slot(str(i), entry, param.layout, param.name, GPRS, levels)
        if slot is not None:
            slots.append(slot)
    returns = register_plan.get("returns")
    if isinstance(returns, dict) and signature.returns is not None:
        slot = builder.slot(RETURN_KEY, returns, signature.returns, "return", ("rax",), levels)
        if slot is not None:
            slots.append(slot)
    if not slots:
        return None
    return FollowPlan(tuple(builder.nodes), tuple(slots), builder.shapes, tuple(builder.pinned))


def _register(entry: Mapping[str, Any], names: tuple[str, ...]) -> int | None:
    """The register index of a value held whole, as a pointer, in one register."""
    value, pieces = entry.get("value"), entry.get("pieces")
    if not isinstance(value, dict) or value.get("kind") != "pointer" or not isinstance(pieces, list):
        return None
    if len(pieces) != 1 or pieces[0].get("at") != 0 or pieces[0].get("size") != 8:
        return None
    reg = pieces[0].get("reg")
    if reg not in names:
        return None
    return RAX if reg == "rax" else names.index(reg)


def _words(entry: Mapping[str, Any], names: tuple[str, ...]) -> tuple[int, ...] | None:
    """The registers holding a value whole, 8 bytes each in order (the last may hold fewer), or None."""
    pieces = entry.get("pieces")
    if not isinstance(entry.get("value"), dict) or not isinstance(pieces, list) or not pieces:
        return None
    regs: list[int] = []
    for i, piece in enumerate(pieces):
        reg = piece.get("reg") if isinstance(piece, dict) else None
        if reg not in names or piece.get("at") != 8 * i or not 0 < int(piece.get("size", 0)) <= 8:
            return None
        regs.append(RAX if reg == "rax" else names.index(reg))
    return tuple(regs)


class _Builder:
    def __init__(self, template_args: lang.TemplateArgs | None) -> None:
        self.nodes: list[Node] = []
        self.shapes: dict[int, lang.Shape] = {}
        self.pinned: list[ValueLayout] = []
        self._args = template_args
        self._memo: dict[tuple[int, int], int | None] = {}
        self._arrays: dict[tuple[int, int], int | None] = {}
        self._trimmed: dict[tuple[int, int], ValueLayout] = {}
        self._shapes: dict[int, lang.Shape | None] = {}
        self._cstring: int | None = None

    def shape(self, layout: ValueLayout) -> lang.Shape | None:
        key = id(layout)
        if key not in self._shapes:
            found = self._shapes[key] = lang.shape(layout, self._args)
            if found is not None:
                self.shapes[key] = found
                self.pinned.append(layout)
        return self._shapes[key]

    def slot(self, key: str, entry: Mapping[str, Any], layout: ValueLayout, name: str, names: tuple[str, ...],
             levels: int) -> Slot | None:
        """How the agent follows one parameter or the return value: a pointer in a register, or a language
        value (a &str, an Rc, a Box) held in registers whose words the agent copies as its bytes."""
        if self.shape(layout) is not None and not entry.get("reference") and not entry.get("address"):
            words = _words(entry, names)
            node = self.node(layout, levels) if words is not None else None
            if words is not None and node is not None and len(words) * 8 >= min(read_size(layout), layout.size):
                return Slot(key, words[0], node, name, words)
            if words is not None:
                return None
        register = _register(entry, names)
        if register is None:
            return None
        by_reference = bool(entry.get("reference")) or bool(entry.get("address"))
        node = self.behind(layout, levels, by_reference)
        return None if node is None else Slot(key, register, node, name)

    def behind(self, layout: ValueLayout, levels: int, by_reference: bool) -> int | None:
        """The node of what a register value points to: `layout` itself when the value is passed or returned
        through a hidden reference, else the pointee of a pointer (a struct, or a C string)."""
        if by_reference:
            return self.node(layout, levels)
        if layout.kind != "pointer":
            return None
        if layout.cstring:
            if self._cstring is None:
                self._cstring = len(self.nodes)
                self.nodes.append(Node(None))
            return self._cstring
        return self.node(layout.pointee, levels) if layout.pointee is not None else None

    def node(self, layout: ValueLayout, levels: int, any_value: bool = False) -> int | None:
        """The node showing a struct (or a language value, or a Rust enum; with `any_value` any value) with
        `levels` struct levels (itself included), or None."""
        if levels <= 0 or layout.size <= 0:
            return None
        shaped = self.shape(layout) is not None
        if layout.kind == "struct":
            if not shaped and (layout.truncated or layout.union or not layout.fields):
                return None
        elif not (shaped or (layout.kind == "enum" and layout.variants) or any_value):
            return None
        if layout.kind in ("void", "function"):
            return None
        key = (id(layout), levels)
        if key in self._memo:
            return self._memo[key]
        if len(self.nodes) >= MAX_NODES:
            return None
        index = len(self.nodes)
        self.nodes.append(Node(None))  # placeholder: a recursive type finds its own index
        self._memo[key] = index
        self.nodes[index] = self._content(layout, levels)
        return index

    def _content(self, layout: ValueLayout, levels: int) -> Node:
        walk = _Walk()
        self._walk(layout, levels, 0, (), walk, top=True)
        children: list[Child] = []
        for offset, path, pointee, left in walk.pointers:
            if len(children) >= MAX_POINTERS:
                break
            owned = self._owned(offset, walk)
            if not owned and _dispatch_table(pointee):  # an object's type or vtable: its address says enough
                continue
            child = self.node(pointee, left, any_value=owned)
            if child is not None:
                children.append(Child(offset, path, child))
        counted: list[CountedChild] = []
        for offset, count, shape, left in walk.counted:
            array = self._array(shape, left)
            if array is not None:
                counted.append(CountedChild(offset, count, shape.end, array))
        size = max([read_size(layout), *(c.offset + 8 for c in children),
                    *(max(c.offset, c.count) + 8 for c in counted), walk.end])
        return Node(self._trim(layout, levels), tuple(children), tuple(counted), min(size, layout.size or size),
                    strings=tuple(walk.strings[:_MAX_STRINGS]))

    def _follows(self, layout: ValueLayout, levels: int) -> bool:
        """Whether a value of `layout` holds anything the agent follows (its C strings, pointees, counted data)."""
        walk = _Walk()
        self._walk(layout, levels, 0, (), walk, top=True)
        return bool(walk.pointers or walk.counted or walk.strings)

    @staticmethod
    def _owned(offset: int, walk: _Walk) -> bool:
        return offset in walk.owned

    def _array(self, shape: lang.Counted, levels: int) -> int | None:
        """The array node of counted data: its elements (trimmed to `levels`) and what each one follows."""
        if shape.element is None:
            return None
        key = (id(shape.element), levels)
        if key in self._arrays:
            return self._arrays[key]
        if len(self.nodes) >= MAX_NODES:
            return None
        index = len(self.nodes)
        self.nodes.append(Node(None))
        self._arrays[key] = index
        element = None
        if not shape.text and self._follows(shape.element, levels):
            element = self.node(shape.element, levels, any_value=True)
        self.nodes[index] = Node(self._trim(shape.element, levels), size=shape.element.size, cap=shape.cap,
                                 element=element, text=shape.text)
        return index

    def _walk(self, layout: ValueLayout, levels: int, base: int, path: tuple[str | int, ...], walk: _Walk,
              top: bool = False) -> None:
        """What a value with `levels` left holds to follow: pointer-to-struct fields, owning pointers and
        counted data of language values, inside structs, arrays and every variant of a Rust enum."""
        if len(walk.pointers) >= MAX_POINTERS:
            return
        shape = self.shape(layout)
        if shape is not None and levels > 0:
            if isinstance(shape, lang.Counted):
                walk.counted.append((base + shape.pointer, base + shape.count, shape, levels - (0 if top else 1)))
                walk.end = max(walk.end, base + max(shape.pointer, shape.count) + 8)
            elif isinstance(shape, lang.Smart):
                if shape.pointee is not None:
                    walk.pointers.append((base + shape.pointer, path, shape.pointee, levels))
                    walk.owned.add(base + shape.pointer)
                counts = self._counts(layout, shape)
                if counts is not None:
                    walk.pointers.append((base + shape.counts, path, counts, 1))
                walk.end = max(walk.end, base + max(shape.pointer, shape.counts) + 8)
            else:
                walk.end = max(walk.end, base + shape.count + 8)
            return
        if layout.kind == "struct" and not layout.truncated and not layout.union and levels > 0:
            for f in layout.fields:
                if f.bit_size is None:
                    self._walk(f.layout, levels - 1, base + f.offset, (*path, f.name), walk)
        elif layout.kind == "array" and layout.element is not None and layout.element.kind in ("struct", "pointer",
                                                                                                "enum", "array"):
            for i in range(min(layout.count, MAX_ARRAY_ITEMS)):
                self._walk(layout.element, levels, base + i * layout.element.size, (*path, i), walk)
                if len(walk.pointers) >= MAX_POINTERS:
                    break
        elif layout.kind == "enum" and layout.variants:
            for variant in layout.variants:  # any variant may be the live one: the host shows the live one's
                self._walk(variant.field.layout, levels, base + variant.field.offset, (*path, variant.field.name),
                           walk)
        elif layout.kind == "pointer" and layout.cstring:
            walk.strings.append(base)
        elif (layout.kind == "pointer" and layout.pointee is not None and layout.pointee.kind == "struct"
              and levels > 0):
            walk.pointers.append((base, path, layout.pointee, levels))

    @staticmethod
    def _counts(layout: ValueLayout, shape: lang.Smart) -> ValueLayout | None:
        """A shared_ptr's control block (_M_pi's pointee: its use count)."""
        if shape.kind != "shared":
            return None
        refcount = layout.field("_M_refcount")
        pi = refcount.layout.field("_M_pi") if refcount is not None else None
        return pi.layout.pointee if pi is not None and pi.layout.kind == "pointer" else None

    def _trim(self, layout: ValueLayout, levels: int) -> ValueLayout:
        """`layout` with structs beyond `levels` cut ("<TypeName>"); pointees are left out (never decoded).
        Language values are kept whole: they show through their shape, not their fields."""
        key = (id(layout), levels)
        found = self._trimmed.get(key)
        if found is not None:
            return found
        if self.shape(layout) is not None and levels > 0:
            trimmed = layout
        elif layout.kind == "struct":
            if layout.truncated or levels <= 0:
                trimmed = dataclasses.replace(layout, fields=(), truncated=True)
            else:
                trimmed = dataclasses.replace(
                    layout, fields=tuple(dataclasses.replace(f, layout=self._trim(f.layout, levels - 1))
                                         for f in layout.fields))
        elif layout.kind == "array" and layout.element is not None:
            trimmed = dataclasses.replace(layout, element=self._trim(layout.element, levels))
        elif layout.kind == "enum" and layout.variants:
            trimmed = dataclasses.replace(layout, variants=tuple(
                dataclasses.replace(v, field=dataclasses.replace(v.field, layout=self._trim(v.field.layout, levels)))
                for v in layout.variants))
        elif layout.kind == "pointer":
            trimmed = dataclasses.replace(layout, pointee=None)
        else:
            trimmed = layout
        self._trimmed[key] = trimmed
        return trimmed


_TABLE_NAMES = ("_typeobject", "PyTypeObject")  # CPython's type objects: ~50 fields, most of them pointers
_TABLE_MIN_FIELDS = 12


def _dispatch_table(layout: ValueLayout) -> bool:
    """A struct that describes other objects rather than being data of its own: a type object (CPython's
    `ob_type`, whose fields would be followed into more tables: a `PyObject*` grew to 7.5 KB), a vtable or a
    table of methods, by its name or by being mostly pointers among many fields. Shown as its address (the
    pointer field's value); debug_read follows it when asked."""
    if layout.kind != "struct" or layout.union:
        return False
    name = layout.type_name
    if name in _TABLE_NAMES or "vtable" in name.lower() or name.endswith("Methods"):
        return True
    pointers = sum(1 for f in layout.fields if f.layout.kind == "pointer")
    return len(layout.fields) >= _TABLE_MIN_FIELDS and 2 * pointers >= len(layout.fields)


@dataclass
class _Walk:
    pointers: list[tuple[int, tuple[str | int, ...], ValueLayout, int]] = dataclasses.field(default_factory=list)
    counted: list[tuple[int, int, lang.Counted, int]] = dataclasses.field(default_factory=list)  # pointer, count
    owned: set[int] = dataclasses.field(default_factory=set)  # offsets of owning pointers (any pointee)
    end: int = 0  # bytes the language values need copied
    strings: list[int] = dataclasses.field(default_factory=list)  # C-string pointers
