"""Catch2: a compiled C++ test binary (the caller's `command`) run with its XML reporter.

Catch2 v2 writes the XML report as it goes and flushes it after every element, so a binary killed mid-run
(a crash Catch2 couldn't catch, or the stuck detector) still leaves the tests that finished, and the open
<TestCase> names the test that was running; parse() reads such a truncated report rather than discarding it.

Outcomes. Catch2 v2 has no "skipped": its tests either pass or fail, `[.]`-hidden tests are opt-in and never
appear in a whole-suite report (so they are not reported at all), and `[!mayfail]` tests may fail without
failing the run. Such an allowed failure is reported as SKIPPED with the failed assertion as its reason:
PASSED would hide a broken check, FAILED would contradict Catch2's own verdict and exit status. A
`[!shouldfail]` test that failed is PASSED (what it expected). Catch2 v3's SKIP() maps to SKIPPED.

Levels are tags: `[unit]`, `[integration]`, `[e2e]`.
"""

from __future__ import annotations

import re
import shlex
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from strobe.errors import ValidationError
from strobe.testing.adapters import _native
from strobe.testing.adapters.base import MAX_SUGGESTIONS, FinishedRun, TestAdapter, suggest_from_stack, tail
from strobe.testing.model import Outcome, ParsedRun, ProjectInfo, TestCase, TestCommand, TestLevel

# Strings every Catch2 binary carries: a CLI option's text (static builds) or the mangled Catch:: prefix.
MARKERS = (b"--list-test-names-only", b"libidentify", b"_ZN5Catch")
_INCLUDES = ("catch2/catch.hpp", "catch2/catch_all.hpp", "catch2/catch_test_macros.hpp", '"catch.hpp"',
             "<catch.hpp>")
_BUILD_NEEDLES = ("Catch2", "catch2")
_VERSION = re.compile(r"^version:\s*(\d+)\.", re.MULTILINE)
_SPEC_SPECIALS = re.compile(r'([\\,\[\]"])')  # characters the test-spec parser treats as syntax


def catch_major_version(binary: str, cwd: Path) -> int | None:
    """2 or 3 from `<binary> --libidentify` (both versions support it); None if it isn't a Catch2 binary."""
    result = _native.probe([binary, "--libidentify"], cwd)
    if result is None or result[0] != 0 or "framework:" not in result[1] or "Catch" not in result[1]:
        return None
    match = _VERSION.search(result[1])
    return int(match.group(1)) if match else 2


def name_spec(test: str) -> str:
    """A Catch2 test spec matching every test whose name contains `test` (Catch2 matches case-insensitively;
    `*` is only a wildcard at either end, and `\\ , [ ] "` must be escaped)."""
    escaped = _SPEC_SPECIALS.sub(r"\\\1", test)
    return f"*{escaped}*"


@dataclass
class _Finding:
    """One failed assertion, exception, fatal signal or skip inside a test case."""

    kind: str  # "failure" or "skip"
    text: str
    file: str | None
    line: int | None


