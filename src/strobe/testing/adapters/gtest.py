"""GoogleTest: a compiled C++ test binary run with `--gtest_output=xml:<file>`.

The XML (not the JSON) report is used: every GoogleTest since 1.7 writes it, and only it carries the skip
reason. Test names are `Suite.Test` (what --gtest_filter matches, case-sensitively). GTEST_SKIP() is
SKIPPED with its message; DISABLED_ tests, which the report lists as not run, are SKIPPED too, so the
summary shows they exist.

Levels are test-suite names: a suite whose name contains Unit / Integration / E2e (or EndToEnd), in any of
the usual casings, belongs to that level — e.g. `TEST(ParserUnit, …)`, `TEST_F(DbIntegration, …)`.

GoogleTest writes its report only when the run ends, so a binary that crashes leaves none; the console
(flushed after every line) still names the test that was running, which the error then points at.
"""

from __future__ import annotations

import re
import shlex
import xml.etree.ElementTree as ET
from pathlib import Path

from strobe.errors import ValidationError
from strobe.testing.adapters import _native
from strobe.testing.adapters.base import MAX_SUGGESTIONS, FinishedRun, TestAdapter, suggest_from_stack, tail
from strobe.testing.model import LiveProgress, Outcome, ParsedRun, Phase, ProjectInfo, TestCase, TestCommand, TestLevel

# Strings every GoogleTest binary carries: its flag's name (static builds) or testing:: symbols (shared libgtest).
MARKERS = (b"gtest_list_tests", b"_ZN7testing")
_INCLUDES = ("gtest/gtest.h",)
_BUILD_NEEDLES = ("gtest", "GTest", "googletest", "GoogleTest")
_LEVEL_FILTERS = {
    TestLevel.UNIT: "*Unit*.*:*unit*.*:*UNIT*.*",
    TestLevel.INTEGRATION: "*Integration*.*:*integration*.*:*INTEGRATION*.*",
    TestLevel.E2E: "*E2e*.*:*E2E*.*:*e2e*.*:*EndToEnd*.*",
}
_LOCATION = re.compile(r"^(.+?):(\d+)$")
_RUN = re.compile(r"^\[ RUN      \] (\S.*)$")
_DONE = re.compile(r"^\[ {2}(FAILED|SKIPPED) {1,2}\] (\S.*) \(\d+ ms\)$|^\[ {7}(OK) \] (\S.*) \(\d+ ms\)$")
_DISABLED = re.compile(r"^\[ DISABLED \] (\S.*)$")
_ALL_DONE = re.compile(r"^\[==========\] \d+ tests? from \d+ test suites? ran\.")


def name_filter(test: str) -> str:
    """--gtest_filter for every test whose `Suite.Test` name contains `test`. `:` and `-` are filter syntax
    (pattern separator, negative patterns) and never part of a test name: they become `?` (any character)."""
    return "*" + re.sub(r"[:\-]", "?", test) + "*"


