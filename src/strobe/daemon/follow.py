"""Pointer arguments and return values followed at call time, to `serializationDepth` struct levels.

A traced function's register plan (daemon/signatures.py) says which captured register holds which
parameter. Where a parameter (or the return value) is a pointer to a struct or class, a C++ object passed or
returned through a hidden reference, or a `char*`, the agent follows it while the call is being recorded
(agent/src/native/follow.ts) and the host decodes what it copied:

    plan = follow_plan(register_plan_json, signature, levels=3)   # None: nothing to follow
    plan.wire(func_id, version)                                   # the agent's FollowFunction
    decoder = FollowDecoder(); decoder.add(func_id, version, plan)
    decoder.decode(func_id, version, captured)                    # {"0": {...}, "r": "text"}

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
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strobe.daemon.signatures import GPRS
from strobe.symbols.decode import decode, strings_by_pointer
from strobe.symbols.signatures import FunctionSignature
from strobe.symbols.types import MAX_ARRAY_ITEMS, ValueLayout, read_size, string_offsets
from strobe.symbols.variables import variable_index

RAX = 6  # a slot's register: 0-5 are rdi..r9 on entry; 6 is rax on exit (a[0] of the exit record)
MAX_NODES = 64  # (struct type, levels left) nodes per function
MAX_POINTERS = 16  # pointer fields followed per node
RETURN_KEY = "r"


@dataclass(frozen=True, slots=True)
class Child:
    offset: int  # of the pointer, in the node's bytes
    path: tuple[str | int, ...]  # where its value sits in the node's decoded JSON
    node: int


@dataclass(frozen=True, slots=True)
class Node:
    layout: ValueLayout | None  # what the bytes at the pointee decode as; None: a C string
    children: tuple[Child, ...] = ()

    def wire(self) -> dict[str, Any]:
        if self.layout is None:
            return {"n": 0, "t": 1}
        out: dict[str, Any] = {"n": read_size(self.layout)}
        strings = string_offsets(self.layout)
        if strings:
            out["s"] = strings
        if self.children:
            out["p"] = [[c.offset, c.node] for c in self.children]
        return out


@dataclass(frozen=True, slots=True)
class Slot:
    key: str  # the parameter's index ("0", "1"...) or "r" for the return value
    register: int  # 0-5 rdi..r9 (on entry) or RAX (on exit)
    node: int
    name: str  # how circular references name it: the parameter's name, or "return"


@dataclass(frozen=True, slots=True)
class FollowPlan:
    nodes: tuple[Node, ...]
    slots: tuple[Slot, ...]

    def wire(self, func_id: int, version: int) -> dict[str, Any]:
        return {"id": func_id, "version": version, "nodes": [n.wire() for n in self.nodes],
                "slots": [[s.key, s.register, s.node] for s in self.slots]}


def plan_function(module_path: str, static_address: int, register_plan: str | None, levels: int) -> FollowPlan | None:
    """The follow plan of the function at `static_address` (its static low_pc) from its register plan JSON;
    reads the DWARF types deep enough for `levels`."""
    if not register_plan:
        return None
    index = variable_index(module_path)
    with index.lock:  # the index's DIE reader and type table are not thread-safe
        # A struct level behind a pointer takes two levels of the type table (the pointer, then the struct).
        signature = index.signature(static_address, 2 * levels + 1)
    if signature is None:
        return None
    return follow_plan(json.loads(register_plan), signature, levels)


def follow_plan(register_plan: Mapping[str, Any], signature: FunctionSignature, levels: int) -> FollowPlan | None:
    """What to follow for a function, from its register plan (parsed JSON) and its DWARF signature; None when
    no parameter or return value is worth following."""
    builder = _Builder()
    slots: list[Slot] = []
    params = [p for p in register_plan.get("params", ()) if isinstance(p, dict)]
    for i, (entry, param) in enumerate(zip(params, signature.params, strict=False)):
        register = _register(entry, GPRS)
        if register is None:
            continue
        node = builder.behind(param.layout, levels, by_reference=bool(entry.get("reference")))
        if node is not None:
            slots.append(Slot(str(i), register, node, param.name))
    returns = register_plan.get("returns")
    if isinstance(returns, dict) and signature.returns is not None and _register(returns, ("rax",)) is not None:
        node = builder.behind(signature.returns, levels, by_reference=bool(returns.get("address")))
        if node is not None:
            slots.append(Slot(RETURN_KEY, RAX, node, "return"))
    if not slots:
        return None
    return FollowPlan(tuple(builder.nodes), tuple(slots))


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


class _Builder:
    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self._memo: dict[tuple[int, int], int | None] = {}
        self._trimmed: dict[tuple[int, int], ValueLayout] = {}
        self._cstring: int | None = None

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

    def node(self, layout: ValueLayout, levels: int) -> int | None:
        """The node showing a struct with `levels` struct levels (itself included), or None."""
        if layout.kind != "struct" or layout.truncated or layout.union or levels <= 0 or not layout.fields:
            return None
        key = (id(layout), levels)
        if key in self._memo:
            return self._memo[key]
        if len(self.nodes) >= MAX_NODES:
            return None
        index = len(self.nodes)
        self.nodes.append(Node(None))  # placeholder: a recursive type finds its own index
        self._memo[key] = index
        children: list[Child] = []
        for offset, path, pointee, left in self._pointers(layout, levels, 0, ()):
            if len(children) >= MAX_POINTERS:
                break
            child = self.node(pointee, left)
            if child is not None:
                children.append(Child(offset, path, child))
        self.nodes[index] = Node(self._trim(layout, levels), tuple(children))
        return index

    def _pointers(
        self, layout: ValueLayout, levels: int, base: int, path: tuple[str | int, ...]
    ) -> list[tuple[int, tuple[str | int, ...], ValueLayout, int]]:
        """Pointer-to-struct fields of a value with `levels` left: (offset, path, pointee, levels left for it)."""
        found: list[tuple[int, tuple[str | int, ...], ValueLayout, int]] = []
        if layout.kind == "struct" and not layout.truncated and not layout.union and levels > 0:
            for f in layout.fields:
                if f.bit_size is None:
                    found += self._pointers(f.layout, levels - 1, base + f.offset, (*path, f.name))
        elif layout.kind == "array" and layout.element is not None and layout.element.kind in ("struct", "pointer"):
            for i in range(min(layout.count, MAX_ARRAY_ITEMS)):
                found += self._pointers(layout.element, levels, base + i * layout.element.size, (*path, i))
                if len(found) >= MAX_POINTERS:
                    break
        elif (layout.kind == "pointer" and not layout.cstring and layout.pointee is not None
              and layout.pointee.kind == "struct" and levels > 0):
            found.append((base, path, layout.pointee, levels))
        return found[:MAX_POINTERS]

    def _trim(self, layout: ValueLayout, levels: int) -> ValueLayout:
        """`layout` with structs beyond `levels` cut ("<TypeName>"); pointees are left out (never decoded)."""
        key = (id(layout), levels)
        found = self._trimmed.get(key)
        if found is not None:
            return found
        if layout.kind == "struct":
            if layout.truncated or levels <= 0:
                trimmed = dataclasses.replace(layout, fields=(), truncated=True)
            else:
                trimmed = dataclasses.replace(
                    layout, fields=tuple(dataclasses.replace(f, layout=self._trim(f.layout, levels - 1))
                                         for f in layout.fields))
        elif layout.kind == "array" and layout.element is not None:
            trimmed = dataclasses.replace(layout, element=self._trim(layout.element, levels))
        elif layout.kind == "pointer":
            trimmed = dataclasses.replace(layout, pointee=None)
        else:
            trimmed = layout
        self._trimmed[key] = trimmed
        return trimmed


class FollowDecoder:
    """Followed values as JSON, by (function id, plan version). Plans are only ever added, so a batch decodes
    with the plan its calls were recorded under whenever it arrives."""

    def __init__(self) -> None:
        self._plans: dict[tuple[int, int], FollowPlan] = {}
        self._lock = threading.Lock()

    def add(self, func_id: int, version: int, plan: FollowPlan) -> None:
        with self._lock:
            self._plans[(func_id, version)] = plan

    def decode(self, func_id: int, version: int, captured: Mapping[str, Any]) -> dict[str, Any]:
        plan = self._plans.get((func_id, version))
        if plan is None:
            return {}
        out: dict[str, Any] = {}
        for slot in plan.slots:
            raw = captured.get(slot.key)
            if raw is not None:
                out[slot.key] = _value(plan, slot.node, raw, slot.name, {})
        return out


def _value(plan: FollowPlan, index: int, raw: Any, where: str, above: dict[str, str]) -> Any:
    """One followed value; `above`: the addresses of the nodes on the way down, by where they are shown."""
    if not isinstance(raw, dict):
        return None
    if "c" in raw:
        return f"<circular ref to {above.get(str(raw['c']), raw['c'])}>"
    if "e" in raw:
        return f"<unreadable: {raw['e']}>"
    node = plan.nodes[index] if 0 <= index < len(plan.nodes) else None
    if node is None:
        return None
    if node.layout is None:
        return raw.get("t")
    try:
        data = bytes.fromhex(str(raw.get("h", "")))
    except ValueError:
        return "<unreadable: undecodable bytes>"
    texts = raw.get("s")
    strings = strings_by_pointer(data, {int(k): v for k, v in texts.items()}) if isinstance(texts, dict) else {}
    value = decode(node.layout, data, strings, named=True)
    children = raw.get("p")
    if isinstance(children, dict) and children:
        below = {**above, str(raw.get("a")): where}
        for child in node.children:
            sub = children.get(str(child.offset))
            if sub is not None:
                _put(value, child.path, _value(plan, child.node, sub, f"{where}->{_spell(child.path)}", below))
    return value


def _put(value: Any, path: tuple[str | int, ...], item: Any) -> None:
    """Replace the item at `path` (field names and array indexes) inside a decoded value."""
    for i, step in enumerate(path):
        held = isinstance(value, dict) and step in value
        held = held or (isinstance(value, list) and isinstance(step, int) and step < len(value))
        if not held:
            return
        if i == len(path) - 1:
            value[step] = item
        else:
            value = value[step]


def _spell(path: tuple[str | int, ...]) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
    return out
