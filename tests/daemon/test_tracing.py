"""plan_hooks: which functions a set of patterns hooks, and the warnings an agent needs."""

from __future__ import annotations

import pytest

from strobe.daemon import tracing
from strobe.daemon.symbols import TraceableFunction
from strobe.daemon.tracing import merge_patterns, plan_hooks, stability_status
from strobe.errors import InvalidPattern
from strobe.symbols.index import FunctionInfo


def fn(name: str, address: int, *, file: str | None = "/proj/a.c", inlined: bool = False) -> TraceableFunction:
    info = FunctionInfo(
        name=name, raw=name, signature=name, address=0 if inlined else address, size=16, file=file, line=1,
        inlined_only=inlined, params=1,
    )
    return TraceableFunction(info, "/proj/app", 0 if inlined else 0x5555_0000 + address)


FUNCTIONS = [
    fn("auth::validate", 0x10),
    fn("auth::user::validate", 0x20),
    fn("form::validate", 0x30),
    fn("form::helper", 0x40, inlined=True),
    fn("main", 0x50),
    fn("libc_thing", 0x60, file=None),
]


def names(plan: tracing.HookPlan) -> set[str]:
    return {f.name for f in plan.desired.values()}


def test_union_of_patterns_without_duplicates() -> None:
    plan = plan_hooks([], ["*::validate", "auth::**"], [], FUNCTIONS, "/proj")
    assert names(plan) == {"auth::validate", "auth::user::validate", "form::validate"}
    assert plan.patterns == ["*::validate", "auth::**"] and plan.matched == 3 and plan.warnings == []


def test_remove_keeps_functions_still_selected_by_another_pattern() -> None:
    plan = plan_hooks(["*::validate", "auth::**"], [], ["auth::**"], FUNCTIONS, "/proj")
    assert names(plan) == {"auth::validate", "form::validate"}
    assert plan.patterns == ["*::validate"]


def test_inlined_functions_are_matched_but_not_hooked() -> None:
    plan = plan_hooks([], ["form::*"], [], FUNCTIONS, "/proj")
    assert names(plan) == {"form::validate"} and plan.matched == 2
    assert any("inlined" in w and "form::helper" in w for w in plan.warnings)


def test_no_match_and_unknown_removal_warn() -> None:
    plan = plan_hooks(["main"], ["nothing_here"], ["not_active"], FUNCTIONS, "/proj")
    assert any("'nothing_here' matched no function" in w for w in plan.warnings)
    assert any("'not_active' was not active" in w for w in plan.warnings)
    assert names(plan) == {"main"}


def test_usercode_excludes_functions_without_a_project_file() -> None:
    plan = plan_hooks([], ["@usercode"], [], FUNCTIONS, "/proj")
    assert "libc_thing" not in names(plan) and "main" in names(plan)


def test_one_invalid_pattern_rejects_the_whole_change() -> None:
    with pytest.raises(InvalidPattern):
        plan_hooks(["main"], ["form::*", "@bogus"], [], FUNCTIONS, "/proj")


def test_too_many_matches_refuses_that_pattern_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "MAX_HOOKS", 2)
    plan = plan_hooks([], ["**", "main"], [], FUNCTIONS, "/proj")
    assert plan.patterns == ["main"] and names(plan) == {"main"}
    assert any("'**' matches 6 functions" in w and "not added" in w for w in plan.warnings)


def test_the_total_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "MAX_HOOKS", 2)
    plan = plan_hooks([], ["auth::**", "form::validate"], [], FUNCTIONS, "/proj")
    assert len(plan.desired) == 2 and any("only the first 2" in w for w in plan.warnings)


def test_merge_patterns_keeps_order_and_ignores_duplicates() -> None:
    merged, warnings = merge_patterns(["a", "b"], ["c", "a", "c"], ["b"])
    assert merged == ["a", "c"] and warnings == []


def test_status_guides_the_agent() -> None:
    assert "No functions are hooked" in stability_status(0, 0, [])
    assert "excellent" in stability_status(3, 3, [])
    assert "could not be hooked" in stability_status(3, 5, [])
    assert "sampled" in stability_status(3, 3, ["hot_add"]) and "hot_add" in stability_status(3, 3, ["hot_add"])
