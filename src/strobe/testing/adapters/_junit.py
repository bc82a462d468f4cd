"""JUnit XML, the report format most test runners can write (node --test, bun, deno, pytest, ctest, …), read
into TestCase objects. Shared by every adapter whose framework speaks it; not an adapter itself.

JUnit has no single specification, so this reads the common ground and tolerates the rest: <testsuites> or a
bare <testsuite> root, suites nested to any depth, <testcase> children <failure>/<error> (FAILED), <skipped>
(SKIPPED), <system-out>/<system-err> (the test's output), and `file`/`line`/`time` attributes when a runner
writes them.

A failure's message is its `message` attribute, else the first line of its text; its stack is the rest of the
text (lines repeating the message dropped), stripped, as the runner printed it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from strobe.testing.model import Outcome, TestCase


class JunitError(ValueError):
    """The report is missing, empty or not JUnit XML. The message says which, for a ParsedRun.error."""


def parse_junit(path: Path, *, suite_separator: str | None = None) -> list[TestCase]:
    """The test cases of the JUnit report at `path`, in document order.

    A case's name is its `name` attribute; with `suite_separator` (e.g. " > "), the names of the enclosing
    <testsuite> elements are prefixed, outermost first, for runners that put describe blocks in nested suites.
    Raises JunitError when the file is missing, empty or not XML with a <testsuite(s)> root.
    """
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise JunitError(f"no JUnit report at {path} ({exc.strerror})") from exc
    return parse_junit_text(text, suite_separator=suite_separator, source=str(path))


def parse_junit_text(text: str, *, suite_separator: str | None = None, source: str = "the report") -> list[TestCase]:
    """parse_junit for a report already in memory (e.g. a runner that prints it to stdout)."""
    if not text.strip():
        raise JunitError(f"{source} is empty")
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise JunitError(f"{source} is not valid XML ({exc})") from exc
    if root.tag not in ("testsuites", "testsuite"):
        raise JunitError(f"{source} is XML but not JUnit: its root is <{root.tag}>, not <testsuites>/<testsuite>")
    cases: list[TestCase] = []
    _collect(root, [], suite_separator, cases)
    return cases


def _collect(elem: ET.Element, suites: list[str], separator: str | None, out: list[TestCase]) -> None:
    if elem.tag == "testsuite" and elem.get("name"):
        suites = [*suites, elem.get("name", "")]
    for child in elem:
        if child.tag == "testcase":
            out.append(_case(child, suites, separator))
        elif child.tag in ("testsuite", "testsuites"):
            _collect(child, suites, separator, out)


def _case(elem: ET.Element, suites: list[str], separator: str | None) -> TestCase:
    name = elem.get("name", "")
    if separator is not None and suites:
        name = separator.join([*suites, name])
    seconds = _float(elem.get("time"))
    case = TestCase(name=name, outcome=Outcome.PASSED, duration_ms=seconds * 1000 if seconds is not None else None,
                    file=elem.get("file") or elem.get("filepath") or None, line=_int(elem.get("line")),
                    output=_output(elem))
    problem = next((child for child in elem if child.tag in ("failure", "error")), None)
    skipped = elem.find("skipped")
    if problem is not None:
        case.outcome = Outcome.FAILED
        case.message, case.stack = _message_and_stack(problem)
        if not case.message:
            case.message = problem.get("type") or ("error" if problem.tag == "error" else "failed")
    elif skipped is not None:
        case.outcome = Outcome.SKIPPED
        case.message = _message_and_stack(skipped)[0] or None
    return case


def _message_and_stack(elem: ET.Element) -> tuple[str, list[str]]:
    message = (elem.get("message") or "").strip()
    lines = [line.strip() for line in (elem.text or "").splitlines() if line.strip()]
    if not message:
        return (lines[0], lines[1:]) if lines else ("", [])
    repeated = {line.strip() for line in message.splitlines()}
    while lines and lines[0] in repeated:  # the text usually starts by repeating the message
        lines.pop(0)
    return message, lines


def _output(elem: ET.Element) -> str:
    parts = [(elem.findtext(tag) or "").strip("\n") for tag in ("system-out", "system-err")]
    return "\n".join(part for part in parts if part.strip())


def _float(value: str | None) -> float | None:
    try:
        return float(value.replace(",", "")) if value else None
    except ValueError:
        return None


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value else None
    except ValueError:
        return None
