"""node:test, Node's built-in test runner (`node --test`).

Results come from Node's JUnit reporter, written to a file in the run's report dir; the spec reporter writes to
stdout at the same time, for the human-readable log and for live progress. Node's JUnit has neither file nor
line attributes and wraps each error in its own ERR_TEST_FAILURE, so a failure's message and frames are taken
from the wrapped error (the text after "cause:") and its location from the first frame in a test file.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import textwrap
import weakref
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from strobe.errors import ValidationError
from strobe.testing.adapters._junit import JunitError, parse_junit
from strobe.testing.adapters._node import (
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
    walk_dirs,
)
from strobe.testing.adapters.base import FinishedRun, StackKind, TestAdapter, tail
from strobe.testing.model import (
    LiveProgress,
    Outcome,
    ParsedRun,
    Phase,
    ProjectInfo,
    TestCase,
    TestCommand,
    TestLevel,
)

SEPARATOR = " > "  # between a suite's name and its tests' in a case's name
_TEST_NAME = re.compile(r"^(?:.+[.\-_])?test\.[cm]?js$|^test-.+\.[cm]?js$")
_JS = re.compile(r"\.[cm]?js$")
_NOT_MATCHING = "test name does not match pattern"  # how Node 20 reports the tests a name pattern left out
_WRAPPER = re.compile(r"^\[?Error \[ERR_TEST_FAILURE\]: ")
_QUOTED = re.compile(r"^'((?:\\.|[^'\\])*)'")
_SOURCES = re.compile(r"\.[cm]?[jt]sx?$")


def is_node_test_file(path: str) -> bool:
    """Node 20's default rule for which files `node --test` runs: *.test.js, *-test.js, *_test.js, test-*.js,
    test.js (and .cjs/.mjs), or any .js/.cjs/.mjs file under a directory named test."""
    parts = Path(path).parts
    return bool(parts) and (bool(_TEST_NAME.match(parts[-1])) or ("test" in parts[:-1] and bool(_JS.search(parts[-1]))))


def _test_files(project_root: Path) -> list[str]:
    found: list[str] = []
    for directory in walk_dirs(project_root):
        for entry in sorted(os.listdir(directory)):
            relative_path = str((directory / entry).relative_to(project_root))
            if is_node_test_file(relative_path) and (directory / entry).is_file():
                found.append(relative_path)
    return found


@dataclass
class _SpecState:
    """What the spec reporter has opened (suites and tests with subtests, as (indent, name)): their closing
    lines look like results but are not tests."""

    open_parents: list[tuple[int, str]] = field(default_factory=list)
    summary_reached: bool = False


_spec_states: dict[int, _SpecState] = {}


def _spec_state(progress: LiveProgress) -> _SpecState:
    """Per-run reader state, kept beside the run's progress object for as long as that lives: the adapter is
    shared by every run, so it holds no state of its own."""
    key = id(progress)
    state = _spec_states.get(key)
    if state is None:
        state = _spec_states[key] = _SpecState()
        weakref.finalize(progress, _spec_states.pop, key, None)
    return state


_SPEC_PARENT = re.compile(r"^(?P<indent>\s*)▶ (?P<name>.+?)(?: \([\d.]+ms\))?$")
_SPEC_RESULT = re.compile(r"^(?P<indent>\s*)(?P<mark>[✔✖﹣]) (?P<name>.+?)(?: \([\d.]+ms\))?(?: # (?P<directive>.*))?$")


class NodeTestAdapter(TestAdapter):
    name = "nodetest"
    display_name = "node:test"
    language = "javascript"
    stack_kind = StackKind.NODE

    def detect(self, project_root: Path, command: str | None) -> int:
        """80, below Jest, Vitest and Mocha (a project that names one of those means it): a package.json script
        running `node --test`, or test files importing node:test."""
        scripts = read_package_json(project_root).get("scripts")
        if isinstance(scripts, dict) and any(isinstance(s, str) and "node --test" in s for s in scripts.values()):
            return 80
        return 80 if imports_module(project_root, _SOURCES, "node:test") else 0

    def _command(self, project_root: Path, report_dir: Path, extra: list[str]) -> TestCommand:
        node = shutil.which("node")
        if node is None:
            raise ValidationError("Node.js is not installed: there is no `node` on PATH. Install Node 20 or newer.")
        report = report_dir / "junit.xml"
        argv = [node, "--test", "--test-reporter=junit", f"--test-reporter-destination={report}",
                "--test-reporter=spec", "--test-reporter-destination=stdout", *extra]
        return TestCommand(argv=argv, cwd=project_root, env={"NO_COLOR": "1"}, report=report)

    def suite_command(self, project_root: Path, level: TestLevel | None, command: str | None,
                      report_dir: Path) -> TestCommand:
        if level is None:
            return self._command(project_root, report_dir, [])
        # The level's test files by name, not its directories: Node 20 walks a directory argument while newer
        # versions read arguments as globs, and a list of files means the same to both.
        directories = level_dirs(project_root, level, self.display_name)
        files = [f for f in _test_files(project_root) if any(f.startswith(d + os.sep) for d in directories)]
        if not files:
            raise ValidationError(f"{', '.join(directories)} hold no files node --test would run (*.test.js, "
                                  f"*_test.js, test-*.js or .js files under a test/ directory).")
        return self._command(project_root, report_dir, files)

    def single_test_command(self, project_root: Path, test: str, command: str | None,
                            report_dir: Path) -> TestCommand:
        return self._command(project_root, report_dir, [f"--test-name-pattern={self._pattern(test)}"])

    @staticmethod
    def _pattern(test: str) -> str:
        """Node 20 matches the pattern against each test's own name, not its suites', so a full name
        "suite > test" filters on its last part; naming a suite runs every test in it."""
        return js_regex_escape(test.rsplit(SEPARATOR, 1)[-1])

    def rerun_command(self, project_root: Path, test: str, command: str | None) -> str:
        return shlex.join(["node", "--test", f"--test-name-pattern={self._pattern(test)}"])

    def parse(self, run: FinishedRun) -> ParsedRun:
        report, cwd = run.command.report, run.command.cwd
        try:
            cases = parse_junit(report, suite_separator=SEPARATOR) if report else []
            elements = list(ET.parse(report).getroot().iter("testcase")) if report else []
        except (JunitError, ET.ParseError):
            return missing_report(self.display_name, run, "Node did not get to run the tests; see its output.")
        kept: list[TestCase] = []
        broken: list[TestCase] = []
        for case, element in zip(cases, elements, strict=True):
            skipped = element.find("skipped")
            reason = skipped.get("message") if skipped is not None else None
            if skipped is not None and skipped.get("type") == "todo":  # a todo may fail without failing the run
                case.outcome, case.stack = Outcome.SKIPPED, []
                case.message = "todo" if reason in (None, "true") else f"todo: {reason}"
            elif reason == "true":  # `{ skip: true }` has no reason to show
                case.message = None
            if case.outcome is Outcome.SKIPPED and case.message == _NOT_MATCHING:
                continue  # left out by --test-name-pattern, not skipped by the test
            if case.outcome is Outcome.FAILED:
                if os.path.isabs(case.name) and Path(case.name).is_file():  # Node names a file that failed to load
                    # (or exited early) after the file itself
                    case.name = case.file = relative(case.name, cwd)
                    case.message = "The file failed to load or exited early (a syntax error, a failed import)."
                    broken.append(case)
                    continue
                self._tidy_failure(case, element, cwd)
            kept.append(case)
        if broken and not kept:
            files = ", ".join(case.name for case in broken)
            return ParsedRun([], error=f"node:test could not run {files}: {broken[0].message} Fix it and rerun."
                                       f"\n{tail(strip_ansi(run.stdout + run.stderr))}")
        return ParsedRun(kept + broken)

    @staticmethod
    def _tidy_failure(case: TestCase, element: ET.Element, cwd: Path) -> None:
        """Node's failure text wraps the real error: `Error [ERR_TEST_FAILURE]: <message> ... cause: <the error
        and its stack> ...`. The message and frames come from the cause when there is one."""
        problem = element.find("failure")
        text = (problem.text or "") if problem is not None else ""
        head, has_cause, cause = text.partition("cause: ")
        quoted = _QUOTED.match(cause)
        if quoted:  # the test threw a string, or Node's own reason (a timeout): `cause: 'reason'`
            case.message, case.stack = quoted[1].replace("\\'", "'"), []
            return
        message, frames = split_error(cause if has_cause else head)
        first, _, rest = message.partition("\n")
        if not has_cause:
            first = _WRAPPER.sub("", first).removesuffix(" {").removesuffix("]")  # `[Error [...]: text] {`
        lines = [first.strip(), *textwrap.dedent(rest).splitlines()]  # the cause is indented: keep diffs' shape
        message = "\n".join(line.rstrip() for line in lines if line.strip())
        if message:
            case.message = message
        case.stack = frames
        first_test_frame = next((f for f in map(parse_frame, frames)
                                 if f is not None and f.in_project and is_node_test_file(relative(f.file, cwd))), None)
        locate(case, first_test_frame.file if first_test_frame else None, cwd)

    def on_line(self, line: str, stream: str, progress: LiveProgress, now_ns: int) -> None:
        """Counts from the spec reporter's result lines: ✔ passed, ✖ failed, ﹣ skipped, and a directive after
        the duration (`# TODO`, a todo's reason) marks a todo, counted as skipped. A suite or a test with subtests
        opens with ▶ and its closing line is not a result; neither are the repeats in the final failure list."""
        if stream != "stdout":
            return
        text = strip_ansi(line.rstrip())
        state = _spec_state(progress)
        if state.summary_reached:
            return
        if text.startswith("ℹ tests "):
            progress.phase = Phase.SUITES_FINISHED
            return
        if text == "✖ failing tests:":
            state.summary_reached = True
            return
        parent = _SPEC_PARENT.match(text)
        if parent:
            progress.phase = Phase.RUNNING
            state.open_parents.append((len(parent["indent"]), parent["name"]))
            return
        result = _SPEC_RESULT.match(text)
        if result is None:
            return
        key = (len(result["indent"]), result["name"])
        if key in state.open_parents:
            del state.open_parents[state.open_parents.index(key):]
        elif result["mark"] == "﹣" or result["directive"] is not None:
            progress.finish(Outcome.SKIPPED)
        else:
            progress.finish(Outcome.PASSED if result["mark"] == "✔" else Outcome.FAILED)

    def suggest_traces(self, case: TestCase) -> list[str]:
        return suggest(case)

    def project_info(self, project_root: Path) -> ProjectInfo:
        files = _test_files(project_root)[:50]
        return ProjectInfo(language=self.language, build_system="node --test", test_files=files)
