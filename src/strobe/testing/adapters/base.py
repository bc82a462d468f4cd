"""The contract every test framework adapter fulfils. One module per framework in this package; the
registry (adapters/__init__.py) lists them and picks the most confident for a project.

An adapter is stateless: the runner calls suite_command/single_test_command, runs the command, feeds each
output line to on_line (for live progress only), then calls parse with what the run left behind. Results
come from the framework's machine-readable report (JSON, XML, JUnit), never from console text alone.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from strobe.testing.model import LiveProgress, ParsedRun, ProjectInfo, TestCase, TestCommand, TestLevel


class StackKind(StrEnum):
    """How the stuck detector captures a hung test's thread stacks."""

    NATIVE = "native"  # OS-level (C, C++, Rust, Go): every thread's native backtrace
    PYTHON = "python"  # the Python interpreter's frames where a tool can read them, else native
    NODE = "node"  # JS runtimes: native stacks of the runtime's threads


@dataclass(frozen=True)
class FinishedRun:
    """What a finished test process left: its output, exit status (negative: killed by that signal) and the
    report file its command named (may be missing if the framework never got to write it)."""

    command: TestCommand
    stdout: str
    stderr: str
    exit_code: int


class TestAdapter(ABC):
    name: str  # what `framework` accepts: "cargo", "pytest", …
    display_name: str  # what the result shows: "Cargo", "pytest", …
    language: str
    stack_kind: StackKind = StackKind.NATIVE

    @abstractmethod
    def detect(self, project_root: Path, command: str | None) -> int:
        """0-100: how sure this adapter is that it runs the project's tests (highest wins; 0 = not at all).
        `command` is the caller's test binary, if given (Catch2/GoogleTest probe it)."""

    @abstractmethod
    def suite_command(self, project_root: Path, level: TestLevel | None, command: str | None,
                      report_dir: Path) -> TestCommand:
        """The whole suite, or one level of it. Reports go under `report_dir` (created, empty, owned by the run).
        Raise strobe.errors.ValidationError when the run cannot be built (e.g. Catch2 without `command`)."""

    @abstractmethod
    def single_test_command(self, project_root: Path, test: str, command: str | None,
                            report_dir: Path) -> TestCommand:
        """Only the tests whose name contains `test` (the framework's own filter; substring where it can)."""

    @abstractmethod
    def parse(self, run: FinishedRun) -> ParsedRun:
        """Read the report (and the exit status) into test cases. A report that is missing because the
        suite never ran gives ParsedRun([], error=...) with the output's tail, not an exception."""

    @abstractmethod
    def rerun_command(self, project_root: Path, test: str, command: str | None) -> str:
        """A shell command line a human would type to rerun one test."""

    def on_line(self, line: str, stream: str, progress: LiveProgress, now_ns: int) -> None:  # noqa: B027
        """One line of the running suite's output ("stdout"/"stderr"), for live progress. Default: nothing."""

    def suggest_traces(self, case: TestCase) -> list[str]:
        """Trace patterns worth a traced rerun of this failing test: from its stack's frames, its file."""
        return suggest_from_stack(case, self.language)

    def project_info(self, project_root: Path) -> ProjectInfo:
        """For a run that found no tests: what the project looks like."""
        return ProjectInfo(language=self.language, build_system=self.name, test_files=[])


# ---- shared helpers ------------------------------------------------------------------------------

_SKIP_MODULES = ("std::", "core::", "alloc::", "test::", "__", "testing.", "runtime.", "node:", "internal/")
MAX_SUGGESTIONS = 5


def module_pattern(qualified: str, separator: str) -> str | None:
    """`a::b::f` -> `a::b::*` (or `a.b.f` -> `a.b.*`); None for an unqualified name."""
    head, sep, _ = qualified.rpartition(separator)
    return f"{head}{separator}*" if sep and head else None


def suggest_from_stack(case: TestCase, language: str) -> list[str]:
    """Default suggestions: the module of each user frame (skipping runtime/library frames), then the test's
    source file. At most MAX_SUGGESTIONS, most specific first."""
    separator = "." if language in ("python", "go", "javascript") else "::"
    out: list[str] = []
    for frame in case.stack:
        name = re.split(r"[\s(]", frame.strip(), maxsplit=1)[0]
        if not name or name.startswith(_SKIP_MODULES):
            continue
        pattern = module_pattern(name, separator)
        if pattern and pattern not in out:
            out.append(pattern)
    if case.file:
        pattern = f"@file:{Path(case.file).name}"
        if pattern not in out:
            out.append(pattern)
    return out[:MAX_SUGGESTIONS]


def tail(text: str, lines: int = 30) -> str:
    """The last `lines` lines of some output, for error messages."""
    return "\n".join(text.rstrip().splitlines()[-lines:])
