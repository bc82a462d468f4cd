"""Watches: variables read at each traced call and attached to its events as `watchValues`.

A watch reads a global/static variable or pointer chain (resolved like debug_read), a raw address with
a type, or a JavaScript expression evaluated in the agent. `on` scopes it to the traced functions whose
names match its patterns; without `on` it applies to every traced function. Planning is pure: the
current watches and a change in, the new watches and warnings out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from strobe.daemon.memory import PreparedRead
from strobe.errors import InvalidPattern, ValidationError, WatchFailed
from strobe.symbols.patterns import Pattern, parse_pattern, parse_python_pattern

MAX_WATCHES = 32
NATIVE_WATCHES = 4  # read by the CModule itself; the others by a JavaScript callback


@dataclass(frozen=True)
class WatchSpec:
    """A watch as requested (see mcp.models.WatchTarget)."""

    variable: str | None = None
    address: str | None = None
    type: str | None = None
    label: str | None = None
    expr: str | None = None
    on: tuple[str, ...] | None = None

    @property
    def default_label(self) -> str:
        return self.label or self.variable or self.address or self.expr or "?"


@dataclass(frozen=True)
class Watch:
    label: str
    spec: WatchSpec
    read: PreparedRead | None  # variable / address watches: what to read and how to show it
    scope: tuple[Pattern, ...] | None  # None: every traced function

    @property
    def expr(self) -> str | None:
        return self.spec.expr

    def applies_to(self, name: str, file: str | None) -> bool:
        if self.scope is None:
            return True
        function = _Named(name, file)
        return any(p.matches(function) for p in self.scope)


@dataclass(frozen=True)
class _Named:
    name: str
    file: str | None


def _scope(text: str, project_root: str | None) -> Pattern:
    """An `on` pattern: a dotted name is a Python one ('*' stops at '.'), anything else native ('*' stops at
    '::'), like the trace patterns it is meant to match."""
    if "." in text and "::" not in text and not text.startswith("@"):
        try:
            return parse_python_pattern(text, project_root)
        except InvalidPattern:
            pass
    return parse_pattern(text, project_root)


def plan_watches(
    current: Sequence[Watch],
    add: Sequence[WatchSpec],
    remove: Sequence[str],
    resolved: Mapping[str, PreparedRead],
    project_root: str | None,
) -> tuple[list[Watch], list[str]]:
    """The watches after removing labels and adding specs; `resolved` maps each added spec's label to its
    read (variables resolved from DWARF, raw addresses). Raises before changing anything when the result
    would be invalid (too many, a duplicate label, an unresolvable variable, a bad `on` pattern)."""
    warnings = [f"Watch '{label}' was not active; nothing to remove." for label in remove
                if label not in {w.label for w in current}]
    kept = [w for w in current if w.label not in set(remove)]
    labels = {w.label for w in kept}
    added: list[Watch] = []
    for spec in add:
        label = spec.default_label
        if label in labels:
            raise ValidationError(
                f"A watch labelled '{label}' already exists; give this one another label, or remove that one "
                "first (watches: {remove: ['" + label + "']})."
            )
        labels.add(label)
        scope = tuple(_scope(p, project_root) for p in spec.on) if spec.on is not None else None
        read = None
        if spec.expr is None:
            read = resolved.get(label)
            if read is None or read.error is not None:
                reason = read.error if read is not None else "it could not be resolved"
                raise WatchFailed(f"Watch '{label}' cannot be read: {reason}.")
            if read.is_bytes:
                raise WatchFailed(f"Watch '{label}' is a raw buffer; watches read scalars and structs.")
        added.append(Watch(label, spec, read, scope))
    watches = kept + added
    if len(watches) > MAX_WATCHES:
        raise ValidationError(
            f"A session can have at most {MAX_WATCHES} watches; this change would make {len(watches)}. Remove some "
            "(watches: {remove: [labels]}) or read values once with debug_read."
        )
    return watches, warnings


def scoped_slots(watch: Watch, hooked: Iterable[tuple[int, str, str | None]]) -> list[int] | None:
    """The hooked function slots a watch applies to ((slot, name, file) triples); None: all of them."""
    if watch.scope is None:
        return None
    return [slot for slot, name, file in hooked if watch.applies_to(name, file)]


def scope_warnings(watches: Sequence[Watch], hooked: Sequence[tuple[int, str, str | None]]) -> list[str]:
    """Watches that no traced function will ever show."""
    warnings = []
    for watch in watches:
        if watch.scope is not None and not scoped_slots(watch, hooked):
            warnings.append(
                f"Watch '{watch.label}' is scoped to {list(watch.spec.on or ())}, which match no traced function "
                "yet: its values appear once such a function is traced (add a pattern with debug_trace)."
            )
    return warnings


@dataclass(frozen=True)
class Assignment:
    """Which watch the agent reads how: `native` (slot 0-3, read by the CModule in the hook itself) or
    `js` (id 4+, read by a JavaScript callback: pointer chains, structs, expressions)."""

    native: tuple[tuple[int, Watch], ...]
    js: tuple[tuple[int, Watch], ...]

    def by_id(self) -> dict[int, Watch]:
        return dict(self.native + self.js)


def assign(watches: Sequence[Watch]) -> Assignment:
    native: list[tuple[int, Watch]] = []
    js: list[tuple[int, Watch]] = []
    for watch in watches:
        if watch.read is not None and watch.read.direct and len(native) < NATIVE_WATCHES:
            native.append((len(native), watch))
        else:
            js.append((NATIVE_WATCHES + len(js), watch))
    return Assignment(tuple(native), tuple(js))


def agent_watches(
    assignment: Assignment, hooked: Sequence[tuple[int, str, str | None]], version: int
) -> dict[str, object]:
    """The `watches` message body for the agent (see agent/src/common/requests.ts WatchesRequest); `version` is
    stamped on the batches recorded under these watches (ingest.WatchVersions)."""
    native = []
    for slot, watch in assignment.native:
        assert watch.read is not None and watch.read.recipe is not None
        native.append({"slot": slot, "address": watch.read.recipe["address"], "size": watch.read.size,
                       "funcs": scoped_slots(watch, hooked)})
    js: list[dict[str, object]] = []
    for wid, watch in assignment.js:
        entry: dict[str, object] = {"id": wid, "label": watch.label, "funcs": scoped_slots(watch, hooked)}
        if watch.read is not None and watch.read.python is not None:  # read by a Python tracer (runtimes/cpython)
            entry["python"] = watch.read.python
        elif watch.read is not None:
            entry["recipe"] = watch.read.recipe
        else:
            entry["expr"] = watch.expr
        js.append(entry)
    return {"version": version, "native": native, "js": js}


class WatchDecoder:
    """Turns what the agent captured for one call into `watchValues` ({label: value}): native slots as
    raw 64-bit words (the low `size` bytes are the value), JS watches as {h: hex bytes, s: C strings},
    {v: an expression's value} or {e: why nothing was read}."""

    def __init__(self, assignment: Assignment, hooked: Sequence[tuple[int, str, str | None]] = ()) -> None:
        self._native = {slot: w for slot, w in assignment.native}
        self._js = {str(wid): w for wid, w in assignment.js}
        self._python = {wid: (w.label, scoped_slots(w, hooked)) for wid, w in assignment.js
                        if w.read is not None and w.read.python is not None}

    def python(self, wid: int, slot: int, value: Any) -> tuple[str, Any] | None:
        """A Python watch's (label, value) as read at a call of function `slot`; None when that function is
        outside the watch's scope (the tracer reads every watch at every traced call)."""
        found = self._python.get(wid)
        if found is None or (found[1] is not None and slot not in found[1]):
            return None
        if isinstance(value, dict) and set(value) == {"__error__"}:
            return found[0], {"error": value["__error__"]}
        return found[0], value

    def native(self, mask: int, words: Sequence[int]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for slot, watch in self._native.items():
            if mask & (1 << slot) and watch.read is not None and watch.read.plain is not None:
                raw = (words[slot] & 0xFFFF_FFFF_FFFF_FFFF).to_bytes(8, "little")[: watch.read.size]
                out[watch.label] = watch.read.plain(raw, {})
        return out

    def js(self, values: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for wid, captured in values.items():
            watch = self._js.get(wid)
            if watch is None:
                continue
            if "e" in captured:
                out[watch.label] = {"error": captured["e"]}
            elif "v" in captured:
                out[watch.label] = captured["v"]
            elif watch.read is not None and watch.read.plain is not None:
                try:
                    out[watch.label] = watch.read.plain(bytes.fromhex(str(captured.get("h", ""))),
                                                        dict(captured.get("s") or {}))
                except ValueError as exc:
                    out[watch.label] = {"error": f"undecodable: {exc}"}
        return out
