"""The pytest adapter against real pytest runs of tests/targets/testprojects/pytest_basic (a `calc` package whose
`mean` divides by zero, tests under tests/unit and tests/integration), run with this venv's interpreter."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from strobe.errors import ValidationError
from strobe.instrument.command import pyenv_target
from strobe.testing.adapters import detect
from strobe.testing.adapters.pytest_ import PytestAdapter
from strobe.testing.model import LiveProgress, Phase
from strobe.testing.model import TestLevel as Level
from tests.testing.adapters.harness import Ran, copy_project, run

ADAPTER = PytestAdapter()
UNIT = "tests/unit/test_ops.py"
EXPECTED = {
    "tests/integration/test_stats.py::test_mean": "passed",
    "tests/integration/test_stats.py::test_mean_of_nothing": "failed",
    f"{UNIT}::test_add": "passed",
    f"{UNIT}::test_add_negative": "failed",
    f"{UNIT}::test_skipped": "skipped",
    f"{UNIT}::test_rounding": "skipped",
    f"{UNIT}::TestAddition::test_commutes[1-2]": "passed",
    f"{UNIT}::TestAddition::test_commutes[3-4]": "passed",
    f"{UNIT}::TestAddition::test_platform": "passed",
}


@pytest.fixture(scope="module")
def calc(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_project("pytest_basic", tmp_path_factory.mktemp("pytest"), sys.executable)


@pytest.fixture(scope="module")
def suite(calc: Path, tmp_path_factory: pytest.TempPathFactory) -> Ran:
    return run(ADAPTER, ADAPTER.suite_command(calc, None, None, tmp_path_factory.mktemp("report")))


def test_detects_pytest_configuration_and_test_files(calc: Path, tmp_path: Path) -> None:
    assert ADAPTER.detect(calc, None) == 90  # [tool.pytest.ini_options] in pyproject.toml
    assert detect(calc, None)[0].name == "pytest"
    plain = tmp_path / "plain"
    (plain / "tests").mkdir(parents=True)
    (plain / "pyproject.toml").write_text("[project]\nname = 'x'\n")  # no pytest section: not configuration
    (plain / "tests" / "test_x.py").write_text("import pytest\n\ndef test_x():\n    pytest.skip('later')\n")
    assert ADAPTER.detect(plain, None) == 80
    (plain / "conftest.py").write_text("")
    assert ADAPTER.detect(plain, None) == 90
    only_unittest = tmp_path / "only_unittest"
    only_unittest.mkdir()
    (only_unittest / "test_y.py").write_text("import unittest\n")
    assert ADAPTER.detect(only_unittest, None) == 0
    unrelated = tmp_path / "unrelated"
    unrelated.mkdir()
    (unrelated / "main.py").write_text("print('hi')\n")
    assert ADAPTER.detect(unrelated, None) == 0


def test_whole_suite_outcomes_come_from_the_junit_report(suite: Ran) -> None:
    assert suite.parsed.error is None
    assert suite.outcomes() == EXPECTED
    assert suite.case("test_skipped").message == "not on this machine"
    assert suite.case("test_rounding").message == "expected failure: known rounding issue"
    add = next(case for case in suite.parsed.cases if case.name == f"{UNIT}::test_add")
    assert "adding two and two" in add.output
    assert all(case.duration_ms is not None for case in suite.parsed.cases)


def test_assertion_failure_points_at_the_assert_and_suggests_the_imported_module(suite: Ran) -> None:
    case = suite.case("test_add_negative")
    assert case.file is not None and Path(case.file).name == "test_ops.py"
    assert case.line == 14
    assert case.message is not None and "sum of negatives" in case.message and "assert -5 == -6" in case.message
    assert case.stack == ["test_ops.test_add_negative (tests/unit/test_ops.py:14)"]
    # the test imports calc.ops: the code the assertion exercised comes first
    assert ADAPTER.suggest_traces(case) == ["calc.ops.*", "test_ops.*", "@file:test_ops.py"]


def test_exception_in_library_code_keeps_its_frames(suite: Ran) -> None:
    case = suite.case("test_mean_of_nothing")
    assert case.message == "ZeroDivisionError: division by zero"
    assert case.file is not None and Path(case.file).name == "test_stats.py" and case.line == 9
    assert case.stack == [
        "calc.ops.divide (calc/ops.py:9)",
        "calc.ops.mean (calc/ops.py:13)",
        "test_stats.test_mean_of_nothing (tests/integration/test_stats.py:9)",
    ]
    assert ADAPTER.suggest_traces(case) == ["calc.ops.*", "test_stats.*", "@file:test_stats.py"]


def test_live_progress_counts_and_sees_each_test_start(suite: Ran) -> None:
    assert (suite.progress.passed, suite.progress.failed, suite.progress.skipped) == (5, 2, 2)
    assert suite.progress.phase is Phase.SUITES_FINISHED
    # Replay the real output: the line naming a test ends before the test body runs.
    progress = LiveProgress()
    seen: list[str] = []
    for line in suite.finished.stdout.splitlines():
        ADAPTER.on_line(line, "stdout", progress, 1)
        if progress.current_test and progress.current_test not in seen:
            seen.append(progress.current_test)
    assert f"{UNIT}::test_add" in seen and "tests/integration/test_stats.py::test_mean_of_nothing" in seen
    assert set(seen) <= set(EXPECTED)


def fresh(tmp_path: Path, name: str) -> Path:
    """An empty report directory, as the runner gives each run."""
    directory = tmp_path / name
    directory.mkdir()
    return directory


def test_single_test_by_substring_and_by_node_id(calc: Path, tmp_path: Path) -> None:
    by_name = run(ADAPTER, ADAPTER.single_test_command(calc, "test_add_negative", None, fresh(tmp_path, "a")))
    assert by_name.outcomes() == {f"{UNIT}::test_add_negative": "failed"}
    node = f"{UNIT}::TestAddition::test_platform"
    by_node = run(ADAPTER, ADAPTER.single_test_command(calc, node, None, fresh(tmp_path, "b")))
    assert by_node.outcomes() == {node: "passed"}
    # "::" parts that are not a node id are keywords that must all match
    assert ADAPTER.single_test_command(calc, "TestAddition::commutes", None, tmp_path).argv[-2:] == [
        "-k", "TestAddition and commutes"]
    with pytest.raises(ValidationError, match="node id"):
        ADAPTER.single_test_command(calc, "adds (two)", None, tmp_path)


def test_levels_by_directory_else_by_marker(calc: Path, tmp_path: Path) -> None:
    unit = run(ADAPTER, ADAPTER.suite_command(calc, Level.UNIT, None, fresh(tmp_path, "a")))
    assert unit.outcomes() == {name: outcome for name, outcome in EXPECTED.items() if name.startswith(UNIT)}
    # no tests/e2e: the e2e marker, which nothing carries -> pytest exits 5, no tests and no error
    e2e = ADAPTER.suite_command(calc, Level.E2E, None, fresh(tmp_path, "b"))
    assert e2e.argv[-2:] == ["-m", "e2e"]
    none = run(ADAPTER, e2e)
    assert none.finished.exit_code == 5 and none.parsed.cases == [] and none.parsed.error is None


def test_rerun_command_uses_the_interpreter_that_runs_the_suite(calc: Path, tmp_path: Path) -> None:
    # the project's test.python setting (this suite's interpreter, which has pytest)
    assert ADAPTER.rerun_command(calc, f"{UNIT}::test_add", None) == f"{sys.executable} -m pytest {UNIT}::test_add"
    # else its virtualenv
    venv = tmp_path / "withvenv"
    (venv / ".venv" / "bin").mkdir(parents=True)
    (venv / ".venv" / "bin" / "python").symlink_to(sys.executable)
    assert ADAPTER.rerun_command(venv, "test_add", None) == ".venv/bin/python -m pytest -k test_add"
    assert ADAPTER.suite_command(venv, None, None, tmp_path).argv[0] == str(venv / ".venv" / "bin" / "python")
    # else python3 on PATH: never Strobe's own interpreter, whatever it can import
    bare = tmp_path / "bare"
    bare.mkdir()
    python3 = shutil.which("python3")
    assert python3 is not None
    on_path = str(pyenv_target(Path(python3), bare) or python3)  # a pyenv shim as what it runs
    assert ADAPTER.suite_command(bare, None, None, tmp_path).argv[0] == on_path
    assert ADAPTER.suite_command(bare, None, None, tmp_path).argv[0] != sys.executable
    # a setting relative to the project, or a command name on PATH
    (bare / ".strobe").mkdir()
    (bare / ".strobe" / "settings.json").write_text(json.dumps({"test.python": "tools/py"}))
    assert ADAPTER.suite_command(bare, None, None, tmp_path).argv[0] == str(bare / "tools" / "py")
    assert ADAPTER.rerun_command(bare, "test_add", None) == "tools/py -m pytest -k test_add"
    (bare / ".strobe" / "settings.json").write_text(json.dumps({"test.python": "python3"}))
    assert ADAPTER.suite_command(bare, None, None, tmp_path).argv[0] == on_path


def test_collection_error_is_a_run_error(tmp_path: Path) -> None:
    broken = copy_project("pytest_basic", tmp_path, sys.executable)
    (broken / "tests" / "unit" / "test_ops.py").write_text("def test_add(:\n    pass\n")
    result = run(ADAPTER, ADAPTER.suite_command(broken, None, None, fresh(tmp_path, "report")))
    assert result.parsed.cases == []
    assert result.parsed.error is not None
    assert "could not collect" in result.parsed.error and "SyntaxError" in result.parsed.error
    assert "tests/unit/test_ops.py" in result.parsed.error


def test_interpreter_without_pytest_is_a_run_error(tmp_path: Path) -> None:
    project = copy_project("pytest_basic", tmp_path)
    (project / ".venv" / "bin").mkdir(parents=True)
    python = project / ".venv" / "bin" / "python"  # a project venv whose interpreter cannot import pytest
    python.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")
    python.chmod(0o755)
    result = run(ADAPTER, ADAPTER.suite_command(project, None, None, fresh(tmp_path, "report")))
    assert result.parsed.error is not None and "pytest is not installed" in result.parsed.error
    assert os.fspath(python) in result.parsed.error
