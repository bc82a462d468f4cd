"""plan_hooks: which functions a set of patterns hooks, and the warnings an agent needs.

Functions are selected through each module's index (names column, files once each); the results must be
those of testing every relocated function with Pattern.matches, the path plan_hooks took before."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from strobe.daemon import tracing
from strobe.daemon.ingest import SlotTable
from strobe.daemon.runtimes.cpython import PythonScripts
from strobe.daemon.symbols import FunctionSource, ModuleSymbols, SessionSymbols, TraceableFunction
from strobe.daemon.tracing import merge_patterns, plan_hooks, stability_status
from strobe.errors import InvalidPattern
from strobe.symbols.cache import FunctionTable
from strobe.symbols.elf import ElfInfo
from strobe.symbols.index import FunctionIndex, FunctionInfo
from strobe.symbols.patterns import Pattern
from strobe.symbols.python_index import PythonIndex, index_source


def info(name: str, address: int, *, file: str | None = "/proj/a.c", inlined: bool = False) -> FunctionInfo:
    return FunctionInfo(
        name=name, raw=f"_raw_{name}", signature=name, address=0 if inlined else address, size=16, file=file,
        line=1, inlined_only=inlined, params=1,
    )


def module(path: str, slide: int, infos: Sequence[FunctionInfo]) -> ModuleSymbols:
    """A module whose index holds only columns, as a cached index does (no FunctionInfo built yet)."""
    rows = [(f.name, f.raw, f.signature, f.address, f.size, f.file, f.line, f.inlined_only, f.params) for f in infos]
    index = FunctionIndex(ElfInfo(path, None, 0, True, True), FunctionTable.from_rows(rows))
    return ModuleSymbols(path, index, slide)


APP = module("/proj/app", 0x5555_0000, [
    info("auth::validate", 0x10),
    info("auth::user::validate", 0x20),
    info("form::validate", 0x30),
    info("form::helper", 0x40, inlined=True),
    info("main", 0x50),
    info("libc_thing", 0x60, file=None),
])
LIB = module("/proj/lib/libform.so", 0x7F12_3400_0000, [
    info("form::validate", 0x10, file="/proj/lib/form.c"),  # same name and static address as in APP
    info("form::inline_check", 0x20, file="/proj/lib/form.c", inlined=True),
    info("lib::deep::validate", 0x30, file="/proj/lib/deep.c"),
    info("lib::init", 0x40, file="/usr/src/vendor/init.c"),
    info("validate", 0x50, file=None),
    info("lib::deep::validate", 0x60, file="/proj/lib/deep.c"),  # an overload: same name, other address
])
MODULES = [APP]


@dataclass
class Scanned:
    """The per-function path: every function built and relocated, each tested with Pattern.matches."""

    functions: Sequence[TraceableFunction]
    built: list[int] = field(default_factory=list)
    dialect = "native"

    def positions(self, pattern: Pattern) -> list[int]:
        return [i for i, function in enumerate(self.functions) if pattern.matches(function)]

    def functions_at(self, positions: Sequence[int]) -> list[TraceableFunction]:
        self.built.append(len(positions))
        return [self.functions[i] for i in positions]


def names(plan: tracing.HookPlan) -> set[str]:
    return {f.name for f in plan.desired.values()}


def test_union_of_patterns_without_duplicates() -> None:
    plan = plan_hooks([], ["*::validate", "auth::**"], [], MODULES, "/proj")
    assert names(plan) == {"auth::validate", "auth::user::validate", "form::validate"}
    assert plan.patterns == ["*::validate", "auth::**"] and plan.matched == 3 and plan.warnings == []


def test_remove_keeps_functions_still_selected_by_another_pattern() -> None:
    plan = plan_hooks(["*::validate", "auth::**"], [], ["auth::**"], MODULES, "/proj")
    assert names(plan) == {"auth::validate", "form::validate"}
    assert plan.patterns == ["*::validate"]


def test_inlined_functions_are_matched_but_not_hooked() -> None:
    plan = plan_hooks([], ["form::*"], [], MODULES, "/proj")
    assert names(plan) == {"form::validate"} and plan.matched == 2
    assert any("inlined" in w and "form::helper" in w for w in plan.warnings)


def test_no_match_and_unknown_removal_warn() -> None:
    plan = plan_hooks(["main"], ["nothing_here"], ["not_active"], MODULES, "/proj")
    assert any("'nothing_here' matched no function" in w for w in plan.warnings)
    assert any("'not_active' was not active" in w for w in plan.warnings)
    assert names(plan) == {"main"}


def test_a_session_knows_which_patterns_matched_in_no_process() -> None:
    """Each process's plan is noted: a pattern selecting functions in one process (the library) is not reported,
    one that selected nothing anywhere is, with the advice of the plan read in the most dialects."""
    trace = tracing.SessionTrace(SlotTable())
    trace.patterns = ["lib::init", "nothing_here"]
    trace.note(plan_hooks([], trace.patterns, [], [APP], "/proj"))  # the first process: neither matches...
    assert [w.split(".")[0] for w in trace.never_matched()] == [
        "Pattern 'lib::init' matched no function in any process",
        "Pattern 'nothing_here' matched no function in any process"]
    trace.note(plan_hooks([], trace.patterns, [], [LIB], "/proj"))  # ...a second process has lib::init
    assert len(trace.never_matched()) == 1 and "'nothing_here'" in trace.never_matched()[0]
    trace.note(plan_hooks([], trace.patterns, [], [APP, SCRIPTS], "/proj"))
    assert "Python functions are named by module path" in trace.never_matched()[0]  # the richer advice wins
    trace.note(plan_hooks([], trace.patterns, [], [APP], "/proj"))
    assert "Python functions are named by module path" in trace.never_matched()[0]
    trace.patterns = ["lib::init"]  # removed patterns are not reported
    assert trace.never_matched() == []


def test_usercode_excludes_functions_without_a_project_file() -> None:
    plan = plan_hooks([], ["@usercode"], [], MODULES, "/proj")
    assert "libc_thing" not in names(plan) and "main" in names(plan)


def test_one_invalid_pattern_rejects_the_whole_change() -> None:
    with pytest.raises(InvalidPattern):
        plan_hooks(["main"], ["form::*", "@bogus"], [], MODULES, "/proj")


def test_too_many_matches_refuses_that_pattern_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "MAX_HOOKS", 2)
    plan = plan_hooks([], ["**", "main"], [], MODULES, "/proj")
    assert plan.patterns == ["main"] and names(plan) == {"main"}
    assert any("'**' matches 6 functions" in w and "not added" in w for w in plan.warnings)


def test_the_total_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "MAX_HOOKS", 2)
    plan = plan_hooks([], ["auth::**", "form::validate"], [], MODULES, "/proj")
    assert len(plan.desired) == 2 and any("only the first 2" in w for w in plan.warnings)


def test_merge_patterns_keeps_order_and_ignores_duplicates() -> None:
    merged, warnings = merge_patterns(["a", "b"], ["c", "a", "c"], ["b"])
    assert merged == ["a", "c"] and warnings == []


def test_status_guides_the_agent() -> None:
    assert "No functions are hooked" in stability_status(0, 0, [])
    assert "excellent" in stability_status(3, 3, [])
    assert "could not be hooked" in stability_status(3, 5, [])
    assert "sampled" in stability_status(3, 3, ["hot_add"]) and "hot_add" in stability_status(3, 3, ["hot_add"])


# --- the index path gives what the per-function path gave -------------------------------------------


def scanned(modules: Sequence[ModuleSymbols]) -> Scanned:
    """The old flat list, built independently of SessionSymbols and of the index's own (cached) list:
    every FunctionInfo from the table's rows, relocated by hand."""
    return Scanned([
        TraceableFunction(FunctionInfo(*row), m.path, row[3] + m.slide if row[3] else 0)
        for m in modules for row in m.index.table.rows()
    ])


