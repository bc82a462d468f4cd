"""The GoogleTest adapter against a real CMake + GoogleTest project (tests/targets/testprojects/gtest_basic),
configured and built once for the module."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from strobe.errors import ValidationError
from strobe.testing.adapters.gtest import GTestAdapter
from strobe.testing.model import Phase
from strobe.testing.model import TestLevel as Level
from tests.testing.adapters.harness import copy_project, run

adapter = GTestAdapter()
BINARY = "build/calc_tests"
SUITE = {
    "CalcUnit.AddSumsTwoNumbers": "passed",
    "CalcUnit.ClampKeepsTheUpperBound": "failed",
    "CalcUnit.ParsesNumbersWithSeparators": "skipped",  # GTEST_SKIP()
    "CalcUnit.DISABLED_HandlesOverflow": "skipped",
    "CalcIntegration.DivideByZeroIsRejected": "passed",
    "CalcE2e.WholePipeline": "passed",
}


def _build(argv: list[str], cwd: Path) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = copy_project("gtest_basic", tmp_path_factory.mktemp("gtest"))
    _build(["cmake", "-S", ".", "-B", "build", "-DCMAKE_BUILD_TYPE=Debug"], root)
    _build(["cmake", "--build", "build", "-j2"], root)
    return root


@pytest.fixture(scope="module")
def crash_binary(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built outside the project, so the project still has exactly one test binary."""
    out = tmp_path_factory.mktemp("gtest-crash") / "crash_tests"
    _build(["g++", "-g", "crash/crash_tests.cpp", "-o", str(out), "-lgtest", "-lgtest_main", "-pthread"], project)
    return out


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    path = tmp_path / "reports"
    path.mkdir()
    return path


def test_detects_gtest_binary_and_cmake_project(project: Path, tmp_path: Path) -> None:
    assert adapter.detect(project, BINARY) == 85
    assert adapter.detect(project, None) == 85  # find_package(GTest) in CMakeLists.txt
    assert adapter.detect(project, "/bin/true") == 0  # an executable without GoogleTest inside
    assert adapter.detect(tmp_path, None) == 0
    (tmp_path / "t.cc").write_text("#include <gtest/gtest.h>\n")
    assert adapter.detect(tmp_path, None) == 60  # sources only, no build file naming it


def test_whole_suite_reports_pass_fail_skip_and_disabled(project: Path, reports: Path) -> None:
    ran = run(adapter, adapter.suite_command(project, None, BINARY, reports))

    assert ran.parsed.error is None
    assert ran.outcomes() == SUITE
    failure = ran.case("Clamp")
    assert failure.file is not None and Path(failure.file).name == "calc_tests.cpp"
    assert failure.line == 14
    assert "calc::clamp(10, 0, 10)" in (failure.message or "") and "Which is: 9" in (failure.message or "")
    assert adapter.suggest_traces(failure) == ["calc::*", "@file:calc_tests.cpp"]
    assert ran.case("Separators").message == "separators are not supported yet"
    assert "DISABLED_" in (ran.case("DISABLED_").message or "")
    # live progress from the console: 3 OK, 1 FAILED, 1 SKIPPED + 1 DISABLED; the summary isn't counted again
    assert (ran.progress.passed, ran.progress.failed, ran.progress.skipped) == (3, 1, 2)
    assert ran.progress.phase is Phase.SUITES_FINISHED and ran.progress.current_test is None


def test_without_command_runs_the_one_built_binary(project: Path, reports: Path) -> None:
    command = adapter.suite_command(project, Level.E2E, None, reports)
    assert command.argv[0] == str((project / BINARY).resolve())
    ran = run(adapter, command)
    assert ran.outcomes() == {"CalcE2e.WholePipeline": "passed"}


def test_levels_filter_by_suite_name(project: Path, reports: Path) -> None:
    ran = run(adapter, adapter.suite_command(project, Level.UNIT, BINARY, reports))
    assert set(ran.outcomes()) == {name for name in SUITE if name.startswith("CalcUnit.")}
    ran = run(adapter, adapter.suite_command(project, Level.INTEGRATION, BINARY, reports))
    assert ran.outcomes() == {"CalcIntegration.DivideByZeroIsRejected": "passed"}


def test_single_test_runs_only_that_test(project: Path, reports: Path) -> None:
    ran = run(adapter, adapter.single_test_command(project, "Clamp", BINARY, reports))
    assert ran.outcomes() == {"CalcUnit.ClampKeepsTheUpperBound": "failed"}
    assert ran.progress.failed == 1


def test_rerun_command(project: Path) -> None:
    assert adapter.rerun_command(project, "Clamp", BINARY) == "build/calc_tests '--gtest_filter=*Clamp*'"


def test_crash_gives_an_error_naming_the_running_test(crash_binary: Path, project: Path, reports: Path) -> None:
    ran = run(adapter, adapter.suite_command(project, None, str(crash_binary), reports))

    assert ran.parsed.cases == []
    error = ran.parsed.error or ""
    assert "was killed by SIGSEGV" in error
    assert "running CrashUnit.DereferencesNull" in error and "1 had finished" in error
    assert "[ RUN      ] CrashUnit.DereferencesNull" in error  # the output's tail


def test_missing_or_ambiguous_binary_is_a_validation_error(project: Path, tmp_path: Path, reports: Path) -> None:
    (tmp_path / "CMakeLists.txt").write_text("find_package(GTest)\n")
    with pytest.raises(ValidationError, match="No built GoogleTest binary was found"):
        adapter.suite_command(tmp_path, None, None, reports)
    (tmp_path / "build").mkdir()
    shutil.copy(project / BINARY, tmp_path / "build" / "a_tests")
    shutil.copy(project / BINARY, tmp_path / "build" / "b_tests")
    with pytest.raises(ValidationError, match=r"several \(build/a_tests, build/b_tests\)"):
        adapter.suite_command(tmp_path, None, None, reports)
    with pytest.raises(ValidationError, match=r"build/nope.*Build the tests first"):
        adapter.suite_command(project, None, "build/nope", reports)
