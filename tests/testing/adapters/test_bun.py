"""The Bun adapter against real `bun test` runs (Bun 1.4 from tests/toolchains) of
tests/targets/testprojects/bun_basic: in test/unit, one passing test, two failing (an assertion, an error thrown
in src/math.js), one skipped and one todo; in test/integration, one passing test."""

from __future__ import annotations

from pathlib import Path

import pytest

from strobe.errors import ValidationError
from strobe.symbols.patterns import parse_pattern
from strobe.testing.adapters.bun import BunAdapter
from strobe.testing.adapters.deno import DenoAdapter
from strobe.testing.adapters.nodetest import NodeTestAdapter
from strobe.testing.model import TestLevel as Level
from tests.testing.adapters import harness

ADAPTER = BunAdapter()
UNIT = {
    "math > adds two numbers": "passed",
    "math > divides exactly": "failed",
    "math > parses an infinite ratio": "failed",
    "math > multiplies later": "skipped",
    "rounds halves": "skipped",  # test.todo
}


def _project(dest: Path) -> Path:
    root = harness.copy_project("bun_basic", dest)
    harness.link_node_modules(root)
    return root


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _project(tmp_path_factory.mktemp("bun"))


@pytest.fixture(scope="module")
def suite(project: Path, tmp_path_factory: pytest.TempPathFactory) -> harness.Ran:
    return harness.run(ADAPTER, ADAPTER.suite_command(project, None, None, tmp_path_factory.mktemp("report")))


def test_detects_bun_projects_only(project: Path, tmp_path: Path) -> None:
    assert ADAPTER.detect(project, None) == 85  # bunfig.toml
    assert ADAPTER.detect(tmp_path, None) == 0
    assert NodeTestAdapter().detect(project, None) == 0
    assert DenoAdapter().detect(project, None) == 0
    (tmp_path / "package.json").write_text('{"scripts": {"test": "bun test --coverage"}}')
    assert ADAPTER.detect(tmp_path, None) == 85


def test_finds_bun_in_node_modules_above_the_project(project: Path, tmp_path: Path) -> None:
    argv = ADAPTER.suite_command(project / "test", None, None, tmp_path).argv
    assert argv[0] == str(project.resolve() / "node_modules" / ".bin" / "bun")
    assert argv[1:3] == ["test", "--reporter=junit"]


def test_whole_suite_outcomes(suite: harness.Ran) -> None:
    assert suite.parsed.error is None
    assert suite.outcomes() == {**UNIT, "sums a report": "passed"}
    assert suite.case("rounds halves").message == "TODO"


def test_assertion_failure_points_at_the_assertion(suite: harness.Ran) -> None:
    case = suite.case("divides exactly")
    assert case.file == "test/unit/math.test.js"
    assert case.line == 10  # the expect(...) line, not the it(...) line the report gives (9)
    assert case.message is not None and "Expected: 3.5" in case.message and "Received: 3" in case.message
    assert ADAPTER.suggest_traces(case) == ["divide", "@file:math.test.js"]


def test_thrown_error_suggests_the_throwing_functions(suite: harness.Ran) -> None:
    case = suite.case("parses an infinite ratio")
    assert (case.file, case.line) == ("test/unit/math.test.js", 14)
    assert case.message == "denominator must not be zero"
    assert case.stack[0].startswith("checkDenominator (") and "src/math.js:11:" in case.stack[0]
    suggestions = ADAPTER.suggest_traces(case)
    assert suggestions == ["checkDenominator", "parseRatio", "@file:math.js", "@file:math.test.js"]
    for pattern in suggestions:
        parse_pattern(pattern, str(Path.cwd()))  # valid trace patterns


def test_live_progress_counts_each_test(suite: harness.Ran) -> None:
    progress = suite.progress
    assert (progress.passed, progress.failed, progress.skipped) == (2, 2, 2)


def test_single_test_runs_only_that_test(project: Path, tmp_path: Path) -> None:
    ran = harness.run(ADAPTER, ADAPTER.single_test_command(project, "math > divides exactly", None, tmp_path))
    assert ran.parsed.error is None
    assert ran.outcomes() == {"math > divides exactly": "failed"}  # Bun lists the rest as skipped: dropped
    assert (ran.progress.passed, ran.progress.failed) == (0, 1)


def test_levels_run_their_directories(project: Path, tmp_path: Path) -> None:
    (tmp_path / "i").mkdir(), (tmp_path / "u").mkdir()
    integration = harness.run(ADAPTER, ADAPTER.suite_command(project, Level.INTEGRATION, None, tmp_path / "i"))
    assert integration.outcomes() == {"sums a report": "passed"}
    unit = harness.run(ADAPTER, ADAPTER.suite_command(project, Level.UNIT, None, tmp_path / "u"))
    assert unit.outcomes() == UNIT
    with pytest.raises(ValidationError, match="directories named 'e2e'"):
        ADAPTER.suite_command(project, Level.E2E, None, tmp_path)


def test_rerun_command(project: Path) -> None:
    assert ADAPTER.rerun_command(project, "math > divides exactly", None) == (
        "node_modules/.bin/bun test --test-name-pattern 'math divides exactly'")
    assert ADAPTER.rerun_command(project, "sums (x+y)", None).endswith(r"'sums \(x\+y\)'")


def test_syntax_error_is_a_run_error(tmp_path: Path) -> None:
    root = _project(tmp_path)
    for test_file in ("test/unit/math.test.js", "test/integration/report.test.js"):
        with (root / test_file).open("a") as source:
            source.write("\nfunction broken( {\n")
    ran = harness.run(ADAPTER, ADAPTER.suite_command(root, None, None, tmp_path))
    assert ran.parsed.cases == []
    assert ran.parsed.error is not None
    assert "Bun could not run test/" in ran.parsed.error and "Expected identifier" in ran.parsed.error


def test_a_broken_file_beside_working_ones_is_a_failure(tmp_path: Path) -> None:
    """Bun's report leaves out a file that failed to load: without the console's error block the run looks
    green."""
    root = _project(tmp_path)
    (root / "test" / "integration" / "broken.test.js").write_text("test('x', () => {\n")
    ran = harness.run(ADAPTER, ADAPTER.suite_command(root, Level.INTEGRATION, None, tmp_path))
    assert ran.parsed.error is None
    assert ran.outcomes() == {"sums a report": "passed", "test/integration/broken.test.js": "failed"}
    broken = ran.case("broken.test.js")
    assert (broken.file, broken.line) == ("test/integration/broken.test.js", 1)
    assert broken.message is not None and "end of file" in broken.message


def test_missing_bun_is_a_validation_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = harness.copy_project("bun_basic", tmp_path)  # no node_modules
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ValidationError, match="Bun is not installed"):
        ADAPTER.suite_command(root, None, None, tmp_path)


def test_no_test_files_is_not_an_error(tmp_path: Path) -> None:
    root = _project(tmp_path)
    assert ADAPTER.project_info(root).test_files == ["test/integration/report.test.js", "test/unit/math.test.js"]
    for test_file in ("test/unit/math.test.js", "test/integration/report.test.js"):
        (root / test_file).unlink()
    ran = harness.run(ADAPTER, ADAPTER.suite_command(root, None, None, tmp_path))
    assert ran.parsed.error is None and ran.parsed.cases == []  # the runner answers noTests
