"""Bun's test runner (`bun test`).

Results come from Bun's JUnit reporter (`--reporter=junit --reporter-outfile=<file>`), which gives each test's
file and line; the console stays as Bun prints it (on stderr), and its "(pass) suite > test" lines give live
progress. Bun is taken from the project's node_modules/.bin (walking up, the version the project pins), else
from PATH. Bun writes no report when a file fails to load, so a syntax error comes back as the run's error.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

from strobe.errors import ValidationError
from strobe.testing.adapters._junit import JunitError, parse_junit
from strobe.testing.adapters._node import (
    find_bin,
    imports_module,
    js_regex_escape,
    level_dirs,
    locate,
    missing_report,
    parse_frame,
    read_package_json,
    relative,
    split_error,
    strip_ansi,
    suggest,
    test_files,
)
from strobe.testing.adapters.base import FinishedRun, StackKind, TestAdapter, tail
from strobe.testing.model import LiveProgress, Outcome, ParsedRun, ProjectInfo, TestCase, TestCommand, TestLevel

SEPARATOR = " > "  # between describe blocks and the test in a case's name, as Bun's console shows them
_MARKERS = ("bun.lockb", "bun.lock", "bunfig.toml")
_TEST_FILE = re.compile(r"[._](?:test|spec)\.[cm]?[jt]sx?$")  # Bun's rule: *.test.*, *_test.*, *.spec.*, *_spec.*
_RESULT = re.compile(r"^\((?P<kind>pass|fail|skip|todo)\) (?P<name>.+?)(?: \[[\d.]+m?s\])?$")
_KINDS = {"pass": Outcome.PASSED, "fail": Outcome.FAILED, "skip": Outcome.SKIPPED, "todo": Outcome.SKIPPED}
_FILTER = "--test-name-pattern"
_NO_TESTS = "No tests found!"
_UNHANDLED = re.compile(r"^# Unhandled error between tests\n-+\n(?P<body>.*?)\n-+$", re.MULTILINE | re.DOTALL)
_SOURCE_LINE = re.compile(r"^\s*(?:\d+ \|.*|[~^]+)\s*$")  # the quoted source and its caret


def _unhandled_errors(output: str, cwd: Path) -> list[TestCase]:
    """Errors Bun hit outside any test (a file that failed to load, an exception between tests): its report
    leaves them out, so the run would look green. They come from its console block instead, each as a failed
    case named after the file it points to."""
    found = []
    for block in _UNHANDLED.finditer(output):
        lines = [line for line in block["body"].splitlines() if line.strip() and not _SOURCE_LINE.match(line)]
        message, frames = split_error("\n".join(lines))
        frame = next((f for f in map(parse_frame, frames) if f is not None and f.in_project), None)
        name = relative(frame.file, cwd) if frame else "(between tests)"
        found.append(TestCase(name, Outcome.FAILED, file=name if frame else None, line=frame.line if frame else None,
                              message=message.removeprefix("error: ") or "an unhandled error", stack=frames))
    return found


def _bun(project_root: Path) -> str:
    found = find_bin(project_root, "bun")
    tool = str(found) if found else shutil.which("bun")
    if tool is None:
        raise ValidationError(f"Bun is not installed: no `bun` in node_modules/.bin at or above {project_root}, nor "
                              f"on PATH. Install it (https://bun.sh, or `npm i -D bun`) or pick another framework "
                              f"with `framework`.")
    return tool


def _pattern(test: str) -> str:
    """Bun matches its pattern against the full name, describe blocks and test joined by spaces."""
    return js_regex_escape(test.replace(SEPARATOR, " "))


class BunAdapter(TestAdapter):
    name = "bun"
    display_name = "Bun"
    language = "javascript"
    stack_kind = StackKind.NODE

    def detect(self, project_root: Path, command: str | None) -> int:
        """85 for Bun's lockfile or bunfig.toml, or a package.json that runs `bun test` or names Bun as its
        package manager; 80 when only test files importing bun:test say so."""
        if any((project_root / marker).is_file() for marker in _MARKERS):
            return 85
        package = read_package_json(project_root)
        scripts = package.get("scripts")
        script = scripts.get("test") if isinstance(scripts, dict) else None
        manager = package.get("packageManager")
        if (isinstance(script, str) and script.startswith("bun test")) or (
                isinstance(manager, str) and manager.startswith("bun@")):
            return 85
        return 80 if imports_module(project_root, _TEST_FILE, "bun:test") else 0

    def _command(self, project_root: Path, report_dir: Path, extra: list[str]) -> TestCommand:
        report = report_dir / "junit.xml"
        argv = [_bun(project_root), "test", "--reporter=junit", f"--reporter-outfile={report}", *extra]
        return TestCommand(argv=argv, cwd=project_root, env={"NO_COLOR": "1"}, report=report)

    def suite_command(self, project_root: Path, level: TestLevel | None, command: str | None,
                      report_dir: Path) -> TestCommand:
        # "./" makes Bun read an argument as a path; a bare word filters file names by substring
        paths = [f"./{d}" for d in level_dirs(project_root, level, self.display_name)] if level is not None else []
        return self._command(project_root, report_dir, paths)

    def single_test_command(self, project_root: Path, test: str, command: str | None,
                            report_dir: Path) -> TestCommand:
        return self._command(project_root, report_dir, [_FILTER, _pattern(test)])

    def rerun_command(self, project_root: Path, test: str, command: str | None) -> str:
        bun = _bun(project_root)
        tool = "bun" if shutil.which("bun") == bun else relative(bun, project_root)
        return shlex.join([tool, "test", _FILTER, _pattern(test)])

    def parse(self, run: FinishedRun) -> ParsedRun:
        cwd = run.command.cwd
        output = strip_ansi(run.stderr + "\n" + run.stdout)
        broken = _unhandled_errors(output, cwd)
        try:
            cases = parse_junit(run.command.report, suite_separator=SEPARATOR) if run.command.report else []
        except JunitError:
            if _NO_TESTS in output:
                return ParsedRun([])  # the runner answers noTests, with project_info
            if not broken:
                return missing_report(self.display_name, run, "Bun did not get to run the tests; fix what its "
                                      "output shows and rerun.")
            cases = []
        if broken and not cases:
            files = ", ".join(dict.fromkeys(case.name for case in broken))
            return ParsedRun([], error=f"Bun could not run {files}: {broken[0].message}\nFix it (a syntax error, a "
                                       f"failed import?) and rerun.\n{tail(output)}")
        for case in cases:
            if case.file:  # the outermost suite is the file: keep the describe blocks and the test
                case.name = case.name.removeprefix(case.file + SEPARATOR)
                case.file = relative(case.file, cwd)
            if case.outcome is Outcome.FAILED:
                _, case.stack = split_error("\n".join(case.stack))
                locate(case, case.file, cwd)
        argv = run.command.argv
        if _FILTER in argv:  # Bun reports the tests its pattern left out as skipped: drop them
            selected = re.compile(argv[argv.index(_FILTER) + 1])
            cases = [c for c in cases if c.outcome is not Outcome.SKIPPED
                     or selected.search(c.name.replace(SEPARATOR, " "))]
        return ParsedRun(cases + broken)

    def on_line(self, line: str, stream: str, progress: LiveProgress, now_ns: int) -> None:
        """Bun prints "(pass|fail|skip|todo) suite > test [1.2ms]" as each test ends."""
        match = _RESULT.match(strip_ansi(line.strip()))
        if match:
            progress.finish(_KINDS[match["kind"]])

    def suggest_traces(self, case: TestCase) -> list[str]:
        return suggest(case)

    def project_info(self, project_root: Path) -> ProjectInfo:
        return ProjectInfo(language=self.language, build_system="bun", test_files=test_files(project_root, _TEST_FILE))
