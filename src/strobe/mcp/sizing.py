"""Values cut to a size an LLM can read: an event (or a debug_read result) whose compact JSON is over a limit has
its biggest subtrees cut until it fits, each cut replaced by a marker saying what is missing and how to see it.

    fit(event, 4096)                      # `event` itself (the same object) when it is small enough, else a copy:
    fit(event, 4096, rule, marks)         #   {..., "trimmed": {"bytes": 7512, "limit": 4096}}

Size is the length of the value as `json.dumps(value, separators=(",", ":"))` writes it, the way tool answers are
sent (mcp/app.py): ASCII, a non-ASCII character counted as its `\\uXXXX` escape(s).

What is cut, biggest first (water-filling): a container over its budget gives each child an equal share of what
its small children leave over, so children under that share stay whole and only the biggest are cut, recursively.
Where even the smallest form of each child does not fit, the last fields or elements go (a prefix is kept):

    a struct's fields   {"a": 1, "b": 2, "…": "… 37 more fields (debug_read with a field path, e.g. 'o->c', …)"}
    an array's elements [1, 2, 3, "… 120 more elements (debug_read e.g. 'o->items[3]')"]
    a string            "the start…(+1412 chars)"

`rule(path)` says what may be cut: "cut" (this subtree, wholly), "open" (never drop this container's own
fields or elements, nor cut it if it is a string; ask the rule again for each child) or "keep" (never touched;
its size still counts).
`marks.name(path)` spells the debug_read target that shows the item at `path` (paths are of the original
value: keys and indexes), or None. A value whose kept parts alone are over the limit comes back as small as
the rule allows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii
from typing import Any, Literal

Key = str | int
Path = tuple[Key, ...]
Mode = Literal["cut", "open", "keep"]
Rule = Callable[[Path], Mode]

MARKER_KEY = "…"
MAX_SUGGESTION = 120  # a debug_read target longer than this is left out of a marker
ELEMENT_SHARE = 8  # an array element shown gets at least 1/8 of the array's budget (or its whole size)
_ENCODER = json.JSONEncoder(separators=(",", ":"), check_circular=False)
_ADDRESS = re.compile(r"^0x[0-9a-f]+$")
_IDENTIFIER = re.compile(r"^[A-Za-z_$][\w$:]*$")
_MARKER_KEY_SIZE = len(encode_basestring_ascii(MARKER_KEY)) + 2  # "…": and its comma


def measure(value: Any) -> int:
    """The value's size as a tool answer carries it: compact JSON, ASCII."""
    return len(_ENCODER.encode(value))


def _open_root(path: Path) -> Mode:
    return "open" if not path else "cut"


@dataclass(frozen=True)
class Marks:
    """What markers say: `name` spells the debug_read target of the item at a path; `advice` is what else shows a
    struct's cut fields ("a smaller serializationDepth")."""

    name: Callable[[Path], str | None] = field(default=lambda path: None)
    advice: str = ""


def fit(value: dict[str, Any], limit: int, rule: Rule = _open_root, marks: Marks | None = None) -> dict[str, Any]:
    """`value` itself when its compact JSON is at most `limit` bytes; else a copy with its biggest subtrees cut to
    fit, `trimmed: {bytes: its size before, limit}` added. The input is never changed."""
    size = measure(value)
    if size <= limit:
        return value
    return trim(value, limit, rule, marks or Marks(), size)


def trim(value: dict[str, Any], limit: int, rule: Rule, marks: Marks, size: int) -> dict[str, Any]:
    """`fit`'s slow path, for a value already measured at `size` > `limit`."""
    note = {"bytes": size, "limit": limit}
    budget = limit - (measure({"trimmed": note}) - 1)  # the field, its comma included, without the braces
    out = _Trimmer(rule, marks).shrink(value, budget, (), rule(()))
    out = dict(out)
    out.pop("trimmed", None)
    out["trimmed"] = note
    return out


def pointer_fields(value: Any) -> dict[str, bool]:
    """Field names a followed value shows as pointers (True: an address, null, a circular or unreadable pointer
    somewhere in it, or a struct under a field of the same name inside it: no struct holds itself by value) or as
    nested structs (False: "<TypeName>" beyond the depth); pointers win a tie."""
    found: dict[str, bool] = {}
    stack: list[tuple[Any, frozenset[str]]] = [(value, frozenset())]
    while stack:
        node, above = stack.pop()
        if isinstance(node, dict):
            for key, item in node.items():
                if isinstance(item, dict | list):
                    if isinstance(item, dict) and key in above:
                        found[key] = True
                    stack.append((item, above | {key} if isinstance(item, dict) else above))
                elif found.get(key) is not True:
                    if item is None or (isinstance(item, str) and (
                            _ADDRESS.match(item) or item.startswith(("<circular ref", "<unreadable")))):
                        found[key] = True
                    elif isinstance(item, str) and item.startswith("<") and item.endswith(">"):
                        found[key] = False
        elif isinstance(node, list):
            stack.extend((item, above) for item in node if isinstance(item, dict | list))
    return found