def fresh(modules: Sequence[ModuleSymbols]) -> list[ModuleSymbols]:
    """Copies with nothing built, so each test sees a cold index."""
    return [ModuleSymbols(m.path, FunctionIndex(m.index.elf, m.index.table), m.slide) for m in modules]


def same_plan(
    current: list[str], add: list[str], remove: list[str], modules: Sequence[ModuleSymbols], root: str | None
) -> tracing.HookPlan:
    by_index = plan_hooks(current, add, remove, modules, root)
    by_scan = plan_hooks(current, add, remove, [scanned(modules)], root)
    assert by_index.patterns == by_scan.patterns
    assert list(by_index.desired.items()) == list(by_scan.desired.items())  # same functions, same order
    assert by_index.matched == by_scan.matched
    assert by_index.warnings == by_scan.warnings
    return by_index


@pytest.mark.parametrize(
    ("current", "add", "remove"),
    [
        ([], ["*::validate", "auth::**"], []),
        ([], ["**"], []),
        ([], ["**::validate"], []),
        ([], ["form::validate"], []),
        ([], ["lib::**::validate", "lib::*"], []),
        ([], ["@usercode"], []),
        ([], ["@file:form.c", "@file:/proj/a.c"], []),
        ([], ["form::*"], []),  # inlined in both modules
        ([], ["@file:lib/form"], []),  # only an inlined function and one hookable
        (["main"], ["nothing_here", "@file:nowhere.c"], ["not_active"]),
        (["*::validate", "@usercode"], ["lib::init"], ["@usercode"]),
    ],
)
def test_index_path_equals_per_function_path(current: list[str], add: list[str], remove: list[str]) -> None:
    modules = fresh([APP, LIB])
    plan = same_plan(current, add, remove, modules, "/proj")
    for m in modules:
        assert "functions" not in m.index.__dict__  # only the hits were built
    slide = {m.path: m.slide for m in modules}
    assert all(f.runtime_address == f.info.address + slide[f.module] for f in plan.desired.values())


