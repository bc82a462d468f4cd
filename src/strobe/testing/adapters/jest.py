"""Jest.

Results come from Jest's JSON report (`--json --outputFile`), with `--testLocationInResults` so every test
carries the line it is declared on, and `--passWithNoTests`, without which Jest writes no report when nothing
matches (Strobe then answers `noTests` rather than an error). The console reporter, made verbose, writes a
line per test to stderr as each file finishes: those are the live counts. Jest prints nothing as a test starts,
so Strobe also passes a tiny reporter of its own (written into the run's report dir) whose onTestCaseStart and
onTestCaseResult (Jest 29.6+, called live from the workers) print the running test's name to stderr: the
current test of debug_test_status and the stuck detector. `--reporters` replaces those of the project's
config, so `default` is named too; it is an array option, so it comes before any positional test-path pattern.

A failure is located at the first stack frame in its test file (the assertion), falling back to the declaration
line from the report.

Levels: Jest has none; Strobe runs the test files under directories named after the level (tests/unit, ...),
by giving Jest those paths as test-path patterns.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from strobe.testing.adapters import _node
from strobe.testing.adapters.base import FinishedRun, StackKind, TestAdapter
from strobe.testing.model import LiveProgress, Outcome, ParsedRun, Phase, ProjectInfo, TestCase, TestCommand, TestLevel

_REPORT = "jest.json"
_REPORTER = "strobe-jest-progress.cjs"
_TAG = "[strobe-jest] "
# CommonJS (.cjs) so Jest requires it in "type": "module" projects too. Names as the report's: titles joined by " ".
_REPORTER_SOURCE = """\
// Written by Strobe for one test run: a stderr line as each test starts and ends, for live progress.
"use strict";
const say = (event, t) =>
  process.stderr.write(`STROBE_TAG${event} ${JSON.stringify([...t.ancestorTitles, t.title].join(" "))}\\n`);
module.exports = class StrobeProgress {
  onTestCaseStart(test, info) { say("start", info); }
  onTestCaseResult(test, result) { say("end", result); }
};
""".replace("STROBE_TAG", _TAG)
# Verbose results: "  ✓ adds two numbers (3 ms)", "  ✕ fails", "  ○ skipped name", "  ✎ todo name".
_RESULT = re.compile(r"^\s+(?P<mark>[✓✕○✎√×])\s+(?P<name>.+?)(?:\s+\(\d+(?:\.\d+)?\s*m?s\))?$")
_MARKS = {"✓": Outcome.PASSED, "√": Outcome.PASSED, "✕": Outcome.FAILED, "×": Outcome.FAILED}
_TEST_FILE = re.compile(r"\.(?:test|spec)\.[cm]?[jt]sx?$")


class JestAdapter(TestAdapter):
    name = "jest"
    display_name = "Jest"
    language = "javascript"
    stack_kind = StackKind.NODE

    def detect(self, project_root: Path, command: str | None) -> int:
        """92 for jest.config.*, a `jest` section in package.json or a script running jest; 86 when jest is
        only a dependency (so a config file or script of another framework wins)."""
        return _node.detect_score(project_root, "jest", ("jest.config.*",), 92)

    def _command(self, project_root: Path, report_dir: Path, extra: list[str]) -> TestCommand:
        report = report_dir / _REPORT
        reporter = _node.write_helper(report_dir, _REPORTER, _REPORTER_SOURCE)
        argv = [*_node.tool_argv(project_root, "jest"), "--reporters=default", f"--reporters={reporter}",
                "--json", f"--outputFile={report}",
                "--testLocationInResults", "--verbose", "--passWithNoTests", *extra]
        return TestCommand(argv=argv, cwd=project_root, report=report)

    def suite_command(self, project_root: Path, level: TestLevel | None, command: str | None,
                      report_dir: Path) -> TestCommand:
        patterns: list[str] = []
        if level is not None:
            # Positional test-path regexes (every Jest version takes them; the flag was renamed in Jest 30).
            dirs = _node.level_dirs(project_root, level, self.display_name)
            patterns = ["|".join(f"/{_node.js_regex_escape(d)}/" for d in dirs)]
        return self._command(project_root, report_dir, patterns)

    def single_test_command(self, project_root: Path, test: str, command: str | None,
                            report_dir: Path) -> TestCommand:
        """`-t` matches a regex against "describe title"; escaped, it is a (case-insensitive) substring."""
        return self._command(project_root, report_dir, ["-t", _node.js_regex_escape(test)])

    def rerun_command(self, project_root: Path, test: str, command: str | None) -> str:
        return shlex.join(["npx", "jest", "-t", _node.js_regex_escape(test)])

    def parse(self, run: FinishedRun) -> ParsedRun:
        report = _node.load_json(run.command.report)
        if not isinstance(report, dict):
            return _node.missing_report(self.display_name, run, "Jest stopped before running any test (a bad "
                                        "option or config?); its output below says why.")
        cases, broken = _node.jest_style_cases(report, run.command.cwd, " ")
        cases = _node.drop_filtered(cases, run.command.argv, "-t")
        return _node.broken_files_result(self.display_name, cases, broken, run)

    def on_line(self, line: str, stream: str, progress: LiveProgress, now_ns: int) -> None:
        """Jest's console reporter writes to stderr: "PASS/FAIL <file>" as a file finishes, then one line per
        test of that file (verbose), and "Test Suites:" in the summary; Strobe's reporter says which test
        starts and ends."""
        if stream != "stderr" or _node.follow_starts(line, stream, _TAG, progress, now_ns):
            return
        text = _node.strip_ansi(line.rstrip())
        if text.startswith(("PASS ", "FAIL ")):
            progress.phase = Phase.RUNNING
            return
        if text.startswith("Test Suites:"):
            progress.phase = Phase.SUITES_FINISHED
            return
        match = _RESULT.match(text)
        if match:
            progress.count(_MARKS.get(match["mark"], Outcome.SKIPPED))

    def suggest_traces(self, case: TestCase) -> list[str]:
        return _node.suggest(case)

    def project_info(self, project_root: Path) -> ProjectInfo:
        return ProjectInfo(language=self.language, build_system="jest",
                           test_files=_node.test_files(project_root, _TEST_FILE))