def spell(root: str, value: Any, steps: Sequence[Key], first: str, nested: Callable[[str], str]) -> str | None:
    """The debug_read expression of the item at `steps` inside `value`, itself named `root`: '.field' or
    '->field' (`first` for the first step, then `nested(previous field)`), '[index]'. debug_read's typed nodes
    ({type, fields | value}) are looked through. None when a step is not a field name."""
    out, node, op = root, value, first
    for step in steps:
        if isinstance(node, dict) and step in ("fields", "value") and "type" in node:
            node = node[step]
            continue
        if isinstance(step, int):
            out += f"[{step}]"
            op = "."
            node = node[step] if isinstance(node, list) and step < len(node) else None
            continue
        if not _IDENTIFIER.match(step):
            return None
        out += op + step
        op = nested(step)
        node = node.get(step) if isinstance(node, dict) else None
    return out


def _size_of_scalar(value: Any) -> int:
    if isinstance(value, str):
        return len(encode_basestring_ascii(value))
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    if isinstance(value, int):
        return len(int.__repr__(value))
    return measure(value)


def _cut_text(text: str, cut: int) -> str:
    return f"{text[:len(text) - cut]}…(+{cut} chars)"


class _Trimmer:
    def __init__(self, rule: Rule, marks: Marks) -> None:
        self.rule = rule
        self.marks = marks
        self._sizes: dict[int, int] = {}

    def size(self, value: Any) -> int:
        if isinstance(value, dict):
            known = self._sizes.get(id(value))
            if known is None:
                known = 1 + sum(len(encode_basestring_ascii(str(k))) + 2 + self.size(v) for k, v in value.items())
                known = max(known, 2)
                self._sizes[id(value)] = known
            return known
        if isinstance(value, list | tuple):
            known = self._sizes.get(id(value))
            if known is None:
                known = max(2, 1 + sum(self.size(v) + 1 for v in value))
                self._sizes[id(value)] = known
            return known
        return _size_of_scalar(value)

    def _mode(self, parent: Mode, path: Path) -> Mode:
        return self.rule(path) if parent == "open" else parent

    def floor(self, value: Any, path: Path, mode: Mode) -> int:
        """The smallest size `shrink` can bring `value` to."""
        size = self.size(value)
        if mode == "keep":
            return size
        if isinstance(value, str):
            return min(size, _size_of_scalar(_cut_text(value, len(value)))) if mode == "cut" else size
        if isinstance(value, dict):
            if mode == "open":
                if not value:
                    return 2
                return 1 + sum(len(encode_basestring_ascii(str(k))) + 2
                               + self.floor(v, (*path, k), self.rule((*path, k))) for k, v in value.items())
            if not value:
                return size
            first = next(iter(value))
            return min(size, 2 + self._marker_entry(path, first, len(value)))
        if isinstance(value, list | tuple):
            if mode == "open":
                return max(2, 1 + sum(self.floor(v, (*path, i), self.rule((*path, i))) + 1
                                      for i, v in enumerate(value)))
            if not value:
                return size
            return min(size, 2 + _size_of_scalar(self._elements_marker(path, 0, len(value))))
        return size

    def shrink(self, value: Any, budget: int, path: Path, mode: Mode) -> Any:
        """`value` brought to at most `budget` bytes (or to its floor, when that is more)."""
        if mode == "keep" or self.size(value) <= budget:
            return value
        if isinstance(value, str) and mode == "cut":
            return self._shrink_text(value, budget)
        if isinstance(value, dict):
            return self._shrink_dict(value, budget, path, mode)
        if isinstance(value, list | tuple):
            return self._shrink_list(list(value), budget, path, mode)
        return value

    def _shrink_text(self, text: str, budget: int) -> str:
        low, high = 0, len(text)  # characters cut: the fewest that fit
        while low < high:
            middle = (low + high) // 2
            if _size_of_scalar(_cut_text(text, middle)) <= budget:
                high = middle
            else:
                low = middle + 1
        while low < len(text) and _size_of_scalar(_cut_text(text, low)) > budget:
            low += 1  # the count's digits make the size step by one now and then
        return _cut_text(text, max(low, 1))

    def _shrink_dict(self, value: dict[str, Any], budget: int, path: Path, mode: Mode) -> dict[str, Any]:
        keys = list(value)
        key_sizes = [len(encode_basestring_ascii(str(k))) + 2 for k in keys]  # "key": and the comma
        modes = [self._mode(mode, (*path, k)) for k in keys]
        floors = [self.floor(value[k], (*path, k), m) for k, m in zip(keys, modes, strict=True)]
        kept, marker = len(keys), ""
        if mode == "cut":  # keep the most leading fields that fit at their floors, with a marker for the rest
            total = 1 + sum(key_sizes) + sum(floors)
            while kept > 0 and total + (_MARKER_KEY_SIZE + _size_of_scalar(marker) if marker else 0) > budget:
                kept -= 1
                total -= key_sizes[kept] + floors[kept]
                marker = self._fields_marker(path, keys[kept], len(keys) - kept)
        reserved = _MARKER_KEY_SIZE + _size_of_scalar(marker) if marker else 0
        shares = self._water(value, keys[:kept], floors[:kept], budget - 1 - sum(key_sizes[:kept]) - reserved)
        items = self._spend(value, keys[:kept], modes, shares, path)
        out = dict(zip(keys[:kept], items, strict=True))
        if marker:
            out[MARKER_KEY if MARKER_KEY not in out else MARKER_KEY + "cut"] = marker
        return out

    def _shrink_list(self, value: list[Any], budget: int, path: Path, mode: Mode) -> list[Any]:
        modes = [self._mode(mode, (*path, i)) for i in range(len(value))]
        floors = [self.floor(v, (*path, i), m) for i, (v, m) in enumerate(zip(value, modes, strict=True))]
        kept, marker = len(value), ""
        if mode == "cut":  # the most leading elements that fit at their floors, with a marker for the rest
            # An element kept gets at least an eighth of the budget: a few elements shown, not many stubs.
            floors = [max(f, min(self.size(v), budget // ELEMENT_SHARE)) for f, v in zip(floors, value, strict=True)]
            total = 1 + sum(f + 1 for f in floors)
            while kept > 0 and total + (_size_of_scalar(marker) + 1 if marker else 0) > budget:
                kept -= 1
                total -= floors[kept] + 1
                marker = self._elements_marker(path, kept, len(value) - kept)
        reserved = _size_of_scalar(marker) + 1 if marker else 0
        shares = self._water(value, range(kept), floors[:kept], budget - 1 - kept - reserved)
        out = self._spend(value, range(kept), modes, shares, path)
        if marker:
            out.append(marker)
        return out

    def _spend(self, value: Any, keys: Sequence[Key], modes: Sequence[Mode], shares: Sequence[int],
               path: Path) -> list[Any]:
        """The children shrunk to their shares; what a cut child leaves unused of its share goes to the next cut
        children (a struct cut to a few fields rarely fills its share exactly)."""
        out: list[Any] = []
        spare = 0
        for i, (key, share) in enumerate(zip(keys, shares, strict=True)):
            child = value[key]
            size = self.size(child)
            if size <= share:
                out.append(child)
                continue
            cut = self.shrink(child, share + spare, (*path, key), modes[i])
            spare += share - self.size(cut)
            out.append(cut)
        return out

    def _water(self, value: Any, keys: Sequence[Key], floors: Sequence[int], available: int) -> list[int]:
        """Each child's budget: the highest level L with sum(min(size, max(floor, L))) <= available, so children
        under L stay whole and the biggest are cut to L (never below their floor)."""
        sizes = [self.size(value[k]) for k in keys]
        if sum(sizes) <= available:
            return sizes
        low, high = 0, max(sizes, default=0)
        while low < high:
            middle = (low + high + 1) // 2
            if sum(min(s, max(f, middle)) for s, f in zip(sizes, floors, strict=True)) <= available:
                low = middle
            else:
                high = middle - 1
        return [min(s, max(f, low)) for s, f in zip(sizes, floors, strict=True)]

    def _marker_entry(self, path: Path, first: str, count: int) -> int:
        return _MARKER_KEY_SIZE - 1 + _size_of_scalar(self._fields_marker(path, first, count))

    def _suggestion(self, path: Path) -> str | None:
        name = self.marks.name(path)
        return name if name is not None and len(name) <= MAX_SUGGESTION else None

    def _fields_marker(self, path: Path, first: Key, count: int) -> str:
        text = f"… {count} more field{'s' if count != 1 else ''}"
        suggestion = self._suggestion((*path, first))
        advice = self.marks.advice
        if suggestion and advice:
            return f"{text} (debug_read with a field path, e.g. {suggestion}, or {advice})"
        if suggestion:
            return f"{text} (debug_read with a field path, e.g. {suggestion})"
        if advice:
            return f"{text} ({advice} shows more of them)"
        return text

    def _elements_marker(self, path: Path, first: int, count: int) -> str:
        text = f"… {count} more element{'s' if count != 1 else ''}"
        suggestion = self._suggestion((*path, first))
        return f"{text} (debug_read e.g. {suggestion})" if suggestion else text


def quoted(expression: str | None) -> str | None:
    """A debug_read target as a marker shows it: 'big->peer->count'."""
    return None if expression is None else f"'{expression}'"


def arrows(evidence: Mapping[str, bool], default: str) -> Callable[[str], str]:
    """How the step after a field is written: '->' after a pointer, '.' after a struct, `default` when the value
    does not tell."""

    def after(name: str) -> str:
        seen = evidence.get(name)
        return default if seen is None else ("->" if seen else ".")

    return after
