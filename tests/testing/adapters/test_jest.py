"""The Jest adapter against a real Jest run of tests/targets/testprojects/jest_basic: two passing tests (one
unit, one integration), two failing (an assertion, an error thrown in src/calc.js), one skipped, one todo."""

from __future__ import annotations

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

ADAPTER = JestAdapter()
UNIT = {
    "calc adds two numbers": "passed",
    "calc averages a list": "failed",
    "calc parses a price": "failed",
    "calc rounds to cents": "skipped",
    "calc formats a price": "skipped",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = harness.copy_project("jest_basic", tmp_path_factory.mktemp("jest"))
    harness.link_node_modules(root)
    return root


@pytest.fixture(scope="module")
def suite(project: Path, tmp_path_factory: pytest.TempPathFactory) -> harness.Ran:
    return harness.run(ADAPTER, ADAPTER.suite_command(project, None, None, tmp_path_factory.mktemp("report")))


def test_detects_jest_projects_only(project: Path, tmp_path: Path) -> None:
    assert detect(project, None)[0].name == "jest"  # against every registered adapter
    assert ADAPTER.detect(project, None) == 92
    assert ADAPTER.detect(tmp_path, None) == 0
    assert VitestAdapter().detect(project, None) == 0
    assert MochaAdapter().detect(project, None) == 0


def test_whole_suite_outcomes(suite: harness.Ran) -> None:
    assert suite.parsed.error is None
    assert suite.outcomes() == {**UNIT, "totals a basket": "passed"}
    assert suite.case("formats a price").message == "todo"
    assert suite.case("rounds to cents").line == 16  # from the report's location (--testLocationInResults)


def test_assertion_failure_points_at_the_assertion(suite: harness.Ran) -> None:
    case = suite.case("averages a list")
    assert case.file == "tests/unit/calc.test.js"
    assert case.line == 9  # the expect(...) line, not the test(...) line the report's location gives (8)
    assert case.message is not None
    assert "Expected: 2" in case.message and "Received: 1.5" in case.message
    assert ADAPTER.suggest_traces(case) == ["average", "@file:calc.test.js"]  # what the failing line calls


def test_thrown_error_suggests_the_throwing_function(suite: harness.Ran) -> None:
    case = suite.case("parses a price")
    assert (case.file, case.line) == ("tests/unit/calc.test.js", 13)
    assert case.message == "Error: not a price: 12,50"
    assert case.stack[0].startswith("parsePrice (") and case.stack[0].endswith("src/calc.js:16:11)")
    suggestions = ADAPTER.suggest_traces(case)
    assert suggestions == ["parsePrice", "@file:calc.js", "@file:calc.test.js"]
    for pattern in suggestions:
        parse_pattern(pattern, str(Path.cwd()))  # valid trace patterns


def test_live_progress_counts_each_test_and_names_the_running_one(suite: harness.Ran) -> None:
    progress = suite.progress
    assert (progress.passed, progress.failed, progress.skipped) == (2, 2, 2)
    assert progress.phase is Phase.SUITES_FINISHED
    # Named as the results name them, as each starts (a skipped or todo test never starts).
    assert sorted(suite.running) == sorted(["calc adds two numbers", "calc averages a list", "calc parses a price",
                                            "totals a basket"])
    assert progress.current_test is None  # every started test ended


def test_a_project_reporter_does_not_hide_the_progress(project: Path, tmp_path: Path) -> None:
    """`--reporters` replaces the config's reporters: the console lines Strobe counts come back with `default`."""
    configured = harness.copy_project("jest_basic", tmp_path / "p")
    harness.link_node_modules(configured)
    (configured / "jest.config.js").write_text(
        'module.exports = { testMatch: ["**/tests/**/*.test.js"], reporters: [["summary", {}]] };\n')
    ran = harness.run(ADAPTER, ADAPTER.suite_command(configured, Level.UNIT, None, tmp_path))
    assert (ran.progress.passed, ran.progress.failed) == (1, 2)
    assert "calc averages a list" in ran.running


def test_single_test_runs_only_that_test(project: Path, tmp_path: Path) -> None:
    ran = harness.run(ADAPTER, ADAPTER.single_test_command(project, "calc averages a list", None, tmp_path))
    assert ran.parsed.error is None
    assert ran.outcomes() == {"calc averages a list": "failed"}


def test_levels_run_their_directories(project: Path, tmp_path: Path) -> None:
    for sub in ("i", "u"):
        (tmp_path / sub).mkdir()
    integration = harness.run(ADAPTER, ADAPTER.suite_command(project, Level.INTEGRATION, None, tmp_path / "i"))
    assert integration.outcomes() == {"totals a basket": "passed"}
    unit = harness.run(ADAPTER, ADAPTER.suite_command(project, Level.UNIT, None, tmp_path / "u"))
    assert unit.outcomes() == UNIT
    with pytest.raises(ValidationError, match="directories named 'e2e'"):
        ADAPTER.suite_command(project, Level.E2E, None, tmp_path)


def test_rerun_command_escapes_the_name(project: Path) -> None:
    assert ADAPTER.rerun_command(project, "calc averages a list", None) == "npx jest -t 'calc averages a list'"
    assert ADAPTER.rerun_command(project, "sums (x+y)", None) == r"npx jest -t 'sums \(x\+y\)'"


def test_syntax_error_is_a_run_error(tmp_path: Path) -> None:
    root = harness.copy_project("jest_basic", tmp_path)
    harness.link_node_modules(root)
    with (root / "src" / "calc.js").open("a") as source:
        source.write("\nfunction broken( {\n")
    ran = harness.run(ADAPTER, ADAPTER.suite_command(root, None, None, tmp_path))
    assert ran.parsed.cases == []
    assert ran.parsed.error is not None
    assert "Jest could not load" in ran.parsed.error
    assert "calc.js: Unexpected token" in ran.parsed.error  # the cause, not Jest's generic advice


def test_a_broken_file_beside_working_ones_is_a_failure(tmp_path: Path) -> None:
    root = harness.copy_project("jest_basic", tmp_path)
    harness.link_node_modules(root)
    (root / "tests" / "integration" / "broken.test.js").write_text("test('x', () => {\n")
    ran = harness.run(ADAPTER, ADAPTER.suite_command(root, Level.INTEGRATION, None, tmp_path))
    assert ran.parsed.error is None
    assert ran.outcomes() == {"totals a basket": "passed", "tests/integration/broken.test.js": "failed"}
    assert "SyntaxError" in (ran.case("broken.test.js").message or "")


def test_missing_jest_is_a_run_error_that_says_to_install(tmp_path: Path) -> None:
    root = harness.copy_project("jest_basic", tmp_path)  # no node_modules
    ran = harness.run(ADAPTER, ADAPTER.suite_command(root, None, None, tmp_path))
    assert ran.parsed.cases == []
    assert ran.parsed.error is not None and "npm install" in ran.parsed.error


def test_no_test_files_is_not_an_error(tmp_path: Path) -> None:
    root = harness.copy_project("jest_basic", tmp_path)
    harness.link_node_modules(root)
    assert ADAPTER.project_info(root).test_files == ["tests/integration/flow.test.js", "tests/unit/calc.test.js"]
    for test_file in ("unit/calc.test.js", "integration/flow.test.js"):
        (root / "tests" / test_file).unlink()
    ran = harness.run(ADAPTER, ADAPTER.suite_command(root, None, None, tmp_path))
    assert ran.parsed.error is None and ran.parsed.cases == []  # the runner answers noTests
