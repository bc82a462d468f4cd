"""Traced JavaScript test runs over MCP: debug_test with tracePatterns on Jest (its module registry reads the
sources and runs them in a vm context) and Vitest (Vite transforms the sources in the vitest process; forks run
them and are ended right after they report), Mocha, `node --test` and `bun test` (no exit event: written after each
test) record the project's functions the tests call; failures suggest patterns that select something; a pattern
selecting nothing in any process of the run is reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import StrobeClient
from tests.e2e.test_debug_test import finished
from tests.testing.adapters.harness import copy_project, link_node_modules

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def traced_run(strobe: StrobeClient, project: Path, patterns: list[str]) -> tuple[dict[str, Any], str]:
    started = await strobe.call("debug_test", projectRoot=str(project), tracePatterns=patterns)
    status = await finished(strobe, started["testRunId"])
    assert status["status"] == "completed", status
    return status["result"], started["sessionId"]


def by_function(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("function") == name]


async def test_a_traced_jest_run(strobe: StrobeClient, tmp_path: Path) -> None:
    project = copy_project("jest_basic", tmp_path)
    link_node_modules(project)
    result, sid = await traced_run(strobe, project, ["calc.*"])
    assert result["summary"]["passed"] >= 1 and result["summary"]["failed"] == 2, result["summary"]
    events = await strobe.all_events(sid, verbose=True)
    adds = by_function(events, "calc.add")
    assert [e["arguments"] for e in adds if e["eventType"] == "function_enter"][:1] == [[2, 3]]
    assert 5 in [e.get("returnValue") for e in adds if e["eventType"] == "function_exit"]
    averages = [e for e in by_function(events, "calc.average") if e["eventType"] == "function_enter"]
    assert averages and averages[0]["arguments"] == [[1, 2, 3]]  # an array made in the test's vm context
    prices = [e for e in by_function(events, "calc.parsePrice") if e["eventType"] == "function_exit"]
    assert any(e.get("exception", {}).get("message") == "not a price: 12,50" for e in prices), prices
    assert all(e["sourceFile"] == str(project / "src" / "calc.js") for e in adds)


async def test_a_traced_vitest_run(strobe: StrobeClient, tmp_path: Path) -> None:
    project = copy_project("vitest_basic", tmp_path)
    link_node_modules(project)
    result, sid = await traced_run(strobe, project, ["Inventory.*", "parseSku"])
    assert result["summary"]["failed"] >= 1, result["summary"]
    events = await strobe.all_events(sid, verbose=True)
    receives = [e for e in by_function(events, "inventory.Inventory.receive") if e["eventType"] == "function_enter"]
    assert receives, sorted({e.get("function") for e in events if e.get("function")})
    skus = [e for e in by_function(events, "inventory.parseSku") if e["eventType"] == "function_exit"]
    assert any("exception" in e for e in skus) and any("exception" not in e for e in skus), skus
    assert all(e["sourceFile"] == str(project / "src" / "inventory.js") for e in receives)


@pytest.mark.parametrize(("framework", "pattern", "called"), [
    ("mocha_basic", "temperature.*", "temperature.toFahrenheit"),
    ("nodetest_basic", "math.*", "math.add"),
    ("bun_basic", "math.*", "math.divide"),
])
async def test_traced_mocha_node_test_and_bun_test_runs(
        strobe: StrobeClient, tmp_path: Path, framework: str, pattern: str, called: str) -> None:
    project = copy_project(framework, tmp_path)
    link_node_modules(project)
    _, sid = await traced_run(strobe, project, [pattern])
    events = await strobe.all_events(sid, verbose=True)
    calls = [e for e in by_function(events, called) if e["eventType"] == "function_enter"]
    assert calls, sorted({e.get("function") for e in events if e.get("function")})


@pytest.mark.parametrize(("framework", "thrower", "asserted", "called"), [
    ("jest_basic", "calc.parsePrice", "calc averages a list", "calc.average"),
    ("vitest_basic", "inventory.parseSku", "inventory > never ships more than it holds", "inventory.Inventory.count"),
])
async def test_failures_suggest_patterns_that_trace_them(
        strobe: StrobeClient, tmp_path: Path, framework: str, thrower: str, asserted: str, called: str) -> None:
    """Every failure's suggestedTraces select project functions (the test file's anonymous callbacks are not
    suggested); given back as tracePatterns, they record the function that threw and what the failing assertion
    called, and none is reported as matching nothing."""
    project = copy_project(framework, tmp_path)
    link_node_modules(project)
    started = await strobe.call("debug_test", projectRoot=str(project))
    status = await finished(strobe, started["testRunId"])
    failures = {f["name"]: f["suggestedTraces"] for f in status["result"]["failures"]}
    assert all(failures.values()), failures
    assert called.rsplit(".", 1)[1] in " ".join(failures[asserted]), failures  # from the failing line's call
    suggestions = list(dict.fromkeys(p for patterns in failures.values() for p in patterns))
    assert not [p for p in suggestions if p.endswith(".test.js")], suggestions  # anonymous callbacks only

    traced = await strobe.call("debug_test", projectRoot=str(project), tracePatterns=suggestions)
    status = await finished(strobe, traced["testRunId"])
    assert status["status"] == "completed" and "traceWarnings" not in status, status
    events = await strobe.all_events(traced["sessionId"], verbose=True)
    exits = [e for e in by_function(events, thrower) if e["eventType"] == "function_exit"]
    assert any("exception" in e for e in exits), sorted({e.get("function") for e in events if e.get("function")})
    assert by_function(events, called)


async def test_a_pattern_matching_nothing_in_the_run_is_reported(strobe: StrobeClient, tmp_path: Path) -> None:
    """The run's processes come and go without a debug_trace answer: the completed status says which patterns
    selected no function in any of them, with what to try."""
    project = copy_project("jest_basic", tmp_path)
    link_node_modules(project)
    started = await strobe.call("debug_test", projectRoot=str(project), tracePatterns=["calc.add", "calc.nosuch"])
    status = await finished(strobe, started["testRunId"])
    assert status["status"] == "completed", status
    assert len(status.get("traceWarnings", [])) == 1, status
    assert status["traceWarnings"][0].startswith("Pattern 'calc.nosuch' matched no function in any process.")
    assert "'Class.method' or 'module.func'" in status["traceWarnings"][0]  # the JavaScript advice
