"""Runs unittest discovery and writes every test's outcome to a JSON report: unittest has no machine-readable
output of its own. The unittest adapter runs this file with the project's interpreter, so it uses only the
standard library and stays importable by older Pythons (3.8+).

    python _unittest_report.py --report R.json --start-dir tests [--top-level-dir .] [--pattern test*.py] [-k s]

The console gets one line as each test starts (`RUN   id`) and one as it ends (`PASS  id`, `FAIL`, `ERROR`,
`SKIP`, `XFAIL`, `XPASS`), for live progress, then the failures' tracebacks and a summary. What a test prints
is captured per test (as `buffer=True` would) and goes into the report instead of the console.

Report: {"tests": [{"id", "outcome": passed|failed|skipped, "kind", "duration_ms", "message", "frames":
[{"file", "line", "function", "module"}] innermost first, "test_module", "output"}], "fatal": null | str}.
`kind` says why: failure, error, skip, expected_failure, unexpected_success, import_error (a test module that
did not import; unittest reports it as a test named after the module).
Exit status: 0 all passed, 1 some failed, 2 discovery itself failed (`fatal`).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import sys
import time
import traceback
import unittest
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:  # annotations only: older Pythons never evaluate these
    from typing import TypeAlias

    ExcInfo: TypeAlias = tuple[type[BaseException], BaseException, TracebackType] | tuple[None, None, None]
_TEXT_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<function>.+))?$', re.MULTILINE)


def _frames(tb: TracebackType | None) -> list[dict[str, Any]]:
    """The traceback's frames outside unittest itself (which marks its modules with `__unittest`)."""
    out: list[dict[str, Any]] = []
    while tb is not None:
        frame = tb.tb_frame
        if "__unittest" not in frame.f_globals:
            code = frame.f_code
            out.append({"file": code.co_filename, "line": tb.tb_lineno,
                        "function": getattr(code, "co_qualname", code.co_name),
                        "module": frame.f_globals.get("__name__", "")})
        tb = tb.tb_next
    return out[::-1]


def _text_frames(text: str) -> list[dict[str, Any]]:
    """Frames from a formatted traceback (all an import failure leaves us), innermost first."""
    found = [{"file": m["file"], "line": int(m["line"]), "function": m["function"] or "<module>", "module": ""}
             for m in _TEXT_FRAME.finditer(text)]
    return found[::-1]


