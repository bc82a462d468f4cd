"""Which functions a session's patterns select, and the hook changes that make the process match.

Planning is pure (patterns + symbols in, desired hooks and warnings out); daemon/hooking.py applies a
plan through the agent. Function slots (the agent's function ids) are never reused within a session,
so an event decoded late can never be attributed to a different function.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from strobe.daemon.ingest import SlotTable
from strobe.daemon.symbols import TraceableFunction
from strobe.errors import InvalidPattern
from strobe.symbols.patterns import Pattern, parse_pattern

MAX_HOOKS = 10_000
MAX_SLOTS = 1 << 16  # agent/src/native/layout.ts MAX_FUNCTIONS
_LISTED = 5


@dataclass
class HookPlan:
    patterns: list[str]
    desired: dict[tuple[str, int, str], TraceableFunction]
    matched: int
    warnings: list[str]


def parse_patterns(texts: Sequence[str], project_root: str | None) -> list[Pattern]:
    return [parse_pattern(text, project_root) for text in texts]


def _names(functions: Sequence[TraceableFunction]) -> str:
    shown = ", ".join(sorted({f.name for f in functions})[:_LISTED])
    more = len({f.name for f in functions}) - _LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def merge_patterns(current: Sequence[str], add: Sequence[str], remove: Sequence[str]) -> tuple[list[str], list[str]]:
    warnings = [f"Pattern '{p}' was not active; nothing to remove." for p in remove if p not in current]
    merged = [p for p in current if p not in remove]
    for text in add:
        if text not in merged and text not in remove:
            merged.append(text)
    return merged, warnings


class FunctionSource(Protocol):
    """The functions of one module as plan_hooks asks for them (`strobe.daemon.symbols.ModuleSymbols`)."""

    def positions(self, pattern: Pattern) -> Sequence[int]:
        """Positions of the functions `pattern` selects, in a fixed order."""
        ...

    def functions_at(self, positions: Sequence[int]) -> list[TraceableFunction]:
        """The functions at `positions`, relocated."""
        ...


def _hookable(function: TraceableFunction) -> bool:
    return not function.info.inlined_only and function.runtime_address != 0


def plan_hooks(
    current: Sequence[str],
    add: Sequence[str],
    remove: Sequence[str],
    modules: Sequence[FunctionSource],
    project_root: str | None,
) -> HookPlan:
    """Decide the hooks for the patterns after this change. Raises InvalidPattern before changing anything.

    Each pattern is matched by each module's index; only the functions it selects are built, and none for
    a pattern refused for selecting more than MAX_HOOKS."""
    parsed = {p.text: p for p in parse_patterns(add, project_root)}
    patterns, warnings = merge_patterns(current, add, remove)
    parsed.update({p.text: p for p in parse_patterns([t for t in patterns if t not in parsed], project_root)})
    desired: dict[tuple[str, int, str], TraceableFunction] = {}
    matched: set[tuple[str, int, str]] = set()
    kept: list[str] = []
    for text in patterns:
        found = [(module, module.positions(parsed[text])) for module in modules]
        count = sum(len(positions) for _, positions in found)
        if count > MAX_HOOKS:
            warnings.append(
                f"Pattern '{text}' matches {count:,} functions, more than the {MAX_HOOKS:,} Strobe hooks at "
                "once; it was not added. Narrow it (e.g. 'myapp::parser::*' instead of '**', or '@file:parser.c')."
            )
            continue
        kept.append(text)
        if not count:
            warnings.append(
                f"Pattern '{text}' matched no function. Names are fully qualified (C++ 'ns::Class::method', Rust "
                "'crate::module::fn'); try '**::name' or '@file:<source file>' to find it."
            )
            continue
        hits = [function for module, positions in found if positions for function in module.functions_at(positions)]
        inlined = [f for f in hits if not _hookable(f)]
        if inlined:
            warnings.append(
                f"{len(inlined)} function(s) matched by '{text}' were inlined by the compiler and have no "
                f"entry point to hook: {_names(inlined)}. Trace their callers, or rebuild with -O0."
            )
        for function in hits:
            matched.add(function.key)
            if _hookable(function):
                desired.setdefault(function.key, function)
    if len(desired) > MAX_HOOKS:
        dropped = list(desired)[MAX_HOOKS:]
        for key in dropped:
            del desired[key]
        warnings.append(
            f"The active patterns select more than {MAX_HOOKS:,} functions; only the first {MAX_HOOKS:,} are hooked. "
            "Remove or narrow a pattern."
        )
    return HookPlan(kept, desired, len(matched), warnings)


@dataclass
class SessionTrace:
    """A session's trace state, shared by all its processes: the active patterns and the function slots
    (the agent's function ids) given out so far. Which slots each process has hooked is its own
    (daemon/process.py)."""

    table: SlotTable
    patterns: list[str] = field(default_factory=list)
    slot_of: dict[tuple[str, int, str], int] = field(default_factory=dict)
    sampling: dict[int, bool] = field(default_factory=dict)  # the launched process's sampled slots

    def new_functions(self, desired: Mapping[tuple[str, int, str], TraceableFunction]) -> list[TraceableFunction]:
        """Functions to hook that never had a slot in this session."""
        return [f for key, f in desired.items() if key not in self.slot_of]

    def assign_slots(self, functions: Sequence[TraceableFunction], db_keys: Sequence[int]) -> None:
        for function, db_key in zip(functions, db_keys, strict=True):
            slot = len(self.slot_of)
            if slot >= MAX_SLOTS:
                raise InvalidPattern(
                    f"This session has hooked {MAX_SLOTS:,} distinct functions over its life, the most one session "
                    "can; relaunch to start afresh with narrower patterns."
                )
            self.slot_of[function.key] = slot
            self.table.hook(slot, db_key, function.info.params)

    def changes(
        self, hooked: Mapping[int, TraceableFunction], desired: Mapping[tuple[str, int, str], TraceableFunction]
    ) -> tuple[list[tuple[int, TraceableFunction]], list[int]]:
        """(slot, function) pairs to hook and slots to unhook so that a process with `hooked` matches `desired`."""
        hooked_keys = {f.key for f in hooked.values()}
        to_add = [(self.slot_of[key], f) for key, f in desired.items() if key not in hooked_keys]
        to_remove = [slot for slot, f in hooked.items() if f.key not in desired]
        return to_add, to_remove


def stability_status(hooked: int, matched: int, sampled: list[str]) -> str:
    if hooked == 0:
        return (
            "No functions are hooked. Check the warnings: the names may need qualifying ('ns::func', '**::func'), "
            "the functions may be inlined (built with -O2), or the binary may lack debug info."
        )
    if hooked < 50:
        status = f"{hooked} hooks: under 50, excellent stability and overhead."
    elif hooked < 1000:
        status = f"{hooked} hooks: fine; narrow the patterns if the program slows down."
    else:
        status = f"{hooked} hooks: a lot. Expect overhead; prefer narrower patterns and watch for sampling."
    if matched > hooked:
        status += f" {matched - hooked} matched function(s) could not be hooked (see warnings)."
    if sampled:
        status += (
            f" Hot functions are being sampled (partial data, events marked sampled): {', '.join(sampled[:_LISTED])}."
        )
    return status
