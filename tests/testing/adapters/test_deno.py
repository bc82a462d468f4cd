"""The Deno adapter against real `deno test` runs (Deno 2 from tests/toolchains) of
tests/targets/testprojects/deno_basic: in test/unit, one passing test, two failing (an assertion, an error thrown
in src/math.ts), one ignored, and a test whose second step fails; in test/integration, one passing test that
reads a file (so it needs the --allow-read the project's `test` task grants). DENO_DIR points into the
module's temporary directory, so Deno's cache stays out of the home directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from strobe.errors import ValidationError
from strobe.symbols.patterns import parse_pattern
from strobe.testing.adapters.bun import BunAdapter
from strobe.testing.adapters.deno import DenoAdapter, permission_flags
from strobe.testing.adapters.nodetest import NodeTestAdapter
from strobe.testing.model import LiveProgress
from strobe.testing.model import TestLevel as Level
from tests.testing.adapters import harness

ADAPTER = DenoAdapter()
UNIT = {
    "adds two numbers": "passed",
    "divides exactly": "failed",
    "parses an infinite ratio": "failed",
    "multiplies later": "skipped",
    "rounding > keeps integers": "passed",
    "rounding > rounds halves up": "failed",  # and "rounding" itself, failed by its step, is left out
}


@pytest.fixture(scope="module", autouse=True)
def deno_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DENO_DIR", str(tmp_path_factory.mktemp("deno_dir")))
        yield


def _project(dest: Path) -> Path:
    root = harness.copy_project("deno_basic", dest)
    harness.link_node_modules(root)
    return root


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _project(tmp_path_factory.mktemp("deno"))


@pytest.fixture(scope="module")
def suite(project: Path, tmp_path_factory: pytest.TempPathFactory) -> harness.Ran:
    return harness.run(ADAPTER, ADAPTER.suite_command(project, None, None, tmp_path_factory.mktemp("report")))


def test_detects_deno_projects_only(project: Path, tmp_path: Path) -> None:
    assert ADAPTER.detect(project, None) == 90
    assert ADAPTER.detect(tmp_path, None) == 0
    assert NodeTestAdapter().detect(project, None) == 0
    assert BunAdapter().detect(project, None) == 0
    (tmp_path / "deno.jsonc").write_text("{}")
    assert ADAPTER.detect(tmp_path, None) == 90


def test_whole_suite_outcomes(suite: harness.Ran) -> None:
    assert suite.parsed.error is None
    assert suite.outcomes() == {**UNIT, "sums a report": "passed"}  # passing needs the task's --allow-read
    assert suite.finished.command.argv[2:4] == ["--allow-read", "--no-prompt"]


def test_assertion_failure_points_at_the_assertion(suite: harness.Ran) -> None:
    case = suite.case("divides exactly")
    assert (case.file, case.line) == ("test/unit/math_test.ts", 9)  # the assertion; the report says 8
    assert case.message == "AssertionError: divide(7, 2) should be 3.5\n3 !== 3.5"
    assert ADAPTER.suggest_traces(case) == ["divide", "@file:math_test.ts"]


def test_thrown_error_suggests_the_throwing_functions(suite: harness.Ran) -> None:
    case = suite.case("parses an infinite ratio")
    assert (case.file, case.line) == ("test/unit/math_test.ts", 13)
    assert case.message == "RangeError: denominator must not be zero"
    assert case.stack[0].startswith("checkDenominator (") and case.stack[0].endswith("src/math.ts:11:22)")
    suggestions = ADAPTER.suggest_traces(case)
    assert suggestions == ["checkDenominator", "parseRatio", "@file:math.ts", "@file:math_test.ts"]
    for pattern in suggestions:
        parse_pattern(pattern, str(Path.cwd()))  # valid trace patterns


def test_failing_step_keeps_only_project_frames(suite: harness.Ran) -> None:
    case = suite.case("rounds halves up")
    assert (case.file, case.line) == ("test/unit/math_test.ts", 23)
    assert case.message == "AssertionError: Math.round(2.5) should be 2\n3 !== 2"
    assert not any("ext:" in frame for frame in case.stack)  # Deno's runtime frames
    assert ADAPTER.suggest_traces(case) == ["@file:math_test.ts"]


def test_live_progress_counts_each_test_and_step(suite: harness.Ran) -> None:
    progress = suite.progress
    # passed: two tests and a step; failed: two tests and a step (not the parent failing "due to" it)
    assert (progress.passed, progress.failed, progress.skipped) == (3, 3, 1)


def test_live_progress_names_a_test_with_steps_while_it_runs() -> None:
    progress = LiveProgress()
    ADAPTER.on_line("rounding ...", "stdout", progress, 42)
    assert (progress.current_test, progress.current_started_ns) == ("rounding", 42)


def test_single_test_runs_only_that_test(project: Path, tmp_path: Path) -> None:
    ran = harness.run(ADAPTER, ADAPTER.single_test_command(project, "divides exactly", None, tmp_path))
    assert ran.parsed.error is None
    assert ran.outcomes() == {"divides exactly": "failed"}  # Deno lists the rest as skipped: dropped


def test_single_step_runs_its_test(project: Path, tmp_path: Path) -> None:
    ran = harness.run(ADAPTER, ADAPTER.single_test_command(project, "rounding > rounds halves up", None, tmp_path))
    assert ran.outcomes() == {"rounding > keeps integers": "passed", "rounding > rounds halves up": "failed"}


def test_levels_run_their_directories(project: Path, tmp_path: Path) -> None:
    integration = harness.run(ADAPTER, ADAPTER.suite_command(project, Level.INTEGRATION, None, tmp_path))
    assert integration.outcomes() == {"sums a report": "passed"}
    assert ADAPTER.suite_command(project, Level.UNIT, None, tmp_path).argv[-1] == "test/unit"
    with pytest.raises(ValidationError, match="directories named 'e2e'"):
        ADAPTER.suite_command(project, Level.E2E, None, tmp_path)


def test_permissions_follow_the_project(tmp_path: Path) -> None:
    config = tmp_path / "deno.jsonc"
    config.write_text('{\n  // comments and trailing commas are fine\n'
                      '  "tasks": {"test": "deno test -R --allow-env=HOME --watch",},\n}\n')
    assert permission_flags(tmp_path) == ["-R", "--allow-env=HOME", "--no-prompt"]
    config.write_text('{"tasks": {"test": {"command": "deno test --allow-net"}}}')
    assert permission_flags(tmp_path) == ["--allow-net", "--no-prompt"]
    config.write_text('{"test": {"permissions": {"read": true}}}')  # Deno then requires -P
    assert permission_flags(tmp_path) == ["-P", "--no-prompt"]
    config.write_text('{"tasks": {"dev": "deno run main.ts"}}')
    assert permission_flags(tmp_path) == ["--allow-all", "--no-prompt"]


def test_config_permissions_run_with_dash_p(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / "deno.json").write_text('{"test": {"permissions": {"read": true}}}')
    ran = harness.run(ADAPTER, ADAPTER.suite_command(root, Level.INTEGRATION, None, tmp_path))
    assert ran.parsed.error is None
    assert ran.outcomes() == {"sums a report": "passed"}


def test_rerun_command(project: Path) -> None:
    assert ADAPTER.rerun_command(project, "rounding > rounds halves up", None) == (
        "node_modules/.bin/deno test --allow-read --no-prompt --filter rounding")
    assert ADAPTER.rerun_command(project, "sums (x+y)", None).endswith(" --filter 'sums (x+y)'")  # a substring


def test_type_error_is_a_run_error(tmp_path: Path) -> None:
    root = _project(tmp_path)
    with (root / "src" / "math.ts").open("a") as source:
        source.write("\nexport const broken: number = 'text';\n")
    ran = harness.run(ADAPTER, ADAPTER.suite_command(root, None, None, tmp_path))
    assert ran.parsed.cases == []
    assert ran.parsed.error is not None
    assert "Deno stopped before running the tests" in ran.parsed.error and "TS2322" in ran.parsed.error
