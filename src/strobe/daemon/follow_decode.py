"""Decoding what the agent copied while following a call's pointers (daemon/follow.py plans it): the bytes of
each node shown through its layout, C strings, counted data (strings, slices, vectors) and smart pointers as
their language shows them (daemon/lang_values.py), circular references and unreadable memory said as such.

    decoder = FollowDecoder(); decoder.add(func_id, version, plan)
    decoder.decode(func_id, version, captured)                    # {"0": {...}, "r": "text"}
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping
from typing import Any

from strobe.daemon import lang_values as lang
from strobe.daemon.follow import FollowPlan, Node
from strobe.symbols.decode import decode, live_variant
from strobe.symbols.types import MAX_ARRAY_ITEMS, ValueLayout


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
        return lang.unreadable(str(raw["e"]))
    node = plan.nodes[index] if 0 <= index < len(plan.nodes) else None
    if node is None:
        return None
    if node.layout is None:
        return raw.get("t")
    try:
        data = bytes.fromhex(str(raw.get("h", "")))
    except ValueError:
        return lang.unreadable("undecodable bytes")
    below = {**above, str(raw.get("a")): where}
    return _Show(plan, node, data, 0, raw, where, below).value(node.layout, 0, ())


def _keyed(raw: Any, key: str) -> dict[int, Any]:
    found = raw.get(key) if isinstance(raw, dict) else None
    if not isinstance(found, dict):
        return {}
    out: dict[int, Any] = {}
    for k, v in found.items():
        try:
            out[int(k)] = v
        except ValueError:
            continue
    return out


class _Show:
    """The JSON of one copy of a node's value: its bytes (`data`, the value at `origin`), the C strings, pointees
    and counted data the agent read for it (by offset from `origin`), language values shown by their shape."""

    def __init__(self, plan: FollowPlan, node: Node, data: bytes, origin: int, raw: Any, where: str,
                 above: dict[str, str]) -> None:
        self.plan, self.node, self.data, self.origin = plan, node, data, origin
        self.strings = _keyed(raw, "s")
        self.pointees = _keyed(raw, "p")
        self.counted = _keyed(raw, "q")
        self.where, self.above = where, above
        self.children = {c.offset: c for c in node.children}
        self.counts = {c.offset: c for c in node.counted}

    def value(self, layout: ValueLayout, at: int, path: tuple[str | int, ...]) -> Any:
        rel = at - self.origin
        shape = self.plan.shapes.get(id(layout))
        if shape is not None:
            return self._shaped(layout, shape, at, rel, path)
        kind = layout.kind
        if kind == "struct":
            if layout.truncated:
                return f"<{layout.type_name}>"
            return {f.name: self.value(f.layout, at + f.offset, (*path, f.name)) if f.bit_size is None
                    else decode(dataclasses.replace(layout, fields=(f,)), self.data[at:], named=True)[f.name]
                    for f in layout.fields}
        if kind == "array" and layout.element is not None and layout.element.kind in ("struct", "pointer", "enum"):
            shown = min(layout.count, MAX_ARRAY_ITEMS)
            items = [self.value(layout.element, at + i * layout.element.size, (*path, i)) for i in range(shown)]
            if layout.count > shown:
                items.append(f"<{layout.count - shown} more>")
            return items
        if kind == "enum" and layout.variants:
            return self._enum(layout, at, path)
        if kind == "pointer":
            if rel in self.children and rel in self.pointees:
                child = self.children[rel]
                return _value(self.plan, child.node, self.pointees[rel], f"{self.where}->{_spell(path)}"
                              if path else self.where, self.above)
            if layout.cstring and rel in self.strings:
                return self.strings[rel]
        return decode(layout, self.data[at:at + max(layout.size, 0)], named=True)

    def _enum(self, layout: ValueLayout, at: int, path: tuple[str | int, ...]) -> Any:
        found = layout.discriminant
        if found is not None and at + found.offset + found.layout.size > len(self.data):
            return None
        variant = live_variant(layout, self.data, at)
        if variant is None:
            return f"<enum {layout.type_name}>"
        payload = variant.field.layout
        if payload.kind == "struct" and not payload.truncated and not payload.fields:
            return lang.enum_value(layout, variant.field.name, None, unit=True)
        value = self.value(payload, at + variant.field.offset, (*path, variant.field.name))
        return lang.enum_value(layout, variant.field.name, lang.tuple_payload(value), unit=False)

    def _word(self, at: int) -> int | None:
        if at < 0 or at + 8 > len(self.data):
            return None
        return int.from_bytes(self.data[at:at + 8], "little")

    def _shaped(self, layout: ValueLayout, shape: lang.Shape, at: int, rel: int, path: tuple[str | int, ...]) -> Any:
        if isinstance(shape, lang.Sized):
            count = self._word(at + shape.count)
            return None if count is None else lang.sized(count)
        if isinstance(shape, lang.Smart):
            address = self._word(at + shape.pointer)
            if address is None:
                return None
            child = self.children.get(rel + shape.pointer)
            raw = self.pointees.get(rel + shape.pointer)
            where = f"{self.where}->{_spell(path)}" if path else self.where
            value = _value(self.plan, child.node, raw, where, self.above) if child is not None and raw else (
                None if address == 0 else f"0x{address:x}")
            counts = None
            block, block_raw = self.children.get(rel + shape.counts), self.pointees.get(rel + shape.counts)
            if shape.kind == "shared" and block is not None and block_raw:
                decoded = _value(self.plan, block.node, block_raw, where, self.above)
                if isinstance(decoded, dict) and "_M_use_count" in decoded:
                    counts = {"useCount": decoded["_M_use_count"]}
            return lang.smart(shape, address, value, counts)
        counted = self.counts.get(rel + shape.pointer)
        raw = self.counted.get(rel + shape.pointer)
        if counted is None:
            return f"<{layout.type_name}>"
        if not isinstance(raw, dict):
            return lang.unreadable("not copied")
        return self._array(self.plan.nodes[counted.node], raw, path)

    def _array(self, node: Node, raw: dict[str, Any], path: tuple[str | int, ...]) -> Any:
        if "e" in raw:
            return lang.unreadable(str(raw["e"]))
        total = raw.get("k")
        if not isinstance(total, int) or node.layout is None:
            return lang.unreadable("no element count")
        try:
            data = bytes.fromhex(str(raw.get("h", "")))
        except ValueError:
            return lang.unreadable("undecodable bytes")
        if node.text:
            return lang.text(data, total)
        size = node.layout.size
        found = raw.get("x")
        extras: list[Any] = found if isinstance(found, list) else []
        element = self.plan.nodes[node.element] if node.element is not None else None
        where = f"{self.where}->{_spell(path)}" if path else self.where
        values: list[Any] = []
        for i in range(len(data) // size if size > 0 else 0):
            extra = extras[i] if i < len(extras) else None
            if element is not None and isinstance(extra, dict):
                show = _Show(self.plan, element, data, i * size, extra, f"{where}[{i}]", self.above)
                values.append(show.value(node.layout, i * size, ()))
            else:
                show = _Show(self.plan, node, data, i * size, None, f"{where}[{i}]", self.above)
                values.append(show.value(node.layout, i * size, ()))
        return lang.items(values, total)


def _spell(path: tuple[str | int, ...]) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
    return out
