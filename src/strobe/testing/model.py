"""What a test run produces, independent of the framework: commands to run, test cases with their
outcome, failures with hints, and the live progress a running suite reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path


class TestLevel(StrEnum):
    __test__ = False  # not a pytest test class

    UNIT = "unit"
    INTEGRATION = "integration"
    E2E = "e2e"


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"


class Phase(StrEnum):
    COMPILING = "compiling"
    RUNNING = "running"
    SUITES_FINISHED = "suites_finished"


@dataclass(frozen=True)
class TestCommand:
    """One process to run. `report` is the file the framework writes its machine-readable report to (None when
    the report is the process's stdout, e.g. `go test -json`)."""

    __test__ = False  # not a pytest test class

    argv: list[str]
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)  # added to the daemon's environment
    report: Path | None = None


@dataclass
class TestCase:
    """One test as the framework's report describes it. `name` is what single_test_command accepts."""

    __test__ = False  # not a pytest test class

    name: str
    outcome: Outcome
    duration_ms: float | None = None
    file: str | None = None
    line: int | None = None
    message: str | None = None  # failure or skip reason
    stack: list[str] = field(default_factory=list)  # frames, innermost first, as the framework prints them
    output: str = ""  # what the test printed, when the report carries it
    source_line: str | None = None  # the text of the line it failed on, when the adapter read it (for suggestions)


@dataclass
class ParsedRun:
    """Everything the report said. `error` is set when the suite did not run (build failure, bad arguments):
    a short explanation plus the tail of the output, for the caller to act on."""

    cases: list[TestCase]
    error: str | None = None


@dataclass
class ProjectInfo:
    """Shown with `noTests`: what Strobe saw in the project."""

    language: str
    build_system: str
    test_files: list[str]


@dataclass
class LiveProgress:
    """Counts a running suite has reported so far, updated from its output lines by the adapter."""

    phase: Phase = Phase.COMPILING
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    current_test: str | None = None
    current_started_ns: int | None = None  # time.monotonic_ns() when current_test started

    def start(self, name: str, now_ns: int) -> None:
        self.phase = Phase.RUNNING
        self.current_test, self.current_started_ns = name, now_ns

    def finish(self, outcome: Outcome) -> None:
        self.count(outcome)
        self.current_test = self.current_started_ns = None

    def count(self, outcome: Outcome) -> None:
        """A finished test counted without touching the current one: for runners that report results apart from
        starts (Jest prints a file's results when the file ends, while another worker runs another test)."""
        self.phase = Phase.RUNNING
        if outcome is Outcome.PASSED:
            self.passed += 1
        elif outcome is Outcome.FAILED:
            self.failed += 1
        else:
            self.skipped += 1

    def ended(self, name: str) -> None:
        """`name` is no longer running: cleared if it is the current test (not if another started since)."""
        if self.current_test == name:
            self.current_test = self.current_started_ns = None
