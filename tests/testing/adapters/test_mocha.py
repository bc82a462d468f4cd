"""The Mocha adapter against a real Mocha run of tests/targets/testprojects/mocha_basic: two passing tests
(one unit, one integration), two failing (an assertion, an error thrown in lib/temperature.js) and two pending
(`it.skip`, `it` without a body)."""

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
from strobe.testing.model import Phase
from strobe.testing.model import TestLevel as Level
from tests.testing.adapters import harness

UNIT = {
    "temperature converts boiling water to Fahrenheit": "passed",
    "temperature converts body temperature to Celsius": "failed",
    "temperature reads a Fahrenheit reading": "failed",
    "temperature converts to Kelvin": "skipped",
    "temperature averages readings": "skipped",
}


ADAPTER = MochaAdapter()


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = harness.copy_project("mocha_basic", tmp_path_factory.mktemp("mocha"))
    harness.link_node_modules(root)
    return root


@pytest.fixture(scope="module")
def suite(project: Path, tmp_path_factory: pytest.TempPathFactory) -> harness.Ran:
    return harness.run(ADAPTER, ADAPTER.suite_command(project, None, None, tmp_path_factory.mktemp("report")))


def test_detects_mocha_projects_only(project: Path, tmp_path: Path) -> None:
    assert detect(project, None)[0].name == "mocha"  # against every registered adapter
    assert ADAPTER.detect(project, None) == 90
    assert ADAPTER.detect(tmp_path, None) == 0
    assert JestAdapter().detect(project, None) == 0
    assert VitestAdapter().detect(project, None) == 0
    (tmp_path / "package.json").write_text(json.dumps({"devDependencies": {"mocha": "12.0.3", "jest": "30.5.2"}}))
    (tmp_path / ".mocharc.yml").write_text("spec: test\n")
    assert ADAPTER.detect(tmp_path, None) > JestAdapter().detect(tmp_path, None)  # 90 vs 86: config beats a dependency


def test_whole_suite_outcomes(suite: harness.Ran) -> None:
    assert suite.parsed.error is None
    assert suite.outcomes() == {**UNIT, "reading log converts a logged reading": "passed"}


def test_assertion_failure_points_at_the_assertion(suite: harness.Ran) -> None:
    case = suite.case("body temperature")
    assert (case.file, case.line) == ("test/unit/temperature.spec.js", 10)
    assert case.message is not None
    assert case.message.startswith("AssertionError [ERR_ASSERTION]: 98.6F should be 37C")
    assert "54.77777777777778" in case.message  # the actual value from Node's diff
    assert ADAPTER.suggest_traces(case) == ["toCelsius", "@file:temperature.spec.js"]  # what the failing line calls


def test_thrown_error_suggests_the_throwing_function(suite: harness.Ran) -> None:
    case = suite.case("Fahrenheit reading")
    assert (case.file, case.line) == ("test/unit/temperature.spec.js", 14)
    assert case.message == "RangeError: unreadable reading: 70 F"
    suggestions = ADAPTER.suggest_traces(case)
    assert suggestions == ["parseReading", "@file:temperature.js", "@file:temperature.spec.js"]
    for pattern in suggestions:
        parse_pattern(pattern, str(Path.cwd()))


def test_live_progress_names_the_running_test(suite: harness.Ran) -> None:
    progress = suite.progress
    assert (progress.passed, progress.failed) == (2, 2)  # pending tests run no hooks: counted from the report
    assert progress.phase is Phase.SUITES_FINISHED
    assert "temperature converts body temperature to Celsius" in suite.running
    assert progress.current_test is None  # every started test finished


def test_single_test_runs_only_that_test(project: Path, tmp_path: Path) -> None:
    name = "temperature converts body temperature to Celsius"
    ran = harness.run(ADAPTER, ADAPTER.single_test_command(project, name, None, tmp_path))
    assert ran.parsed.error is None
    assert ran.outcomes() == {name: "failed"}


def test_levels_run_their_directories(project: Path, tmp_path: Path) -> None:
    for sub in ("i", "u"):
        (tmp_path / sub).mkdir()
    integration = harness.run(ADAPTER, ADAPTER.suite_command(project, Level.INTEGRATION, None, tmp_path / "i"))
    assert integration.outcomes() == {"reading log converts a logged reading": "passed"}
    unit = harness.run(ADAPTER, ADAPTER.suite_command(project, Level.UNIT, None, tmp_path / "u"))
    assert unit.outcomes() == UNIT
    with pytest.raises(ValidationError, match="directories named 'e2e'"):
        ADAPTER.suite_command(project, Level.E2E, None, tmp_path)


def test_rerun_command(project: Path) -> None:
    assert ADAPTER.rerun_command(project, "temperature converts to Kelvin", None) == \
        "npx mocha --fgrep 'temperature converts to Kelvin'"


def test_syntax_error_is_a_run_error(tmp_path: Path) -> None:
    root = harness.copy_project("mocha_basic", tmp_path)
    harness.link_node_modules(root)
    with (root / "lib" / "temperature.js").open("a") as source:
        source.write("\nfunction (\n")
    ran = harness.run(ADAPTER, ADAPTER.suite_command(root, None, None, tmp_path))
    assert ran.parsed.cases == []
    assert ran.parsed.error is not None
    assert ran.parsed.error.startswith("Mocha wrote no test report (exit code 1).")
    assert "SyntaxError" in ran.parsed.error and "temperature.js" in ran.parsed.error


def test_no_test_files_is_not_an_error(tmp_path: Path) -> None:
    root = harness.copy_project("mocha_basic", tmp_path)
    harness.link_node_modules(root)
    assert MochaAdapter().project_info(root).test_files == ["test/integration/log.spec.js",
                                                            "test/unit/temperature.spec.js"]
    for spec in ("unit/temperature.spec.js", "integration/log.spec.js"):
        (root / "test" / spec).unlink()
    ran = harness.run(ADAPTER, ADAPTER.suite_command(root, None, None, tmp_path))
    assert ran.parsed.error is None and ran.parsed.cases == []  # the runner answers noTests
