"""The cargo adapter against real `cargo test` runs of tests/targets/testprojects/cargo_basic (and cargo_broken).

Every run shares one CARGO_TARGET_DIR per module, so the project compiles once."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import NamedTuple

import pytest

from strobe.errors import ValidationError
from strobe.symbols.patterns import parse_pattern
from strobe.testing.adapters import by_name, detect
from strobe.testing.adapters.base import FinishedRun
from strobe.testing.adapters.cargo import CargoAdapter
from strobe.testing.model import LiveProgress, Outcome, Phase
from strobe.testing.model import TestCommand as Command
from strobe.testing.model import TestLevel as Level
from tests.testing.adapters.harness import Ran, copy_project, run

ADAPTER = CargoAdapter()
WHOLE_SUITE = {
    "tests::add_works": "passed",
    "tests::add_fails": "failed",
    "tests::sums_a_pair": "failed",  # panics inside parser::parse_pair
    "tests::talks_to_network": "skipped",
    "parser::tests::parses_pair": "passed",
    "adds_through_the_public_api": "passed",  # tests/integration.rs
    "e2e_parses_then_adds": "passed",  # tests/e2e_pairs.rs
    "src/lib.rs - add (line 7)": "passed",  # the doc test
}


class Fn(NamedTuple):
    name: str
    file: str | None = None


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cargo")


@pytest.fixture(scope="module")
def project(workdir: Path) -> Path:
    return copy_project("cargo_basic", workdir)


def run_cargo(command: Command, workdir: Path, **env: str) -> Ran:
    """Run with the module's shared target dir (the adapter itself leaves the project's target dir alone)."""
    return run(ADAPTER, dataclasses.replace(command, env={**command.env, "CARGO_TARGET_DIR": str(workdir / "target"),
                                                          **env}))


@pytest.fixture(scope="module")
def suite(project: Path, workdir: Path) -> Ran:
    return run_cargo(ADAPTER.suite_command(project, None, None, workdir), workdir)


def test_detects_cargo_projects_and_nothing_else(project: Path, tmp_path: Path) -> None:
    assert ADAPTER.detect(project, None) == 90
    assert ADAPTER.detect(tmp_path, None) == 0
    assert isinstance(by_name("cargo"), CargoAdapter)  # registered by the package scan
    assert detect(project, None)[0].name == "cargo"


def test_whole_suite_reports_each_outcome(suite: Ran) -> None:
    assert suite.parsed.error is None, suite.parsed.error
    assert suite.outcomes() == WHOLE_SUITE


def test_assertion_failure_has_location_and_message(suite: Ran) -> None:
    case = suite.case("tests::add_fails")
    assert case.file == "src/lib.rs" and case.line == 26
    assert "two plus two should be five" in (case.message or "")
    assert "left: 4" in (case.message or "") and "right: 5" in (case.message or "")
    assert "checking two plus two" in case.output
    assert case.duration_ms is not None and case.duration_ms >= 0


def test_panic_in_library_code_suggests_the_modules_of_its_backtrace(suite: Ran) -> None:
    case = suite.case("sums_a_pair")
    assert case.file == "src/parser.rs" and case.line == 5  # where the panic happened, not the test
    assert case.message == "a pair needs a comma"
    suggestions = ADAPTER.suggest_traces(case)
    # parser::* comes from the backtrace's cargo_basic::parser::parse_pair frame; the rest from the test's path.
    assert suggestions == ["cargo_basic::parser::*", "cargo_basic::*", "cargo_basic::tests::*", "@file:parser.rs"]
    assert parse_pattern(suggestions[0], None).matches(Fn("cargo_basic::parser::parse_pair"))
    assert not parse_pattern(suggestions[0], None).matches(Fn("core::option::expect_failed"))


def test_failing_test_suggests_the_module_it_tests(suite: Ran) -> None:
    suggestions = ADAPTER.suggest_traces(suite.case("tests::add_fails"))
    assert suggestions == ["cargo_basic::*", "cargo_basic::tests::*", "@file:lib.rs"]
    assert parse_pattern(suggestions[0], None).matches(Fn("cargo_basic::add"))


def test_ignore_reason_is_the_skip_message(suite: Ran) -> None:
    assert suite.case("talks_to_network").message == "needs a network"


def test_live_progress_counted_the_events(suite: Ran) -> None:
    assert (suite.progress.passed, suite.progress.failed, suite.progress.skipped) == (5, 2, 1)
    assert suite.progress.phase is Phase.RUNNING and suite.progress.current_test is None


def test_cargo_lines_set_the_phase() -> None:
    compiling, running = LiveProgress(phase=Phase.RUNNING), LiveProgress()
    ADAPTER.on_line("   Compiling cargo_basic v0.1.0 (/p)", "stderr", compiling, 0)
    assert compiling.phase is Phase.COMPILING
    ADAPTER.on_line("     Running unittests src/lib.rs (target/debug/deps/cargo_basic-0123456789abcdef)",
                    "stderr", running, 0)
    assert running.phase is Phase.RUNNING
    ADAPTER.on_line('{ "type": "test", "event": "started", "name": "tests::x" }', "stdout", running, 7)
    assert (running.current_test, running.current_started_ns) == ("tests::x", 7)


def test_single_test_runs_only_that_test_and_knows_its_crate(project: Path, workdir: Path) -> None:
    # Without a backtrace the crate comes from cargo's "Running …/deps/cargo_basic-<hash>" line for that binary.
    ran = run_cargo(ADAPTER.single_test_command(project, "add_fails", None, workdir), workdir, RUST_BACKTRACE="0")
    assert ran.outcomes() == {"tests::add_fails": "failed"}
    case = ran.case("add_fails")
    assert case.stack == ["cargo_basic::tests::add_fails"]
    assert ADAPTER.suggest_traces(case)[0] == "cargo_basic::*"


@pytest.mark.parametrize(("level", "expected"), [
    (Level.UNIT, {name: outcome for name, outcome in WHOLE_SUITE.items() if "::" in name}),
    (Level.INTEGRATION, {"adds_through_the_public_api": "passed"}),
    (Level.E2E, {"e2e_parses_then_adds": "passed"}),
])
def test_levels_pick_their_targets(project: Path, workdir: Path, level: Level, expected: dict[str, str]) -> None:
    ran = run_cargo(ADAPTER.suite_command(project, level, None, workdir), workdir)
    assert ran.parsed.error is None, ran.parsed.error
    assert ran.outcomes() == expected


def test_rerun_command_is_an_exact_filter(project: Path) -> None:
    assert ADAPTER.rerun_command(project, "tests::add_fails", None) == "cargo test tests::add_fails -- --exact"
    assert ADAPTER.rerun_command(project, "src/lib.rs - add (line 7)", None) == \
        "cargo test 'src/lib.rs - add (line 7)' -- --exact"


def test_empty_test_name_is_refused(project: Path, workdir: Path) -> None:
    with pytest.raises(ValidationError, match="part of a test's name"):
        ADAPTER.single_test_command(project, " ", None, workdir)


@pytest.fixture(scope="module")
def broken(workdir: Path) -> Path:
    return copy_project("cargo_broken", workdir)


def test_compile_error_is_reported_with_the_compiler_message(broken: Path, workdir: Path) -> None:
    ran = run_cargo(ADAPTER.suite_command(broken, None, None, workdir), workdir)
    assert ran.parsed.cases == []
    assert ran.parsed.error is not None
    assert "could not compile" in ran.parsed.error
    assert "src/lib.rs:4" in ran.parsed.error and "cannot add" in ran.parsed.error


def test_missing_e2e_targets_explain_where_they_go(broken: Path, workdir: Path) -> None:
    ran = run_cargo(ADAPTER.suite_command(broken, Level.E2E, None, workdir), workdir)  # it has no tests/
    assert ran.parsed.cases == []
    assert ran.parsed.error is not None and "tests/*e2e*.rs" in ran.parsed.error


def test_old_panic_format_is_understood(tmp_path: Path) -> None:
    """Rust before 1.73 printed "panicked at 'message', file:line:col" (this toolchain prints the new form)."""
    events = [{"type": "suite", "event": "started", "test_count": 1},
              {"type": "test", "event": "started", "name": "tests::old"},
              {"type": "test", "event": "failed", "name": "tests::old",
               "stdout": "thread 'tests::old' panicked at 'assertion failed: `(left == right)`\n  left: `1`,\n"
                         " right: `2`: old style', src/lib.rs:9:5\nnote: run with `RUST_BACKTRACE=1`\n"}]
    command = Command(argv=["cargo", "test"], cwd=tmp_path)
    stdout = "\n".join(json.dumps(event) for event in events)
    parsed = ADAPTER.parse(FinishedRun(command, stdout, "", 101))
    [case] = parsed.cases
    assert case.outcome is Outcome.FAILED
    assert (case.file, case.line) == ("src/lib.rs", 9)
    assert case.message is not None and case.message.endswith("old style")