def test_the_same_function_in_two_modules_is_hooked_in_each() -> None:
    plan = same_plan([], ["form::validate"], [], [APP, LIB], None)
    assert sorted((f.module, hex(f.runtime_address)) for f in plan.desired.values()) == [
        ("/proj/app", hex(0x5555_0030)), ("/proj/lib/libform.so", hex(0x7F12_3400_0010)),
    ]


def test_usercode_per_module() -> None:
    plan = same_plan([], ["@usercode"], [], [APP, LIB], "/proj")
    assert names(plan) == {"auth::validate", "auth::user::validate", "form::validate", "main", "lib::deep::validate"}
    assert plan.matched == 9  # the two inlined ones count as matched, not hooked
    assert any("2 function(s) matched by '@usercode' were inlined" in w for w in plan.warnings)


def test_refusal_counts_across_modules_and_builds_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "MAX_HOOKS", 4)
    modules = fresh([APP, LIB])
    plan = same_plan([], ["*::validate", "main"], [], modules, "/proj")  # 2 in APP + 1 in LIB: allowed
    assert plan.patterns == ["*::validate", "main"]
    plan = same_plan([], ["**::validate", "main"], [], modules, "/proj")  # 3 + 4: refused
    assert plan.patterns == ["main"] and any("'**::validate' matches 7 functions" in w for w in plan.warnings)

    class Counting:
        dialect = "native"

        def __init__(self, inner: FunctionSource) -> None:
            self.inner, self.built = inner, 0

        def positions(self, pattern: Pattern) -> Sequence[int]:
            return self.inner.positions(pattern)

        def functions_at(self, positions: Sequence[int]) -> list[TraceableFunction]:
            self.built += len(positions)
            return self.inner.functions_at(positions)

    counting = [Counting(m) for m in modules]
    plan_hooks([], ["**", "@usercode"], [], counting, "/proj")
    assert [c.built for c in counting] == [0, 0]


def test_the_total_cap_keeps_the_same_first_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "MAX_HOOKS", 3)
    plan = same_plan([], ["form::validate", "*::validate", "lib::**"], [], [APP, LIB], "/proj")
    assert len(plan.desired) == 3 and any("only the first 3" in w for w in plan.warnings)


def test_session_symbols_flat_list_is_lazy_and_relocated() -> None:
    modules = fresh([APP, LIB])
    symbols = SessionSymbols("/proj/app", True, tuple(modules))
    assert symbols.modules == ("/proj/app", "/proj/lib/libform.so")
    assert all("functions" not in m.index.__dict__ for m in modules)
    assert list(symbols.functions) == list(scanned(modules).functions)


# ---- Python sources next to native modules ---------------------------------------------------------

CART = """
class Cart:
    def total(self):
        return 0

def checkout(owner):
    return Cart()
"""
SCRIPTS = PythonScripts(PythonIndex(tuple(index_source(CART, "/proj/shop/cart.py", "shop.cart"))))


def test_python_patterns_select_from_the_scripts_and_native_ones_from_the_modules() -> None:
    plan = plan_hooks([], ["shop.cart.*", "shop.cart.Cart.total", "auth::validate"], [], [APP, SCRIPTS], "/proj")
    assert plan.warnings == []
    assert sorted((f.name, f.runtime) for f in plan.desired.values()) == [
        ("auth::validate", "native"), ("shop.cart.Cart.total", "cpython"), ("shop.cart.checkout", "cpython")]
    total = next(f for f in plan.desired.values() if f.name == "shop.cart.Cart.total")
    assert total.key == ("/proj/shop/cart.py", 3, "Cart.total") and total.info.raw == "Cart.total"
    # @file and @usercode read both ways: the project's C and Python files alike
    by_file = plan_hooks([], ["@usercode"], [], [APP, SCRIPTS], "/proj")
    assert {"shop.cart.checkout", "auth::validate"} <= {f.name for f in by_file.desired.values()}


def test_a_pattern_invalid_in_every_dialect_present_is_refused() -> None:
    with pytest.raises(InvalidPattern, match=r"separated by '\.', not '::'"):
        plan_hooks([], ["shop::cart"], [], [SCRIPTS], "/proj")
    plan = plan_hooks([], ["shop::cart"], [], [APP, SCRIPTS], "/proj")  # valid as a native name: no match
    assert plan.warnings and "matched no function" in plan.warnings[0]


def test_no_match_advice_fits_what_the_process_runs() -> None:
    (python_only,) = plan_hooks([], ["shop.nothing"], [], [SCRIPTS], "/proj").warnings
    assert "Python functions are named by module path" in python_only and "C++" not in python_only
    (both,) = plan_hooks([], ["nothing_here"], [], [APP, SCRIPTS], "/proj").warnings
    assert "Python functions" in both and "C++ 'ns::Class::method'" in both and "C extension" in both
    (native,) = plan_hooks([], ["shop.cart.checkout"], [], [APP], "/proj").warnings
    assert "reads like a Python name, but this process runs native code" in native
    (plain,) = plan_hooks([], ["nothing_here"], [], [APP], "/proj").warnings
    assert "Python" not in plain and "'**::name'" in plain
