"""The unittest adapter against real runs of tests/targets/testprojects/unittest_basic (a `shapes` package; tests
in the packages tests.unit and tests.integration), through our runner script and this venv's interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from strobe.errors import ValidationError
from strobe.testing.adapters import detect
from strobe.testing.adapters.pytest_ import PytestAdapter
from strobe.testing.adapters.unittest_ import UnittestAdapter
from strobe.testing.model import LiveProgress, Phase
from strobe.testing.model import TestLevel as Level
from tests.testing.adapters.harness import Ran, copy_project, run

ADAPTER = UnittestAdapter()
GEOMETRY = "tests.unit.test_geometry"
EXPECTED = {
    "tests.integration.test_resize.TestResize.test_double": "passed",
    "tests.integration.test_resize.TestResize.test_flatten": "failed",
    f"{GEOMETRY}.TestCircle.test_exact_pi": "skipped",
    f"{GEOMETRY}.TestCircle.test_plot": "skipped",
    f"{GEOMETRY}.TestRectangle.test_area": "passed",
    f"{GEOMETRY}.TestRectangle.test_area_of_square": "failed",
    f"{GEOMETRY}.TestRectangle.test_sides": "passed",
}


def fresh(tmp_path: Path, name: str) -> Path:
    """An empty report directory, as the runner gives each run."""
    directory = tmp_path / name
    directory.mkdir()
    return directory


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_project("unittest_basic", tmp_path_factory.mktemp("unittest"), sys.executable)


@pytest.fixture(scope="module")
def suite(shapes: Path, tmp_path_factory: pytest.TempPathFactory) -> Ran:
    return run(ADAPTER, ADAPTER.suite_command(shapes, None, None, tmp_path_factory.mktemp("report")))


def test_detects_test_files_importing_unittest(shapes: Path, tmp_path: Path) -> None:
    assert ADAPTER.detect(shapes, None) == 70
    assert PytestAdapter().detect(shapes, None) == 0
    assert detect(shapes, None)[0].name == "unittest"
    (tmp_path / "test_plain.py").write_text("def test_x():\n    assert True\n")  # pytest style, no unittest
    assert ADAPTER.detect(tmp_path, None) == 0
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # a configured pytest project runs unittest tests too
    (tmp_path / "test_case.py").write_text("import unittest\n")
    assert ADAPTER.detect(tmp_path, None) == 70 < PytestAdapter().detect(tmp_path, None)


def test_whole_suite_outcomes_come_from_the_json_report(suite: Ran) -> None:
    assert suite.parsed.error is None
    assert suite.outcomes() == EXPECTED
    assert suite.case("test_plot").message == "needs a plotting library"
    assert suite.case("test_exact_pi").message == "expected failure: AssertionError: 3.141592653589793 != 3"
    area = next(case for case in suite.parsed.cases if case.name == f"{GEOMETRY}.TestRectangle.test_area")
    assert area.output == "measuring a 2 by 3 rectangle\n"
    assert "measuring a 2 by 3" not in suite.finished.stdout  # captured per test, not on the console
    assert all(case.duration_ms is not None for case in suite.parsed.cases)


def test_assertion_failure_has_location_message_and_suggestions(suite: Ran) -> None:
    case = suite.case("test_area_of_square")
    assert case.file is not None and Path(case.file).name == "test_geometry.py" and case.line == 12
    assert case.message == "AssertionError: 9 != 10 : square of side 3"
    assert case.stack == [f"{GEOMETRY}.TestRectangle.test_area_of_square (tests/unit/test_geometry.py:12)"]
    assert ADAPTER.suggest_traces(case) == ["shapes.geometry.*", f"{GEOMETRY}.*", "@file:test_geometry.py"]


def test_error_raised_in_library_code_is_a_failure_with_its_frames(suite: Ran) -> None:
    case = suite.case("test_flatten")
    assert case.message == "ValueError: factor must not be zero"
    assert case.file is not None and Path(case.file).name == "test_resize.py" and case.line == 11
    assert case.stack == ["shapes.geometry.scale (shapes/geometry.py:20)",
                          "tests.integration.test_resize.TestResize.test_flatten (tests/integration/test_resize.py:11)"]
    assert ADAPTER.suggest_traces(case)[0] == "shapes.geometry.*"


def test_live_progress_counts_and_sees_each_test_start(suite: Ran) -> None:
    assert (suite.progress.passed, suite.progress.failed, suite.progress.skipped) == (3, 2, 2)
    assert suite.progress.phase is Phase.RUNNING and suite.progress.current_test is None
    progress = LiveProgress()
    lines = suite.finished.stdout.splitlines()
    ADAPTER.on_line(next(line for line in lines if line.startswith("RUN ")), "stdout", progress, 7)
    assert progress.current_test == "tests.integration.test_resize.TestResize.test_double"
    assert progress.current_started_ns == 7


def test_single_test_and_its_rerun_command(shapes: Path, tmp_path: Path) -> None:
    single = run(ADAPTER, ADAPTER.single_test_command(shapes, "test_area_of_square", None, fresh(tmp_path, "a")))
    assert single.outcomes() == {f"{GEOMETRY}.TestRectangle.test_area_of_square": "failed"}
    rerun = ADAPTER.rerun_command(shapes, "test_area_of_square", None)
    assert rerun == f"{sys.executable} -m unittest discover -s tests -t . -k test_area_of_square"
    typed = subprocess.run(rerun, shell=True, cwd=shapes, capture_output=True, text=True, timeout=60)
    assert "Ran 1 test" in typed.stderr and "square of side 3" in typed.stderr


def test_levels_are_directories(shapes: Path, tmp_path: Path) -> None:
    unit = run(ADAPTER, ADAPTER.suite_command(shapes, Level.UNIT, None, fresh(tmp_path, "a")))
    assert unit.outcomes() == {name: outcome for name, outcome in EXPECTED.items() if name.startswith(GEOMETRY)}
    with pytest.raises(ValidationError, match="tests/e2e"):
        ADAPTER.suite_command(shapes, Level.E2E, None, tmp_path)


def test_failing_subtest_and_unimportable_module_are_failures(tmp_path: Path) -> None:
    project = copy_project("unittest_basic", tmp_path, sys.executable)
    (project / "tests" / "unit" / "test_more.py").write_text(
        "import unittest\n\n\nclass TestMore(unittest.TestCase):\n"
        "    def test_each(self):\n        for n in (1, 2):\n            with self.subTest(n=n):\n"
        "                self.assertLess(n, 2)\n")
    (project / "tests" / "unit" / "test_missing.py").write_text("import no_such_module\n")
    result = run(ADAPTER, ADAPTER.suite_command(project, Level.UNIT, None, fresh(tmp_path, "report")))
    assert result.parsed.error is None
    subtest = result.case("TestMore.test_each")
    assert subtest.outcome.value == "failed" and subtest.message == "(n=2): AssertionError: 2 not less than 2"
    missing = result.case("test_missing")
    assert missing.name == "tests.unit.test_missing" and missing.outcome.value == "failed"
    assert missing.message is not None and "No module named 'no_such_module'" in missing.message
    assert missing.file is not None and Path(missing.file).name == "test_missing.py" and missing.line == 1
    assert result.case("test_area_of_square").outcome.value == "failed"  # the other modules still report


def test_syntax_error_everywhere_is_a_run_error(tmp_path: Path) -> None:
    broken = copy_project("unittest_basic", tmp_path, sys.executable)
    (broken / "shapes" / "geometry.py").write_text("def scale(size, factor:\n    return size\n")
    result = run(ADAPTER, ADAPTER.suite_command(broken, None, None, fresh(tmp_path, "report")))
    assert result.parsed.cases == []
    assert result.parsed.error is not None
    assert "could not import any test module" in result.parsed.error and "SyntaxError" in result.parsed.error
    assert "geometry.py:1" in result.parsed.error
