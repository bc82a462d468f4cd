"""The Catch2 adapter against a real Catch2 v2 project (tests/targets/testprojects/catch2_basic), built once
for the module with its Makefile."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from strobe.errors import ValidationError
from strobe.testing.adapters.catch2 import Catch2Adapter
from strobe.testing.model import TestLevel as Level
from tests.testing.adapters.harness import copy_project, run

adapter = Catch2Adapter()
BINARY = "build/calc_tests"
SUITE = {
    "add sums two numbers": "passed",
    "clamp keeps the upper bound": "failed",
    "parses numbers with separators": "skipped",  # [!mayfail] and failing
    "divide by zero is rejected": "passed",
    "whole pipeline": "passed",
    'rounds "half" values, [up]': "passed",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_project("catch2_basic", tmp_path_factory.mktemp("catch2"))
    build = subprocess.run(["make", "-j2"], cwd=root, capture_output=True, text=True, timeout=240)
    assert build.returncode == 0, build.stdout + build.stderr
    return root


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    path = tmp_path / "reports"
    path.mkdir()
    return path


def test_detects_catch2_binary_by_probing_it(project: Path, tmp_path: Path) -> None:
    assert adapter.detect(project, BINARY) == 85
    assert adapter.detect(project, None) == 60  # catch.hpp includes, but no binary to run yet
    assert adapter.detect(project, "/bin/true") == 0  # an executable without Catch2 inside
    # broken_tests carries Catch2's code, but the probe can't run it: not recognised on strings alone
    assert adapter.detect(project, "build/broken_tests") == 0
    assert adapter.detect(tmp_path, None) == 0


def test_whole_suite_reports_pass_fail_and_mayfail_as_skipped(project: Path, reports: Path) -> None:
    ran = run(adapter, adapter.suite_command(project, None, BINARY, reports))

    assert ran.parsed.error is None
    assert ran.outcomes() == SUITE  # hidden [.] tests are not run, so not reported
    failure = ran.case("clamp keeps")
    assert failure.file is not None and Path(failure.file).name == "tests.cpp"
    assert failure.line == 14
    assert "CHECK( calc::clamp(top, 0, 10) == 10 )" in (failure.message or "")
    assert "with expansion: 9 == 10" in (failure.message or "")
    assert "clamping 10" in failure.output
    assert failure.duration_ms is not None
    assert adapter.suggest_traces(failure) == ["calc::*", "@file:tests.cpp"]
    skipped = ran.case("parses numbers")
    assert "[!mayfail]" in (skipped.message or "") and "calc::add(1, 1) == 3" in (skipped.message or "")


def test_single_test_runs_only_that_test_even_with_spec_syntax_in_its_name(project: Path, reports: Path) -> None:
    ran = run(adapter, adapter.single_test_command(project, "CLAMP keeps", BINARY, reports))
    assert ran.outcomes() == {"clamp keeps the upper bound": "failed"}

    name = 'rounds "half" values, [up]'  # unescaped, `,` would split the spec and `[up]` would be a tag
    ran = run(adapter, adapter.single_test_command(project, name, BINARY, reports))
    assert ran.outcomes() == {name: "passed"}


def test_level_runs_the_tests_with_that_tag(project: Path, reports: Path) -> None:
    ran = run(adapter, adapter.suite_command(project, Level.INTEGRATION, BINARY, reports))
    assert ran.outcomes() == {"divide by zero is rejected": "passed"}


def test_rerun_command(project: Path) -> None:
    assert adapter.rerun_command(project, "clamp keeps", BINARY) == "build/calc_tests '*clamp keeps*'"
    assert adapter.rerun_command(project, "a, [b]", BINARY) == "build/calc_tests '*a\\, \\[b\\]*'"


def test_test_killed_mid_run_is_failed_from_the_truncated_report(project: Path, reports: Path) -> None:
    ran = run(adapter, adapter.single_test_command(project, "dies without a trace", BINARY, reports))

    assert ran.finished.exit_code == -9
    assert ran.parsed.error is None
    assert ran.outcomes() == {"dies without a trace": "failed"}
    case = ran.case("dies")
    assert "did not finish" in (case.message or "") and "SIGKILL" in (case.message or "")
    assert case.file is not None and Path(case.file).name == "tests.cpp"


def test_binary_that_cannot_start_gives_an_error(project: Path, reports: Path) -> None:
    ran = run(adapter, adapter.suite_command(project, None, "build/broken_tests", reports))

    assert ran.parsed.cases == []
    assert ran.parsed.error is not None
    assert "exited with code 3" in ran.parsed.error
    assert "fixture data/calc.csv is missing" in ran.parsed.error


def test_missing_or_ambiguous_command_is_a_validation_error(project: Path, reports: Path) -> None:
    with pytest.raises(ValidationError, match=r"several \(build/broken_tests, build/calc_tests\).*`command`"):
        adapter.suite_command(project, None, None, reports)
    with pytest.raises(ValidationError, match=r"build/nope.*Build the tests first"):
        adapter.suite_command(project, None, "build/nope", reports)


def test_project_info_lists_catch2_sources(project: Path) -> None:
    info = adapter.project_info(project)
    assert (info.language, info.build_system) == ("cpp", "make")
    assert sorted(info.test_files) == ["catch_main.cpp", "tests.cpp"]
