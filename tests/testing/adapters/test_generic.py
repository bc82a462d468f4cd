"""The Generic adapter running real commands from tests/targets/testprojects/generic_basic: a shell test
runner that writes JUnit to $STROBE_TEST_REPORT (read by the shared _junit module), and a check that only has
an exit code."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from strobe.errors import ValidationError
from strobe.testing import adapters
from strobe.testing.adapters._junit import JunitError, parse_junit
from strobe.testing.adapters.generic import GenericAdapter
from strobe.testing.model import TestLevel as Level
from tests.testing.adapters.harness import copy_project, run

adapter = GenericAdapter()
RUNNER = "./run_tests.sh"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_project("generic_basic", tmp_path_factory.mktemp("generic"))


@pytest.fixture
def reports(tmp_path: Path) -> Path:
    path = tmp_path / "reports"
    path.mkdir()
    return path


def test_detection_is_the_last_resort(project: Path, tmp_path: Path) -> None:
    assert adapter.detect(project, RUNNER) == 1
    assert adapter.detect(tmp_path, None) == 1
    # no other adapter claims a project of shell scripts
    assert adapters.detect(project, RUNNER)[0].name == "generic"


def test_junit_report_gives_per_test_results(project: Path, reports: Path) -> None:
    command = adapter.suite_command(project, None, RUNNER, reports)
    assert command.env["STROBE_TEST_REPORT"] == str(command.report)
    ran = run(adapter, command)

    assert ran.parsed.error is None
    assert ran.outcomes() == {"add sums two numbers": "passed", "clamp keeps the upper bound": "failed",
                              "parses separators": "skipped", "average of no values": "failed"}
    failure = ran.case("clamp")
    assert (failure.file, failure.line) == ("run_tests.sh", 48)
    assert failure.message == "expected 10, got 9"  # the message attribute
    assert failure.stack == ["at clamp (calc.sh)", "at run_tests.sh:48"]  # the text, minus the repeated message
    assert failure.duration_ms == pytest.approx(1.0)
    assert adapter.suggest_traces(failure) == ["@file:run_tests.sh"]
    error = ran.case("average")
    assert error.message == "divide: division by zero"  # no message attribute: the text's first line
    assert error.stack == ["at divide (calc.sh)", "at run_tests.sh:50"]
    assert ran.case("separators").message == "not implemented yet"


def test_level_is_passed_to_the_command(project: Path, reports: Path) -> None:
    ran = run(adapter, adapter.suite_command(project, Level.INTEGRATION, RUNNER, reports))
    assert ran.outcomes() == {"average of no values": "failed"}


def test_single_test_filters_the_report(project: Path, reports: Path) -> None:
    ran = run(adapter, adapter.single_test_command(project, "add sums", RUNNER, reports))
    # the runner ignores STROBE_TEST_FILTER and exits 1 for the other tests' failures: neither leaks in
    assert ran.finished.exit_code == 1
    assert ran.outcomes() == {"add sums two numbers": "passed"}


def test_rerun_command(project: Path) -> None:
    assert adapter.rerun_command(project, "clamp keeps", RUNNER) == "STROBE_TEST_FILTER='clamp keeps' ./run_tests.sh"
    # the single case named after the command (no report): the command alone, as it ran
    assert adapter.rerun_command(project, "./plain_check.sh", "./plain_check.sh") == "./plain_check.sh"
    shell = "test -f calc.sh && ./plain_check.sh"
    assert adapter.rerun_command(project, shell, shell) == shell


RECORDER = """#!/bin/sh
echo "filter=${STROBE_TEST_FILTER-unset} args=$*" >> ran.log
"""


@pytest.mark.parametrize(("command", "test"), [
    ("./record.sh one 'two words'", "some test"),  # a test of a JUnit report: run with STROBE_TEST_FILTER
    ("./record.sh one 'two words'", None),  # the case named after the command (exit code only): the whole run
    ("record.sh one", "some test"),  # a file of projectRoot named without ./
    ("./record.sh one && ./record.sh two", "some test"),  # shell syntax: each command of the list sees the filter
    ("./record.sh one && ./record.sh two", None),
])
def test_the_rerun_command_runs_what_the_run_ran(tmp_path: Path, reports: Path, command: str,
                                                 test: str | None) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "record.sh").write_text(RECORDER)
    (project / "record.sh").chmod(0o755)
    if test is None:
        ran = run(adapter, adapter.suite_command(project, None, command, reports))
        (case,) = ran.parsed.cases
        test = case.name
    else:
        ran = run(adapter, adapter.single_test_command(project, test, command, reports))
    assert ran.finished.exit_code == 0
    original = (project / "ran.log").read_text()
    (project / "ran.log").unlink()
    rerun = adapter.rerun_command(project, test, command)
    subprocess.run(rerun, shell=True, cwd=project, check=True, timeout=30)
    assert (project / "ran.log").read_text() == original


def test_without_report_the_exit_code_decides(project: Path, reports: Path) -> None:
    ran = run(adapter, adapter.suite_command(project, None, "./plain_check.sh", reports))
    assert ran.outcomes() == {"./plain_check.sh": "failed"}
    message = ran.case("plain").message or ""
    assert "exited with code 1" in message and "add 2 4: expected 5, got 6" in message

    shell = "test -f calc.sh && echo fine"  # shell syntax: run through /bin/sh
    ran = run(adapter, adapter.suite_command(project, None, shell, reports))
    assert ran.outcomes() == {shell: "passed"}


def test_nonzero_exit_with_a_clean_report_is_a_failure(project: Path, reports: Path) -> None:
    shell = """printf '<testsuite><testcase name="ok"/></testsuite>' > "$STROBE_TEST_REPORT"; exit 2"""
    ran = run(adapter, adapter.suite_command(project, None, shell, reports))
    assert ran.outcomes() == {"ok": "passed", shell: "failed"}
    assert "exited with code 2 although its JUnit report shows no failure" in (ran.case("exit 2").message or "")


def test_broken_commands_give_errors(project: Path, reports: Path) -> None:
    ran = run(adapter, adapter.suite_command(project, None, "no_such_tool --all && true", reports))
    assert ran.parsed.cases == []
    assert "command not found" in (ran.parsed.error or "") and "no_such_tool" in (ran.parsed.error or "")

    garbage = """echo '<testsuites><testcase' > "$STROBE_TEST_REPORT\""""
    ran = run(adapter, adapter.suite_command(project, None, garbage, reports))
    assert ran.parsed.cases == []
    assert "not valid XML" in (ran.parsed.error or "")


def test_bad_command_is_a_validation_error(project: Path, reports: Path) -> None:
    with pytest.raises(ValidationError, match=r"`command` is required.*Catch2.*GoogleTest"):
        adapter.suite_command(project, None, None, reports)
    with pytest.raises(ValidationError, match="neither a file"):
        adapter.suite_command(project, None, "./missing.sh", reports)
    with pytest.raises(ValidationError, match="not executable"):
        adapter.suite_command(project, None, "calc.sh", reports)


def test_parse_junit_names_with_suites_and_rejects_non_junit(project: Path, tmp_path: Path) -> None:
    report = tmp_path / "r.xml"
    report.write_text('<testsuites><testsuite name="math"><testsuite name="add">'
                      '<testcase name="sums"/></testsuite></testsuite></testsuites>')
    assert [c.name for c in parse_junit(report, suite_separator=" > ")] == ["math > add > sums"]
    assert [c.name for c in parse_junit(report)] == ["sums"]
    report.write_text("<html/>")
    with pytest.raises(JunitError, match="not JUnit"):
        parse_junit(report)
    with pytest.raises(JunitError, match="no JUnit report"):
        parse_junit(tmp_path / "missing.xml")