class GTestAdapter(TestAdapter):
    name = "gtest"
    display_name = "GoogleTest"
    language = "cpp"

    def detect(self, project_root: Path, command: str | None) -> int:
        if command is not None:
            try:
                argv = _native.split_command(command)
            except ValidationError:  # a malformed command is reported by suite_command, not here
                return 0
            path = _native.executable_path(project_root, argv[0])
            if path is None:  # not built yet: suite_command will say so if the project uses GoogleTest
                return self._score_from_files(project_root)
            if not _native.has_markers(path, MARKERS):
                return 0
            listed = _native.probe([str(path), "--gtest_list_tests"], project_root)
            return 85 if listed is not None and listed[0] == 0 else 0
        return self._score_from_files(project_root)

    def _score_from_files(self, project_root: Path) -> int:
        if _native.build_files_mentioning(project_root, _BUILD_NEEDLES):
            return 85
        return 60 if _native.sources_mentioning(project_root, _INCLUDES) else 0

    def _command(self, project_root: Path, command: str | None, test_filter: str | None,
                 report_dir: Path) -> TestCommand:
        argv = _native.binary_argv(project_root, command, MARKERS, self.display_name)
        report = (report_dir / "gtest.xml").absolute()
        args = [f"--gtest_output=xml:{report}", "--gtest_color=no"]
        if test_filter:
            args.append(f"--gtest_filter={test_filter}")
        return TestCommand([*argv, *args], cwd=project_root, report=report)

    def suite_command(self, project_root: Path, level: TestLevel | None, command: str | None,
                      report_dir: Path) -> TestCommand:
        return self._command(project_root, command, _LEVEL_FILTERS[level] if level else None, report_dir)

    def single_test_command(self, project_root: Path, test: str, command: str | None,
                            report_dir: Path) -> TestCommand:
        return self._command(project_root, command, name_filter(test), report_dir)

    def rerun_command(self, project_root: Path, test: str, command: str | None) -> str:
        return f"{command or '<path to the test binary>'} {shlex.quote('--gtest_filter=' + name_filter(test))}"

    def on_line(self, line: str, stream: str, progress: LiveProgress, now_ns: int) -> None:
        """GoogleTest's console prints `[ RUN      ] S.T` then `[       OK ] S.T (N ms)` (or FAILED/SKIPPED)
        for each test; the end-of-run summary repeats names without the `(N ms)`, so nothing is counted twice."""
        if stream != "stdout":
            return
        line = line.rstrip("\r")
        if match := _RUN.match(line):
            progress.start(match.group(1), now_ns)
        elif match := _DONE.match(line):
            word = match.group(1) or match.group(3)
            progress.finish({"OK": Outcome.PASSED, "FAILED": Outcome.FAILED}.get(word, Outcome.SKIPPED))
        elif _DISABLED.match(line):
            progress.skipped += 1
        elif _ALL_DONE.match(line):
            progress.phase = Phase.SUITES_FINISHED

    def parse(self, run: FinishedRun) -> ParsedRun:
        report = run.command.report
        try:
            root = ET.parse(report).getroot() if report is not None and report.is_file() else None
        except ET.ParseError:
            root = None
        if root is None:
            return ParsedRun([], error=self._no_report_error(run))
        return ParsedRun([_case(elem) for elem in root.iter("testcase")])

    def _no_report_error(self, run: FinishedRun) -> str:
        how = _native.describe_exit(run.exit_code)
        output = "\n".join(part for part in (run.stdout, run.stderr) if part.strip())
        started = [m.group(1) for m in map(_RUN.match, run.stdout.splitlines()) if m]
        finished = sum(1 for line in run.stdout.splitlines() if _DONE.match(line))
        if started and len(started) > finished:
            hint = (f"It was running {started[-1]} (the last test it started; {finished} had finished). Rerun that "
                    f"test alone with `test: \"{started[-1]}\"`, or under debug_launch, to see where it dies.")
        elif started:
            hint = "Every test it started had finished: look at global destructors and test-environment teardown."
        else:
            hint = ("It stopped before running any test: check that `command` is a GoogleTest binary and look at "
                    "its output below (bad flag, global constructor, missing shared library?).")
        return f"The GoogleTest binary {how} without writing its XML report. {hint}\n{tail(output)}".rstrip()

    def suggest_traces(self, case: TestCase) -> list[str]:
        """The namespaces of the functions the failed assertion names (`calc::add(2, 2)` -> `calc::*`), then
        the test's source file."""
        out = _native.qualified_patterns(case.message)
        out += [p for p in suggest_from_stack(case, self.language) if p not in out]
        return out[:MAX_SUGGESTIONS]

    def project_info(self, project_root: Path) -> ProjectInfo:
        return _native.project_info(project_root, self.language, _INCLUDES)


def _case(elem: ET.Element) -> TestCase:
    suite, name = elem.get("classname", ""), elem.get("name", "")
    seconds = elem.get("time")
    case = TestCase(name=f"{suite}.{name}" if suite else name, outcome=Outcome.PASSED, file=elem.get("file"),
                    line=_int(elem.get("line")), duration_ms=float(seconds) * 1000 if seconds else None)
    failures = [_split_location(f.get("message") or f.text or "") for f in elem if f.tag in ("failure", "error")]
    skipped = elem.find("skipped")
    if failures:
        (file, line, text), *rest = failures
        case.outcome, case.file, case.line = Outcome.FAILED, file or case.file, line or case.line
        case.message = "\n".join([text or "failed"] + [f"also at {Path(f).name if f else '?'}:{n}: "
                                                      f"{t.splitlines()[0] if t else ''}" for f, n, t in rest[:4]])
    elif elem.get("status") == "notrun" or elem.get("result") == "suppressed":
        case.outcome = Outcome.SKIPPED
        case.message = "disabled (DISABLED_ prefix): run with --gtest_also_run_disabled_tests to include it"
    elif skipped is not None or elem.get("result") == "skipped":
        text = (skipped.get("message") or skipped.text or "") if skipped is not None else ""
        case.outcome, case.message = Outcome.SKIPPED, _split_location(text)[2] or "skipped (GTEST_SKIP)"
    return case


def _split_location(text: str) -> tuple[str | None, int | None, str]:
    """`t.cpp:5\\nExpected equality…` -> ("t.cpp", 5, "Expected equality…"); `unknown file` has no location."""
    first, _, rest = text.strip().partition("\n")
    match = _LOCATION.match(first)
    if match:
        return match.group(1), int(match.group(2)), rest.strip()
    if first == "unknown file":
        return None, None, rest.strip()
    return None, None, text.strip()


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None
