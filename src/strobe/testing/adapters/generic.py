"""Generic: the fallback for projects no framework adapter recognises. It runs the caller's own `command`
(a test binary, a script, `make test`, …) from the project root.

With no report format of its own, it offers one: the command is run with STROBE_TEST_REPORT set to a file
path, and a command that writes a JUnit XML report there gets per-test results (most runners can write JUnit).
Otherwise the exit code is all there is, and the run is a single case named after the command: passed on
exit 0, else failed with the output's tail as its message.

Filters are offered the same way, as environment variables the command may honour: STROBE_TEST_LEVEL
(unit/integration/e2e) and STROBE_TEST_FILTER (a name substring). A JUnit report is filtered by that substring
afterwards, so a single-test run shows only matching tests even when the command ignores it.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

from strobe.errors import ValidationError
from strobe.testing.adapters import _junit, _native
from strobe.testing.adapters.base import FinishedRun, TestAdapter, tail
from strobe.testing.model import Outcome, ParsedRun, TestCase, TestCommand, TestLevel

REPORT_ENV = "STROBE_TEST_REPORT"
LEVEL_ENV = "STROBE_TEST_LEVEL"
FILTER_ENV = "STROBE_TEST_FILTER"
_SHELL_SYNTAX = set("|&;<>()$`*?[]#~{}\n")


class GenericAdapter(TestAdapter):
    name = "generic"
    display_name = "Generic"
    language = "unknown"

    def detect(self, project_root: Path, command: str | None) -> int:
        return 1  # always possible, never preferred

    def _command(self, project_root: Path, command: str | None, env: dict[str, str],
                 report_dir: Path) -> TestCommand:
        report = (report_dir / "junit.xml").absolute()
        return TestCommand(_argv(project_root, command), cwd=project_root, env={REPORT_ENV: str(report), **env},
                           report=report)

    def suite_command(self, project_root: Path, level: TestLevel | None, command: str | None,
                      report_dir: Path) -> TestCommand:
        return self._command(project_root, command, {LEVEL_ENV: level.value} if level else {}, report_dir)

    def single_test_command(self, project_root: Path, test: str, command: str | None,
                            report_dir: Path) -> TestCommand:
        return self._command(project_root, command, {FILTER_ENV: test}, report_dir)

    def rerun_command(self, project_root: Path, test: str, command: str | None) -> str:
        """The command as the run ran it, from projectRoot; with STROBE_TEST_FILTER set to the test's name, unless
        the test is the single case named after the command (no JUnit report): then the command alone."""
        if command is None or not command.strip():
            return f"{FILTER_ENV}={shlex.quote(test)} <your test command>"
        try:
            argv = _argv(project_root, command)
        except ValidationError:  # the command no longer resolves: as the caller wrote it
            argv = _native.split_command(command)
        if test == _label(argv):
            return command if argv[:2] == ["/bin/sh", "-c"] else shlex.join(argv)
        # through the shell, a VAR=x prefix would reach only the first command of a pipeline or list
        return f"{FILTER_ENV}={shlex.quote(test)} {shlex.join(argv)}"

    def parse(self, run: FinishedRun) -> ParsedRun:
        label = _label(run.command.argv)
        output = "\n".join(part for part in (run.stdout, run.stderr) if part.strip())
        report = run.command.report
        if report is not None and report.is_file():
            try:
                cases = _junit.parse_junit(report)
            except _junit.JunitError as exc:
                return ParsedRun([], error=f"`{label}` wrote a report to ${REPORT_ENV}, but {exc}. Write JUnit "
                                           f"XML there, or nothing (then the exit code decides).\n{tail(output)}")
            reported_failure = any(case.outcome is Outcome.FAILED for case in cases)
            wanted = run.command.env.get(FILTER_ENV)
            if wanted:  # the command may have ignored the filter
                cases = [case for case in cases if wanted in case.name]
            if run.exit_code != 0 and not reported_failure:  # e.g. it crashed after writing the report
                cases.append(TestCase(label, Outcome.FAILED, message=(
                    f"{_native.describe_exit(run.exit_code)} although its JUnit report shows no failure:\n"
                    f"{tail(output, 20)}").rstrip()))
            return ParsedRun(cases)
        if run.exit_code in (126, 127):  # the shell's "not executable" / "not found"
            return ParsedRun([], error=f"`{label}` could not be started ({_native.describe_exit(run.exit_code)}: "
                                       f"{'not executable' if run.exit_code == 126 else 'command not found'}). "
                                       f"Check `command` and that it runs from projectRoot.\n{tail(output)}")
        if run.exit_code == 0:
            return ParsedRun([TestCase(label, Outcome.PASSED)])
        return ParsedRun([TestCase(label, Outcome.FAILED,
                                   message=f"{_native.describe_exit(run.exit_code)}:\n{tail(output, 20)}".rstrip())])


def _argv(project_root: Path, command: str | None) -> list[str]:
    """`command` as argv: through /bin/sh when it uses shell syntax (pipes, &&, globs, variables, VAR=x
    prefixes), else split directly so the test process itself is the child (what tracing attaches to)."""
    if command is None or not command.strip():
        from strobe.testing.adapters import all_adapters  # the registry imports this module: import late

        known = ", ".join(sorted(a.display_name for a in all_adapters() if a.name != GenericAdapter.name))
        raise ValidationError(
            f"No test framework was detected in {project_root}, so `command` is required: the shell command or test "
            f"binary that runs the tests, from projectRoot (e.g. `make test`, `./run_tests.sh`, `build/tests`). "
            f"For per-test results it may write a JUnit XML report to ${REPORT_ENV}. Frameworks detected "
            f"automatically: {known}; pass `framework` to choose one.")
    argv = _native.split_command(command)
    if _SHELL_SYNTAX & set(command) or "=" in argv[0]:
        return ["/bin/sh", "-c", command]
    path = _native.executable_path(project_root, argv[0])
    if path is None:
        raise ValidationError(f"`command` starts with {argv[0]!r}, which is neither a file under {project_root} nor "
                              f"a program on PATH. Pass a path relative to projectRoot (e.g. `./run_tests.sh`).")
    if not os.access(path, os.X_OK):
        raise ValidationError(f"`command` names {argv[0]!r}, which is not executable: `chmod +x` it, or run it "
                              f"through its interpreter (e.g. `sh {argv[0]}`).")
    if os.sep not in argv[0] and shutil.which(argv[0]) is None:  # a file in projectRoot named without ./
        argv[0] = str(path)
    return argv


def _label(argv: list[str]) -> str:
    """The command as the caller wrote it (near enough), to name the single exit-code case."""
    return argv[2] if argv[:2] == ["/bin/sh", "-c"] else shlex.join(argv)