class Catch2Adapter(TestAdapter):
    name = "catch2"
    display_name = "Catch2"
    language = "cpp"

    def detect(self, project_root: Path, command: str | None) -> int:
        if command is not None:
            try:
                argv = _native.split_command(command)
            except ValidationError:  # a malformed command is reported by suite_command, not here
                return 0
            path = _native.executable_path(project_root, argv[0])
            if path is None:  # not built yet: suite_command will say so if the project uses Catch2
                return 60 if self._mentioned(project_root) else 0
            if not _native.has_markers(path, MARKERS):
                return 0
            return 85 if catch_major_version(str(path), project_root) else 0
        return 60 if self._mentioned(project_root) else 0

    def _mentioned(self, project_root: Path) -> bool:
        return bool(_native.build_files_mentioning(project_root, _BUILD_NEEDLES)
                    or _native.sources_mentioning(project_root, _INCLUDES))

    def _command(self, project_root: Path, command: str | None, spec: list[str], report_dir: Path) -> TestCommand:
        argv = _native.binary_argv(project_root, command, MARKERS, self.display_name)
        report = (report_dir / "catch2.xml").absolute()
        # Only a binary carrying Catch2's strings is probed: a wrapper script might run everything instead.
        if _native.has_markers(Path(argv[0]), MARKERS) and catch_major_version(argv[0], project_root) == 3:
            reporter = ["--reporter", f"xml::out={report}"]
        else:
            reporter = ["--reporter", "xml", "--out", str(report)]
        return TestCommand([*argv, *spec, *reporter, "--durations", "yes"], cwd=project_root, report=report)

    def suite_command(self, project_root: Path, level: TestLevel | None, command: str | None,
                      report_dir: Path) -> TestCommand:
        return self._command(project_root, command, [f"[{level.value}]"] if level else [], report_dir)

    def single_test_command(self, project_root: Path, test: str, command: str | None,
                            report_dir: Path) -> TestCommand:
        return self._command(project_root, command, [name_spec(test)], report_dir)

    def rerun_command(self, project_root: Path, test: str, command: str | None) -> str:
        return f"{command or '<path to the test binary>'} {shlex.quote(name_spec(test))}"

    def parse(self, run: FinishedRun) -> ParsedRun:
        report = run.command.report
        text = report.read_text(errors="replace") if report is not None and report.is_file() else ""
        output = "\n".join(part for part in (run.stdout, run.stderr) if part.strip())
        if "<TestCase" not in text and "<OverallResults" not in text:
            return ParsedRun([], error=self._no_report_error(run, output))
        unfinished = f"did not finish: the test binary {_native.describe_exit(run.exit_code)} while it ran"
        return ParsedRun(_parse_report(text, unfinished))

    def _no_report_error(self, run: FinishedRun, output: str) -> str:
        how = _native.describe_exit(run.exit_code)
        if "Unrecognised token" in output or "Error(s) in input" in output:
            hint = "It rejected its arguments: check that `command` is a Catch2 v2/v3 test binary and its extra flags."
        elif run.exit_code < 0:
            hint = "It crashed before running any test: look at static initialisers (globals), or run it under " \
                   "debug_launch to see where."
        else:
            hint = "It stopped before running any test: its output below says why (a global constructor that " \
                   "exits, a missing file or library?)."
        return f"The Catch2 test binary {how} without writing its XML report. {hint}\n{tail(output)}".rstrip()

    def suggest_traces(self, case: TestCase) -> list[str]:
        """The namespaces of the functions the failing assertion calls, then the test's source file."""
        out = _native.qualified_patterns(case.message)
        out += [p for p in suggest_from_stack(case, self.language) if p not in out]
        return out[:MAX_SUGGESTIONS]

    def project_info(self, project_root: Path) -> ProjectInfo:
        return _native.project_info(project_root, self.language, _INCLUDES)


def _parse_report(text: str, unfinished: str) -> list[TestCase]:
    """Every <TestCase> of a (possibly truncated) Catch2 XML report, in order. A test case whose element
    never closed is FAILED with the message `unfinished`."""
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
    open_case: ET.Element | None = None
    cases: list[TestCase] = []
    try:
        parser.feed(text)
        parser.close()
    except ET.ParseError:  # truncated: the events read before the cut are still queued
        pass
    for item in parser.read_events():
        event, elem = item[0], item[-1]
        if not isinstance(elem, ET.Element) or elem.tag != "TestCase":
            continue
        if event == "start":
            open_case = elem
        else:
            cases.append(_case(elem, None))
            open_case = None
    if open_case is not None:
        cases.append(_case(open_case, unfinished))
    return cases


