"""The Vitest adapter against a real `vitest run` of tests/targets/testprojects/vitest_basic: two passing tests
(one unit, one e2e), two failing (an assertion, an error thrown in src/inventory.js), one skipped, one todo.
Also: which framework wins when a package.json names both Jest and Vitest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from strobe.errors import ValidationError
from strobe.symbols.patterns import parse_pattern
from strobe.testing.adapters import detect
from strobe.testing.adapters.jest import JestAdapter
from strobe.testing.adapters.mocha import MochaAdapter
from strobe.testing.adapters.vitest import VitestAdapter
from strobe.testing.model import TestLevel as Level
from tests.testing.adapters import harness

ADAPTER = VitestAdapter()
UNIT = {
    "inventory > receives stock": "passed",
    "inventory > never ships more than it holds": "failed",
    "inventory > accepts lower-case SKUs": "failed",
    "inventory > reserves stock": "skipped",
    "inventory > reports low stock": "skipped",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = harness.copy_project("vitest_basic", tmp_path_factory.mktemp("vitest"))
    harness.link_node_modules(root)
    return root


@pytest.fixture(scope="module")
def suite(project: Path, tmp_path_factory: pytest.TempPathFactory) -> harness.Ran:
    return harness.run(ADAPTER, ADAPTER.suite_command(project, None, None, tmp_path_factory.mktemp("report")))


def test_detects_vitest_projects_only(project: Path, tmp_path: Path) -> None:
    assert detect(project, None)[0].name == "vitest"  # against every registered adapter
    assert ADAPTER.detect(project, None) == 95
    assert ADAPTER.detect(tmp_path, None) == 0
    assert JestAdapter().detect(project, None) == 0
    assert MochaAdapter().detect(project, None) == 0


def _package(root: Path, scripts: dict[str, str], *config_files: str) -> Path:
    root.mkdir()
    package = {"name": "both", "scripts": scripts, "devDependencies": {"jest": "30.5.2", "vitest": "5.1.1"}}
    (root / "package.json").write_text(json.dumps(package))
    for name in config_files:
        (root / name).write_text("export default {};\n")
    return root


@pytest.mark.parametrize(("scripts", "config_files", "jest", "vitest"), [
    ({}, (), 86, 89),  # both merely installed: Vitest, as in the spec's ranking
    ({"test": "jest --ci"}, (), 92, 89),  # what `npm test` runs wins
    ({}, ("jest.config.js",), 92, 89),  # a config file beats the other framework's dependency
    ({"test": "vitest run"}, (), 86, 95),
    ({}, ("vite.config.js",), 86, 95),  # Vitest reads vite.config's `test` section
])
def test_jest_and_vitest_in_one_package_json(tmp_path: Path, scripts: dict[str, str], config_files: tuple[str, ...],
                                              jest: int, vitest: int) -> None:
    root = _package(tmp_path / "both", scripts, *config_files)
    assert (JestAdapter().detect(root, None), ADAPTER.detect(root, None)) == (jest, vitest)


def test_whole_suite_outcomes(suite: harness.Ran) -> None:
    assert suite.parsed.error is None
    assert suite.outcomes() == {**UNIT, "restocks a sold-out item": "passed"}
    assert suite.case("reports low stock").message == "todo"
    assert suite.case("reserves stock").line == 22  # from the report's location (--includeTaskLocation)


def test_assertion_failure_points_at_the_assertion(suite: harness.Ran) -> None:
    case = suite.case("never ships")
    assert (case.file, case.line) == ("test/unit/inventory.test.js", 15)  # expect(...), not test(...) on 11
    assert case.message == "AssertionError: expected -1 to be +0 // Object.is equality"
    assert ADAPTER.suggest_traces(case) == ["**.count", "@file:inventory.test.js"]  # inv.count(...) on the failing line


def test_thrown_error_suggests_the_throwing_function(suite: harness.Ran) -> None:
    case = suite.case("lower-case SKUs")
    assert (case.file, case.line) == ("test/unit/inventory.test.js", 19)
    assert case.message == "Error: malformed SKU: abc-001"
    suggestions = ADAPTER.suggest_traces(case)
    assert suggestions == ["parseSku", "@file:inventory.js", "@file:inventory.test.js"]
    for pattern in suggestions:
        parse_pattern(pattern, str(Path.cwd()))


def test_live_progress_counts_each_test_and_names_the_running_one(suite: harness.Ran) -> None:
    assert (suite.progress.passed, suite.progress.failed, suite.progress.skipped) == (2, 2, 2)
    assert set(suite.running) == set(suite.outcomes())  # named as the results name them (Vitest readies skipped ones)
    assert suite.progress.current_test is None  # every started test ended


def test_single_test_runs_only_that_test(project: Path, tmp_path: Path) -> None:
    name = "inventory > never ships more than it holds"  # a name as the results give it goes back as `test`
    ran = harness.run(ADAPTER, ADAPTER.single_test_command(project, name, None, tmp_path))
    assert ran.parsed.error is None
    assert ran.outcomes() == {name: "failed"}


def test_levels_run_their_directories(project: Path, tmp_path: Path) -> None:
    for sub in ("e", "u"):
        (tmp_path / sub).mkdir()
    e2e = harness.run(ADAPTER, ADAPTER.suite_command(project, Level.E2E, None, tmp_path / "e"))
    assert e2e.outcomes() == {"restocks a sold-out item": "passed"}
    unit = harness.run(ADAPTER, ADAPTER.suite_command(project, Level.UNIT, None, tmp_path / "u"))
    assert unit.outcomes() == UNIT
    with pytest.raises(ValidationError, match="directories named 'integration'"):
        ADAPTER.suite_command(project, Level.INTEGRATION, None, tmp_path)


def test_rerun_command_escapes_the_name(project: Path) -> None:
    assert ADAPTER.rerun_command(project, "inventory > receives stock", None) == \
        "npx vitest run -t 'inventory(?: > | )receives stock'"  # Vitest 4 joins names with a space
    assert ADAPTER.rerun_command(project, "costs $5.00", None) == r"npx vitest run -t 'costs \$5\.00'"


def test_syntax_error_is_a_run_error(tmp_path: Path) -> None:
    root = harness.copy_project("vitest_basic", tmp_path)
    harness.link_node_modules(root)
    with (root / "src" / "inventory.js").open("a") as source:
        source.write("\nexport function (\n")
    ran = harness.run(ADAPTER, ADAPTER.suite_command(root, None, None, tmp_path))
    assert ran.parsed.cases == []
    assert ran.parsed.error is not None
    assert "Vitest could not load test/e2e/restock.test.js, test/unit/inventory.test.js" in ran.parsed.error
    assert "invalid JS syntax" in ran.parsed.error
