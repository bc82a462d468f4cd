"""Which functions a session's patterns select, and the hook changes that make the process match.

Planning is pure (patterns + symbols in, desired hooks and warnings out); daemon/hooking.py applies a
plan through the agent. Function slots (the agent's function ids) are never reused within a session,
so an event decoded late can never be attributed to a different function.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from strobe.daemon.ingest import SlotTable
from strobe.daemon.symbols import FunctionSource, TraceableFunction
from strobe.errors import InvalidPattern
from strobe.symbols.patterns import Pattern, parse_js_pattern, parse_pattern, parse_python_pattern

MAX_HOOKS = 10_000
MAX_SLOTS = 1 << 16  # agent/src/native/layout.ts MAX_FUNCTIONS
_LISTED = 5


@dataclass
class HookPlan:
    patterns: list[str]
    desired: dict[tuple[str, int, str], TraceableFunction]
    matched: int
    warnings: list[str]
    unmatched: list[str] = field(default_factory=list)  # the patterns that selected nothing (each warned of)
    dialects: list[str] = field(default_factory=list)  # the pattern dialects of the sources it selected from


_PARSERS: dict[str, Callable[[str, str | None], Pattern]] = {
    "native": parse_pattern, "python": parse_python_pattern, "javascript": parse_js_pattern}


def parse_for(text: str, dialect: str, project_root: str | None) -> Pattern:
    """One pattern read as `dialect` names ("native", "python" or "javascript"); raises InvalidPattern."""
    return _PARSERS[dialect](text, project_root)


def parse_patterns(texts: Sequence[str], project_root: str | None) -> None:
    """Check patterns before their program is known: each must be valid as native, Python or JavaScript names.
    Raises the InvalidPattern of the dialect it reads as first (Python for dotted names, native otherwise)."""
    for text in texts:
        dialects = (("python", "javascript", "native") if "." in text and "::" not in text
                    else ("native", "python", "javascript"))
        errors: list[InvalidPattern] = []
        for dialect in dialects:
            try:
                parse_for(text, dialect, project_root)
                break
            except InvalidPattern as exc:
                errors.append(exc)
        else:
            raise errors[0]


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


def _no_match(text: str, dialects: Sequence[str], where: str = "") -> str:
    """What to try when a pattern selects nothing (`where`: " in any process", ...), for the kinds of code the
    process runs."""
    python = ("Python functions are named by module path ('pkg.mod.func', 'pkg.mod.Class.method', "
              "'pkg.mod.outer.inner'; '**.name' at any depth); '@file:app.py' and '@usercode' select by file "
              "(the project's files are indexed, not the virtualenv's or installed packages')")
    native = ("Native names are fully qualified (C++ 'ns::Class::method', Rust 'crate::module::fn'); try "
              "'**::name' or '@file:<source file>'")
    if "javascript" in dialects:
        javascript = ("JavaScript functions are named 'func', 'Class.method' or 'module.func' (module: the file's "
                      "name without extension; '**.name' at any depth); '@file:src/auth.js' and '@usercode' select "
                      "by file (the project's files are indexed, not node_modules); an installed package's "
                      "functions are named after the package: 'semver.compare', 'ms.*' (its name in node_modules)")
        return f"Pattern '{text}' matched no function{where}. {javascript}. {native} (Node's own C++ or an addon's)."
    if dialects == ["python"] or ("::" not in text and "python" in dialects and "." in text):
        advice = python
    elif "python" in dialects:
        advice = f"{python}. {native} (a C extension's functions, when it has debug info)"
    elif "." in text and "::" not in text and not text.startswith("@"):
        advice = (f"{native}. '{text}' reads like a Python name, but this process runs native code: Python "
                  "patterns apply to programs run by CPython")
    else:
        advice = native
    return f"Pattern '{text}' matched no function{where}. {advice}."


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

    Each pattern is read in each source's dialect and matched by the sources it is valid for (a native module's
    index, a Python source tree); only the functions it selects are built, and none for a pattern refused for
    selecting more than MAX_HOOKS."""
    patterns, warnings = merge_patterns(current, add, remove)
    dialects = sorted({module.dialect for module in modules}) or ["native"]
    parsed: dict[tuple[str, str], Pattern | None] = {}
    for text in patterns:
        errors: list[InvalidPattern] = []
        for dialect in dialects:
            try:
                parsed[text, dialect] = parse_for(text, dialect, project_root)
            except InvalidPattern as exc:
                parsed[text, dialect] = None
                errors.append(exc)
        if len(errors) == len(dialects) and text in add:
            raise errors[0]
    desired: dict[tuple[str, int, str], TraceableFunction] = {}
    matched: set[tuple[str, int, str]] = set()
    kept: list[str] = []
    unmatched: list[str] = []
    for text in patterns:
        found = []
        for module in modules:
            pattern = parsed[text, module.dialect]
            if pattern is not None:
                found.append((module, module.positions(pattern)))
        count = sum(len(positions) for _, positions in found)
        if count > MAX_HOOKS:
            warnings.append(
                f"Pattern '{text}' matches {count:,} functions, more than the {MAX_HOOKS:,} Strobe hooks at "
                "once; it was not added. Narrow it (e.g. 'myapp::parser::*' instead of '**', or '@file:parser.c')."
            )
            continue
        kept.append(text)
        if not count:
            unmatched.append(text)
            warnings.append(_no_match(text, dialects))
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
    return HookPlan(kept, desired, len(matched), warnings, unmatched, dialects)


def tracer_warnings(notes: Sequence[str]) -> list[str]:
    """A session's in-process tracer notes (SlotTable.notes) as warnings for the agent."""
    return [f"Tracer: {note}" for note in notes]


@dataclass
class SessionTrace:
    """A session's trace state, shared by all its processes: the active patterns and the function slots
    (the agent's function ids) given out so far. Which slots each process has hooked is its own
    (daemon/process.py)."""

    table: SlotTable
    patterns: list[str] = field(default_factory=list)
    slot_of: dict[tuple[str, int, str], int] = field(default_factory=dict)
    sampling: dict[int, bool] = field(default_factory=dict)  # the launched process's sampled slots
    matched_somewhere: set[str] = field(default_factory=set)  # patterns that selected functions in some process
    no_match: dict[str, list[str]] = field(default_factory=dict)  # pattern -> the most dialects it was read in

    def note(self, plan: HookPlan) -> None:
        """What a process's plan selected, for never_matched: the advice kept is that of the plan read in the
        most dialects (a Node process's JavaScript and native names, not the shell that started it)."""
        self.matched_somewhere.update(p for p in plan.patterns if p not in plan.unmatched)
        for pattern in plan.unmatched:
            if len(plan.dialects) >= len(self.no_match.get(pattern, ())):
                self.no_match[pattern] = plan.dialects

    def tracer_notes(self) -> list[str]:
        """What the in-process tracers reported about this session's trace (a file running untraced, and why)."""
        return tracer_warnings(self.table.notes)

    def never_matched(self) -> list[str]:
        """A warning for each active pattern that selected no function in any process of the session so far:
        the only word of it in a traced test run, whose processes come and go without a debug_trace answer."""
        return [_no_match(p, self.no_match[p], " in any process")
                for p in self.patterns if p not in self.matched_somewhere and p in self.no_match]

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
            "No functions are hooked. Check the warnings: the names may need qualifying ('ns::func', '**::func'; "
            "Python 'pkg.mod.func', '**.func'), "
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