def _case(elem: ET.Element, unfinished: str | None) -> TestCase:
    name = elem.get("name", "")
    tags = elem.get("tags", "")
    result = elem.find("OverallResult")
    findings = _findings(elem, [], [])
    failures = [f for f in findings if f.kind == "failure"]
    skips = [f for f in findings if f.kind == "skip"]
    duration = result.get("durationInSeconds") if result is not None else None
    case = TestCase(name=name, outcome=Outcome.PASSED, file=elem.get("filename"), line=_int(elem.get("line")),
                    duration_ms=float(duration) * 1000 if duration else None,
                    output=_captured(result) if result is not None else "")
    if unfinished is not None or result is None:
        case.outcome, case.message = Outcome.FAILED, unfinished or "did not finish"
        if failures:  # what it had reported before dying
            case.message += f"\n{_describe(failures)}"
            case.file, case.line = failures[0].file or case.file, failures[0].line or case.line
    elif result.get("success") == "false":
        case.outcome = Outcome.FAILED
        if failures:
            case.message = _describe(failures)
            case.file, case.line = failures[0].file or case.file, failures[0].line or case.line
        else:
            case.message = "marked [!shouldfail] but passed" if "[!shouldfail]" in tags else "failed"
    elif skips or int(result.get("skips", "0") or 0) > 0:
        case.outcome, case.message = Outcome.SKIPPED, skips[0].text if skips else "skipped"
    elif failures and "[!mayfail]" in tags:
        case.outcome = Outcome.SKIPPED
        case.message = f"failed, which [!mayfail] allows: {_describe(failures)}"
        case.file, case.line = failures[0].file or case.file, failures[0].line or case.line
    return case


def _findings(elem: ET.Element, sections: list[str], infos: list[str]) -> list[_Finding]:
    """Failed assertions, exceptions, fatal conditions and skips under `elem`, with the sections they were in
    and the INFO/CAPTURE messages Catch2 reported with them."""
    out: list[_Finding] = []
    for child in elem:
        text = (child.text or "").strip()
        where = f"in section {' / '.join(sections)}: " if sections else ""
        file, line = child.get("filename"), _int(child.get("line"))
        note = f" (with message: {'; '.join(infos)})" if infos else ""
        if child.tag == "Section":
            out += _findings(child, [*sections, child.get("name", "")], [])
        elif child.tag == "Info":
            infos.append(text)
            continue
        elif child.tag == "Expression" and child.get("success") == "false":
            original = " ".join((child.findtext("Original") or "").split())
            expanded = " ".join((child.findtext("Expanded") or "").split())
            shown = f"{child.get('type', 'CHECK')}( {original} )"
            if expanded and expanded != original:
                shown += f" with expansion: {expanded}"
            exc = child.find("Exception")
            if exc is not None:
                shown += f" threw: {(exc.text or '').strip()}"
            out.append(_Finding("failure", where + shown + note, file, line))
        elif child.tag == "Exception":
            out.append(_Finding("failure", f"{where}unexpected exception: {text}{note}", file, line))
        elif child.tag == "FatalErrorCondition":
            out.append(_Finding("failure", f"{where}fatal error: {text}{note}", file, line))
        elif child.tag == "Failure":  # FAIL("...")
            out.append(_Finding("failure", f"{where}FAIL: {text}{note}", file, line))
        elif child.tag == "Skip":  # Catch2 v3 SKIP("...")
            out.append(_Finding("skip", text or "skipped", file, line))
        infos.clear()
    return out


def _describe(failures: list[_Finding]) -> str:
    """The first failure, then where the others were (an agent reads the first, greps the rest)."""
    first, *rest = failures
    lines = [first.text]
    for more in rest[:4]:
        lines.append(f"also at {Path(more.file).name if more.file else '?'}:{more.line}: {more.text}")
    if len(rest) > 4:
        lines.append(f"… and {len(rest) - 4} more failures")
    return "\n".join(lines)


def _captured(result: ET.Element) -> str:
    parts = [(result.findtext(tag) or "").lstrip("\n").rstrip() for tag in ("StdOut", "StdErr")]
    return "\n".join(part for part in parts if part.strip())


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None
