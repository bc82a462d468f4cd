"""The go test adapter against real `go test -json` runs of tests/targets/testprojects/go_basic (and go_broken)."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import pytest

from strobe.errors import ValidationError
from strobe.symbols.patterns import parse_pattern
from strobe.testing.adapters import by_name, detect
from strobe.testing.adapters.gotest import GoTestAdapter
from strobe.testing.model import LiveProgress, Phase
from strobe.testing.model import TestLevel as Level
from tests.testing.adapters.harness import PROJECTS, Ran, copy_project, run

ADAPTER = GoTestAdapter()
WHOLE_SUITE = {
    "TestAdd": "passed",
    "TestAddFails": "failed",
    "TestSkipped": "skipped",
    "TestTable": "passed",
    "TestTable/zeros": "passed",
    "TestTable/ones": "passed",
    "TestSlow": "passed",
    "TestE2EFullReport": "passed",
    "TestRatio": "passed",
    "TestRatioPanics": "failed",
}


class Fn(NamedTuple):
    name: str
    file: str | None = None


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gotest")


@pytest.fixture(scope="module")
def project(workdir: Path) -> Path:
    return copy_project("go_basic", workdir)


@pytest.fixture(scope="module")
def suite(project: Path, workdir: Path) -> Ran:
    return run(ADAPTER, ADAPTER.suite_command(project, None, None, workdir))


def test_detects_go_modules_and_nothing_else(project: Path, tmp_path: Path) -> None:
    assert ADAPTER.detect(project, None) == 90
    assert ADAPTER.detect(tmp_path, None) == 0
    assert isinstance(by_name("go"), GoTestAdapter)  # registered by the package scan
    assert detect(project, None)[0].name == "go"


def test_whole_suite_reports_each_outcome(suite: Ran) -> None:
    assert suite.parsed.error is None, suite.parsed.error
    assert suite.outcomes() == WHOLE_SUITE  # subtests included; the integration-tagged test is not built


def test_failure_has_location_message_and_package_suggestion(suite: Ran) -> None:
    case = suite.case("TestAddFails")
    assert (case.file, case.line) == ("calc/calc_test.go", 14)
    assert case.message is not None and "Add(2, 2) = 4, want 5" in case.message
    assert case.duration_ms is not None
    suggestions = ADAPTER.suggest_traces(case)
    assert suggestions == ["example.com/gobasic/calc.*", "@file:calc_test.go"]
    assert parse_pattern(suggestions[0], None).matches(Fn("example.com/gobasic/calc.Add"))
    assert not parse_pattern(suggestions[0], None).matches(Fn("example.com/gobasic/report.Ratio"))


def test_panic_uses_the_goroutine_trace(suite: Ran) -> None:
    case = suite.case("TestRatioPanics")
    assert case.message == "runtime error: integer divide by zero"
    assert (case.file, case.line) == ("calc/calc.go", 9)  # the innermost frame in the project
    suggestions = ADAPTER.suggest_traces(case)
    assert suggestions == ["example.com/gobasic/calc.*", "example.com/gobasic/report.*", "@file:calc.go"]
    for pattern in suggestions:
        parse_pattern(pattern, str(Path.cwd()))  # valid patterns
    assert not any(s.startswith(("testing", "runtime")) for s in suggestions)


def test_skip_reason_is_the_message(suite: Ran) -> None:
    case = suite.case("TestSkipped")
    assert case.message == "needs a network"


def test_live_progress_counted_the_events(suite: Ran) -> None:
    assert (suite.progress.passed, suite.progress.failed, suite.progress.skipped) == (7, 2, 1)
    assert suite.progress.phase is Phase.RUNNING


def test_compiling_until_the_first_run_action() -> None:
    before, after = LiveProgress(), LiveProgress()
    for progress in (before, after):
        ADAPTER.on_line('{"ImportPath":"m/calc [m/calc.test]","Action":"build-output","Output":"# m/calc\\n"}',
                        "stdout", progress, 1)
        ADAPTER.on_line('{"Action":"start","Package":"m/calc"}', "stdout", progress, 2)
    assert before.phase is Phase.COMPILING and before.current_test is None
    ADAPTER.on_line('{"Action":"run","Package":"m/calc","Test":"TestAdd"}', "stdout", after, 3)
    assert (after.phase, after.current_test, after.current_started_ns) == (Phase.RUNNING, "TestAdd", 3)


def test_single_test_runs_only_that_test(project: Path, workdir: Path) -> None:
    ran = run(ADAPTER, ADAPTER.single_test_command(project, "TestAddFails", None, workdir))
    assert ran.outcomes() == {"TestAddFails": "failed"}


def test_passing_test_runs_again_instead_of_a_cached_result(project: Path, workdir: Path) -> None:
    for _ in range(2):  # go caches passing packages' results: the second run would be a replay without -count=1
        ran = run(ADAPTER, ADAPTER.single_test_command(project, "TestTable", None, workdir))
        assert ran.outcomes() == {"TestTable": "passed", "TestTable/zeros": "passed", "TestTable/ones": "passed"}
        assert "(cached)" not in ran.finished.stdout


def test_single_subtest_runs_its_parent_and_only_that_subtest(project: Path, workdir: Path) -> None:
    ran = run(ADAPTER, ADAPTER.single_test_command(project, "TestTable/ones", None, workdir))
    assert ran.outcomes() == {"TestTable": "passed", "TestTable/ones": "passed"}


def test_unit_level_is_short_and_leaves_out_e2e_and_integration(project: Path, workdir: Path) -> None:
    ran = run(ADAPTER, ADAPTER.suite_command(project, Level.UNIT, None, workdir))
    expected = {**WHOLE_SUITE, "TestSlow": "skipped"}
    del expected["TestE2EFullReport"]
    assert ran.outcomes() == expected


@pytest.mark.parametrize(("level", "expected"), [
    (Level.INTEGRATION, {"TestStoreRoundTrip": "passed"}),  # by its //go:build integration tag
    (Level.E2E, {"TestE2EFullReport": "passed"}),  # by its name
])
def test_levels_pick_their_tests(project: Path, workdir: Path, level: Level, expected: dict[str, str]) -> None:
    ran = run(ADAPTER, ADAPTER.suite_command(project, level, None, workdir))
    assert ran.parsed.error is None, ran.parsed.error
    assert ran.outcomes() == expected


def test_rerun_command_anchors_each_level(project: Path) -> None:
    assert ADAPTER.rerun_command(project, "TestAddFails", None) == "go test -count=1 -run '^TestAddFails$' ./..."
    assert ADAPTER.rerun_command(project, "TestTable/ones", None) == \
        "go test -count=1 -run '^TestTable$/^ones$' ./..."


def test_regex_characters_in_a_name_are_literal(project: Path, workdir: Path) -> None:
    command = ADAPTER.single_test_command(project, "TestX/a.b(c)", None, workdir)
    assert command.argv[command.argv.index("-run") + 1] == r"TestX/a\.b\(c\)"


def test_build_failure_of_the_only_package_is_an_error(workdir: Path) -> None:
    broken = copy_project("go_broken", workdir)
    ran = run(ADAPTER, ADAPTER.suite_command(broken, None, None, workdir))
    assert ran.parsed.cases == []
    assert ran.parsed.error is not None
    assert "could not build" in ran.parsed.error and "calc/calc.go:4" in ran.parsed.error
    assert "mismatched types" in ran.parsed.error


def test_build_failure_next_to_working_packages_is_a_failed_case(tmp_path: Path) -> None:
    project = copy_project("go_basic", tmp_path)
    (project / "broken").mkdir()
    (project / "broken" / "broken.go").write_text('package broken\n\nfunc F() int { return "x" }\n')
    (project / "broken" / "broken_test.go").write_text(
        'package broken\n\nimport "testing"\n\nfunc TestF(t *testing.T) { F() }\n')
    ran = run(ADAPTER, ADAPTER.single_test_command(project, "TestAdd", None, tmp_path))
    assert ran.parsed.error is None
    assert ran.outcomes() == {"TestAdd": "passed", "TestAddFails": "failed",
                              "example.com/gobasic/broken [build failed]": "failed"}
    case = ran.case("[build failed]")
    assert (case.file, case.line) == ("broken/broken.go", 3)
    assert case.message is not None and "cannot use" in case.message


def test_level_without_tests_is_refused_with_the_convention(workdir: Path) -> None:
    with pytest.raises(ValidationError, match="//go:build integration"):
        ADAPTER.suite_command(PROJECTS / "go_broken", Level.INTEGRATION, None, workdir)  # only reads it


def test_project_info_lists_test_files(project: Path) -> None:
    info = ADAPTER.project_info(project)
    assert info.language == "go" and info.build_system == "go"
    assert info.test_files == ["calc/calc_test.go", "calc/integration_test.go", "report/e2e_test.go",
                               "report/report_test.go"]


def test_go_work_workspace_runs_each_module(workdir: Path) -> None:
    """`./...` is refused at a go.work root that is not a module: the command names each module used."""
    project = copy_project("go_workspace", workdir)
    assert ADAPTER.detect(project, None) == 90
    ran = run(ADAPTER, ADAPTER.suite_command(project, None, None, workdir))
    assert ran.parsed.error is None, ran.parsed.error
    assert ran.outcomes() == {"TestHello": "failed", "TestShout": "passed"}
    case = ran.case("TestHello")
    assert (case.file, case.line) == ("greet/greet_test.go", 7)  # the module's directory, from go.work
    assert ADAPTER.suggest_traces(case) == ["example.com/greet.*", "@file:greet_test.go"]
    assert ADAPTER.rerun_command(project, "TestHello", None) == \
        "go test -count=1 -run '^TestHello$' ./greet/... ./shout/..."
