"""Vitest.

`vitest run` (never watch mode) with two reporters: `json` writes the report Strobe reads (the same shape as
Jest's, with `--includeTaskLocation` adding each test's line), `verbose` prints a line per finished test to
stdout for live counts (with NO_COLOR=1: Vitest colours its console even into a pipe). Tests are named
"describe > title", as Vitest 5 prints and matches them. Nothing in Vitest's console marks a test's start, so
Strobe adds a tiny reporter of its own (written into the run's report dir): its onTestCaseReady and
onTestCaseResult (Vitest 3+) print the running test's full name to stderr, the current test of
debug_test_status and the stuck detector.

Vitest 5 asks for Node 22.12+; on Node 20 it runs, but its console reporters crash ("Map.groupBy is not a
function") while printing the failure summary. That happens after the JSON report is written, so results are
unaffected; only the console log ends in that error.

Levels: Vitest has none; Strobe passes the directories named after the level (test/unit, ...) as Vitest's
file filters (substrings of a test file's path relative to the project).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from strobe.testing.adapters import _node
from strobe.testing.adapters.base import FinishedRun, StackKind, TestAdapter
from strobe.testing.model import LiveProgress, Outcome, ParsedRun, Phase, ProjectInfo, TestCase, TestCommand, TestLevel

_REPORT = "vitest.json"
_REPORTER = "strobe-vitest-progress.mjs"
_TAG = "[strobe-vitest] "
_REPORTER_SOURCE = """\
// Written by Strobe for one test run: a stderr line as each test starts and ends, for live progress.
const say = (event, testCase) => process.stderr.write(`STROBE_TAG${event} ${JSON.stringify(testCase.fullName)}\\n`);
export default class StrobeProgress {
  onTestCaseReady(testCase) { say("start", testCase); }
  onTestCaseResult(testCase) { say("end", testCase); }
}
""".replace("STROBE_TAG", _TAG)
_SEPARATOR = " > "
_SEPARATOR_EITHER = "(?: > | )"
# Verbose results: " ✓ test/a.test.js:5 > suite > name 2ms", then the same with a cross (U+00D7) for a failure,
# ↓ for a skipped test and □ for a todo.
_RESULT = re.compile(r"^\s*(?P<mark>[✓×↓□])\s+(?P<name>.+?)(?:\s+\d+(?:\.\d+)?m?s)?$")
_FILE_SUMMARY = re.compile(r"\(\d+ tests?\b")  # " ✓ test/a.test.js (5 tests) 3ms": a file, not a test
_MARKS = {"✓": Outcome.PASSED, "×": Outcome.FAILED}
_TEST_FILE = re.compile(r"\.(?:test|spec)\.[cm]?[jt]sx?$")


class VitestAdapter(TestAdapter):
    name = "vitest"
    display_name = "Vitest"
    language = "javascript"
    stack_kind = StackKind.NODE

    def detect(self, project_root: Path, command: str | None) -> int:
        """95 for vitest.config.* (or vite.config.* in a project depending on vitest, since Vitest reads its
        `test` section), or a script running vitest; 89 when vitest is only a dependency."""
        score = _node.detect_score(project_root, "vitest", ("vitest.config.*", "vitest.workspace.*"), 95)
        if score and _node.has_file(project_root, "vite.config.*"):
            return 95
        return score

    def _command(self, project_root: Path, report_dir: Path, extra: list[str]) -> TestCommand:
        report = report_dir / _REPORT
        reporter = _node.write_helper(report_dir, _REPORTER, _REPORTER_SOURCE)
        argv = [*_node.tool_argv(project_root, "vitest"), "run", "--reporter=json", "--reporter=verbose",
                f"--reporter={reporter}",
                f"--outputFile.json={report}", "--includeTaskLocation", *extra]
        return TestCommand(argv=argv, cwd=project_root, env={"NO_COLOR": "1"}, report=report)

    def suite_command(self, project_root: Path, level: TestLevel | None, command: str | None,
                      report_dir: Path) -> TestCommand:
        filters: list[str] = []
        if level is not None:
            filters = [f"{d}/" for d in _node.level_dirs(project_root, level, self.display_name)]
        return self._command(project_root, report_dir, filters)

    def single_test_command(self, project_root: Path, test: str, command: str | None,
                            report_dir: Path) -> TestCommand:
        """`-t` matches a regex against the full name; escaped, it is a substring."""
        return self._command(project_root, report_dir, ["-t", self._pattern(test)])

    def rerun_command(self, project_root: Path, test: str, command: str | None) -> str:
        return shlex.join(["npx", "vitest", "run", "-t", self._pattern(test)])

    @staticmethod
    def _pattern(test: str) -> str:
        """Vitest 5 joins a test's full name with " > " (as Strobe names it), Vitest 4 and older with a space:
        the pattern accepts either between the parts of a name."""
        return _SEPARATOR_EITHER.join(_node.js_regex_escape(part) for part in test.split(_SEPARATOR))

    def parse(self, run: FinishedRun) -> ParsedRun:
        report = _node.load_json(run.command.report)
        if not isinstance(report, dict):
            return _node.missing_report(self.display_name, run, "Vitest stopped before running any test (a bad "
                                        "option, a broken vitest.config?); its output below says why.")
        cases, broken = _node.jest_style_cases(report, run.command.cwd, _SEPARATOR)
        cases = _node.drop_filtered(cases, run.command.argv, "-t")
        return _node.broken_files_result(self.display_name, cases, broken, run)

    def on_line(self, line: str, stream: str, progress: LiveProgress, now_ns: int) -> None:
        """The verbose reporter prints " RUN  v5.1.1 <root>" once the tests start, a line per finished test
        (✓ passed, U+00D7 failed, ↓ skipped, □ todo), and " Test Files  ..." in the summary; Strobe's reporter
        says on stderr which test starts and ends."""
        if _node.follow_starts(line, stream, _TAG, progress, now_ns):
            return
        text = _node.strip_ansi(line.rstrip())
        stripped = text.strip()
        if stripped.startswith("RUN "):
            progress.phase = Phase.RUNNING
            return
        if stripped.startswith("Test Files "):
            progress.phase = Phase.SUITES_FINISHED
            return
        match = _RESULT.match(text)
        if match and not _FILE_SUMMARY.search(match["name"]):
            progress.count(_MARKS.get(match["mark"], Outcome.SKIPPED))

    def suggest_traces(self, case: TestCase) -> list[str]:
        return _node.suggest(case)

    def project_info(self, project_root: Path) -> ProjectInfo:
        return ProjectInfo(language=self.language, build_system="vitest",
                           test_files=_node.test_files(project_root, _TEST_FILE))
