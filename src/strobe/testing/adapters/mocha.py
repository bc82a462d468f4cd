"""Mocha.

Results come from Mocha's JSON reporter, written to a file in the run's report dir (`--reporter-option
output=<file>`, supported since Mocha 9). Mocha runs one reporter at a time and the JSON one prints nothing
until the run is over, so for live progress Strobe also writes a tiny root-hook plugin into the report dir and
`--require`s it: it prints a line to stderr as each test starts and ends, which gives the stuck detector the
name of the running test. Pending tests (`it.skip`, `it("name")` without a body) run no hooks: they are counted
from the report only.

The JSON report has no line numbers: a failure is located at the first stack frame in its test file.

Levels: Mocha has none; Strobe runs the spec files under directories named after the level (test/unit, ...).
Spec paths given on the command line are added to those of .mocharc rather than replacing them, so the other
files are excluded with a negated `--ignore` glob instead.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from strobe.testing.adapters import _node
from strobe.testing.adapters.base import FinishedRun, StackKind, TestAdapter
from strobe.testing.model import LiveProgress, Outcome, ParsedRun, Phase, ProjectInfo, TestCase, TestCommand, TestLevel

_REPORT = "mocha.json"
_PLUGIN = "strobe-mocha-progress.cjs"
_TAG = "[strobe-mocha] "
# CommonJS (.cjs) so it loads in "type": "module" projects too.
_PLUGIN_SOURCE = """\
// Written by Strobe for one test run: a stderr line as each test starts and ends, for live progress.
"use strict";
const say = (event, test) =>
  process.stderr.write(`STROBE_TAG${event} ${JSON.stringify(test ? test.fullTitle() : "")}\\n`);
exports.mochaHooks = {
  beforeEach() { say("start", this.currentTest); },
  afterEach() {
    const state = this.currentTest.state;
    say(state === "passed" || state === "failed" ? state : "skipped", this.currentTest);
  },
  afterAll() { say("finished"); },
};
""".replace("STROBE_TAG", _TAG)
_NO_FILES = "No test files found"  # Mocha's words when its spec globs match nothing (it then writes no report)
_EVENTS = {"passed": Outcome.PASSED, "failed": Outcome.FAILED, "skipped": Outcome.SKIPPED}
_SPEC_FILE = re.compile(r"\.(?:test|spec)\.[cm]?[jt]s$")


class MochaAdapter(TestAdapter):
    name = "mocha"
    display_name = "Mocha"
    language = "javascript"
    stack_kind = StackKind.NODE

    def detect(self, project_root: Path, command: str | None) -> int:
        """90 for .mocharc.*, a `mocha` section in package.json or a script running mocha; 84 when mocha is
        only a dependency."""
        return _node.detect_score(project_root, "mocha", (".mocharc.*",), 90)

    def _command(self, project_root: Path, report_dir: Path, extra: list[str]) -> TestCommand:
        report = report_dir / _REPORT
        plugin = _node.write_helper(report_dir, _PLUGIN, _PLUGIN_SOURCE)
        argv = [*_node.tool_argv(project_root, "mocha"), "--reporter", "json", "--reporter-option",
                f"output={report}", "--require", str(plugin), *extra]
        return TestCommand(argv=argv, cwd=project_root, report=report)

    def suite_command(self, project_root: Path, level: TestLevel | None, command: str | None,
                      report_dir: Path) -> TestCommand:
        extra: list[str] = []
        if level is not None:
            dirs = _node.level_dirs(project_root, level, self.display_name)
            inside = dirs[0] if len(dirs) == 1 else "{" + ",".join(dirs) + "}"
            extra = ["--ignore", f"!**/{inside}/**"]  # ignore every spec file outside the level's directories
        return self._command(project_root, report_dir, extra)

    def single_test_command(self, project_root: Path, test: str, command: str | None,
                            report_dir: Path) -> TestCommand:
        """`--fgrep` keeps the tests whose full title ("describe title") contains `test`: a plain substring,
        nothing to escape."""
        return self._command(project_root, report_dir, ["--fgrep", test])

    def rerun_command(self, project_root: Path, test: str, command: str | None) -> str:
        return shlex.join(["npx", "mocha", "--fgrep", test])

    def parse(self, run: FinishedRun) -> ParsedRun:
        report = _node.load_json(run.command.report)
        if not isinstance(report, dict) and _NO_FILES in run.stderr:
            return ParsedRun([])  # nothing to run: the runner answers noTests with the project's test files
        if not isinstance(report, dict):
            return _node.missing_report(self.display_name, run, "Mocha stopped before running the tests (a test "
                                        "file that does not load, a bad .mocharc?); its output below says why.")
        cwd = run.command.cwd
        cases: list[TestCase] = []
        for key, outcome in (("failures", Outcome.FAILED), ("passes", Outcome.PASSED), ("pending", Outcome.SKIPPED)):
            cases += [self._case(test, outcome, cwd) for test in report.get(key) or [] if isinstance(test, dict)]
        return ParsedRun(cases)

    @staticmethod
    def _case(test: dict[str, Any], outcome: Outcome, cwd: Path) -> TestCase:
        test_file = str(test.get("file") or "") or None
        duration = test.get("duration")
        case = TestCase(str(test.get("fullTitle") or test.get("title") or ""), outcome,
                        duration_ms=float(duration) if isinstance(duration, int | float) else None,
                        file=_node.relative(test_file, cwd) if test_file else None)
        if outcome is Outcome.FAILED:
            raw = test.get("err")
            err: dict[str, Any] = raw if isinstance(raw, dict) else {}
            stack = str(err.get("stack") or "")
            message, case.stack = _node.split_error(stack) if stack else ("", [])
            case.message = message or _node.strip_ansi(str(err.get("message") or "")).strip() or "failed"
            _node.locate(case, test_file, cwd)
        return case

    def on_line(self, line: str, stream: str, progress: LiveProgress, now_ns: int) -> None:
        """The lines of Strobe's root-hook plugin: "start <json title>", "passed|failed|skipped <json title>",
        "finished"."""
        parsed = _node.tagged_line(line, _TAG) if stream == "stderr" else None
        if parsed is None:
            return
        event, name = parsed
        if event == "start":
            progress.start(name, now_ns)
        elif event in _EVENTS:
            progress.finish(_EVENTS[event])
        elif event == "finished":
            progress.phase = Phase.SUITES_FINISHED

    def suggest_traces(self, case: TestCase) -> list[str]:
        return _node.suggest(case)

    def project_info(self, project_root: Path) -> ProjectInfo:
        return ProjectInfo(language=self.language, build_system="mocha",
                           test_files=_node.test_files(project_root, _SPEC_FILE))