class ReportingResult(unittest.TestResult):
    def __init__(self, console: TextIO) -> None:
        super().__init__()
        self.console = console
        self.records: list[dict[str, Any]] = []
        self.current: dict[str, Any] | None = None
        self.started = 0.0
        self.saved: tuple[TextIO, TextIO] | None = None
        self.captured = io.StringIO()

    def _say(self, word: str, name: str, detail: str = "") -> None:
        self.console.write(f"{word:<5} {name}{detail}\n")
        self.console.flush()

    def startTest(self, test: unittest.TestCase) -> None:
        super().startTest(test)
        name = test._testMethodName if type(test).__name__ == "_FailedTest" else test.id()
        self.current = {"id": name, "outcome": "passed", "kind": None, "duration_ms": None, "message": None,
                        "frames": [], "test_module": type(test).__module__, "output": ""}
        self._say("RUN", name)
        self.saved = (sys.stdout, sys.stderr)
        self.captured = io.StringIO()
        sys.stdout = sys.stderr = self.captured
        self.started = time.perf_counter()

    def stopTest(self, test: unittest.TestCase) -> None:
        record = self.current
        if self.saved is not None:
            sys.stdout, sys.stderr = self.saved
            self.saved = None
        if record is not None:
            record["duration_ms"] = (time.perf_counter() - self.started) * 1000
            record["output"] = self.captured.getvalue()
            self.records.append(record)
            words = {"passed": "PASS", "failed": "FAIL", "skipped": "SKIP"}
            word = {"error": "ERROR", "import_error": "ERROR", "expected_failure": "XFAIL",
                    "unexpected_success": "XPASS"}.get(record["kind"] or "", words[record["outcome"]])
            self._say(word, record["id"], f"  ({record['duration_ms']:.0f} ms)")
            self.current = None
        super().stopTest(test)

    def _problem(self, test: unittest.TestCase, err: ExcInfo, kind: str, prefix: str = "") -> None:
        """Record a failure or error; a test keeps its first one (a failing subtest, then a teardown error)."""
        exc_type, value, tb = err
        lines = traceback.format_exception_only(exc_type, value) if exc_type is not None else []
        message = "".join(lines).strip()
        frames = _frames(tb)
        if type(test).__name__ == "_FailedTest":
            kind = "import_error"
            frames = _text_frames(str(value))
            message = f"{str(value).splitlines()[0] if str(value) else 'Failed to import'}: {_last_line(str(value))}"
        record = self.current
        if record is None:  # setUpClass/setUpModule failures come without startTest
            record = {"id": test.id(), "duration_ms": None, "test_module": "", "output": ""}
            self.records.append(record)
            self._say("ERROR", test.id())
        if record.get("outcome") != "failed":
            record.update(outcome="failed", kind=kind, message=prefix + message, frames=frames)

    def addError(self, test: unittest.TestCase, err: ExcInfo) -> None:
        super().addError(test, err)
        self._problem(test, err, "error")

    def addFailure(self, test: unittest.TestCase, err: ExcInfo) -> None:
        super().addFailure(test, err)
        self._problem(test, err, "failure")

    def addSubTest(self, test: unittest.TestCase, subtest: unittest.TestCase,
                   err: ExcInfo | None) -> None:
        super().addSubTest(test, subtest, err)
        if err is not None:
            kind = "failure" if err[0] is not None and issubclass(err[0], test.failureException) else "error"
            self._problem(test, err, kind, prefix=f"{subtest._subDescription()}: ")  # type: ignore[attr-defined]

    def addSkip(self, test: unittest.TestCase, reason: str) -> None:
        super().addSkip(test, reason)
        if self.current is not None:
            self.current.update(outcome="skipped", kind="skip", message=reason)

    def addExpectedFailure(self, test: unittest.TestCase, err: ExcInfo) -> None:
        super().addExpectedFailure(test, err)
        exc_type, value = err[0], err[1]
        text = "".join(traceback.format_exception_only(exc_type, value)).strip() if exc_type else ""
        if self.current is not None:
            self.current.update(outcome="skipped", kind="expected_failure", message=f"expected failure: {text}")

    def addUnexpectedSuccess(self, test: unittest.TestCase) -> None:
        super().addUnexpectedSuccess(test)
        if self.current is not None:
            self.current.update(outcome="failed", kind="unexpected_success",
                                message="unexpected success: the test is marked expectedFailure but passed")


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _summary(result: ReportingResult, console: TextIO, seconds: float) -> None:
    failed = [r for r in result.records if r["outcome"] == "failed"]
    for test, err_text in result.errors + result.failures:
        console.write(f"{'=' * 70}\n{test.id()}\n{err_text}\n")
    counts = {o: sum(1 for r in result.records if r["outcome"] == o) for o in ("passed", "failed", "skipped")}
    console.write(f"Ran {len(result.records)} tests in {seconds:.3f}s: {counts['passed']} passed, "
                  f"{counts['failed']} failed, {counts['skipped']} skipped\n{'FAILED' if failed else 'OK'}\n")
    console.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--report", required=True)
    parser.add_argument("--start-dir", default=".")
    parser.add_argument("--top-level-dir", default=None)
    parser.add_argument("--pattern", default="test*.py")
    parser.add_argument("-k", dest="name", default=None, help="run only tests whose id contains this")
    args = parser.parse_args(argv)
    # Like `python -m unittest`: the working directory is importable, this script's own directory is not.
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        sys.path[0] = os.getcwd()
    else:
        sys.path.insert(0, os.getcwd())
    console = sys.stdout
    report: dict[str, Any] = {"tests": [], "fatal": None}
    loader = unittest.TestLoader()
    if args.name:
        loader.testNamePatterns = [args.name if "*" in args.name else f"*{args.name}*"]
    try:
        suite = loader.discover(args.start_dir, pattern=args.pattern, top_level_dir=args.top_level_dir)
    except Exception as exc:  # discovery refused the directories: nothing ran
        report["fatal"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        console.write(f"unittest discovery failed: {report['fatal']}\n")
        _write(args.report, report)
        return 2
    result = ReportingResult(console)
    started = time.perf_counter()
    suite.run(result)
    report["tests"] = result.records
    _write(args.report, report)
    _summary(result, console, time.perf_counter() - started)
    return 1 if any(r["outcome"] == "failed" for r in result.records) else 0


def _write(path: str, report: dict[str, Any]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(report, handle)


if __name__ == "__main__":
    sys.exit(main())
