"""unittest, the standard library's framework. Named unittest_ so that it never shadows the real unittest.

unittest has no machine-readable output, so the command runs our own small runner (_unittest_report.py, standard
library only) with the project's interpreter: it does unittest's usual discovery and writes a JSON report with
each test's outcome, duration, message, frames (file, line, qualified function, module) and captured output.
Its console lines (`RUN id` / `PASS id` ...) feed live progress. Tests are named by unittest id
(package.module.Class.method); the single-test command keeps the ids containing the given text (unittest's -k).

Discovery starts where `python -m unittest discover` would be pointed: the project root when test files sit
there, else tests/ (or test/). The top-level directory is the first ancestor of the start directory that is not
a package, so modules get the names Python itself gives them. Levels are the directories tests/<level>
(test/<level>; e2e also end_to_end); unittest has no markers, so a project without that directory is told so.

Errors are failures (unittest separates them; a caller does not need to). Expected failures are skipped with the
exception as the reason; unexpected successes fail. A test module that does not import is a failed test named
after the module, with the import error as its message, so the modules that did import still report; when no
module imported at all the suite did not run, and parse() returns ParsedRun.error with the import errors.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from strobe.errors import ValidationError
from strobe.testing.adapters.base import FinishedRun, StackKind, TestAdapter, tail
from strobe.testing.adapters.pytest_ import (
    Frame,
    imports_module,
    is_user_file,
    level_directory,
    locate,
    module_name,
    project_python,
    python_project_info,
    python_suggestions,
    python_test_files,
    qualname_at,
    shown_python,
)
from strobe.testing.model import LiveProgress, Outcome, ParsedRun, ProjectInfo, TestCase, TestCommand, TestLevel

RUNNER = Path(__file__).with_name("_unittest_report.py")
_FINISHED = {"PASS": Outcome.PASSED, "XPASS": Outcome.FAILED, "FAIL": Outcome.FAILED, "ERROR": Outcome.FAILED,
             "SKIP": Outcome.SKIPPED, "XFAIL": Outcome.SKIPPED}


def _discovery_dirs(root: Path, start: Path) -> tuple[str, str]:
    """(start, top-level) directories relative to the project root, for `discover -s START -t TOP`."""
    top = start
    while (top / "__init__.py").is_file() and top.parent != top:
        top = top.parent
    return os.path.relpath(start, root), os.path.relpath(top, root)


def _start_dir(root: Path) -> Path:
    if any(root.glob("test*.py")):
        return root
    for name in ("tests", "test"):
        if (root / name).is_dir():
            return root / name
    return root


class UnittestAdapter(TestAdapter):
    name = "unittest"
    display_name = "unittest"
    language = "python"
    stack_kind = StackKind.PYTHON

    def detect(self, project_root: Path, command: str | None) -> int:
        """70: test files importing unittest (below pytest's 90 for a configured pytest project, which runs
        unittest tests too, and its 80 for test files importing pytest)."""
        return 70 if any(imports_module(f, "unittest") for f in python_test_files(project_root)) else 0

    def _command(self, project_root: Path, start: Path, report_dir: Path, extra: list[str]) -> TestCommand:
        report = report_dir / "unittest.json"
        start_dir, top = _discovery_dirs(project_root, start)
        argv = [project_python(project_root), str(RUNNER), "--report", str(report),
                "--start-dir", start_dir, "--top-level-dir", top, "--pattern", "test*.py", *extra]
        return TestCommand(argv=argv, cwd=project_root, env={"PYTHONUNBUFFERED": "1"}, report=report)

    def suite_command(self, project_root: Path, level: TestLevel | None, command: str | None,
                      report_dir: Path) -> TestCommand:
        if level is None:
            return self._command(project_root, _start_dir(project_root), report_dir, [])
        directory = level_directory(project_root, level)
        if directory is None:
            raise ValidationError(
                f"unittest selects a level by directory and {project_root} has no tests/{level.value} (nor "
                f"test/{level.value}). Omit `level` to run every test, or use `test` to pick tests by name.")
        return self._command(project_root, directory, report_dir, [])

    def single_test_command(self, project_root: Path, test: str, command: str | None,
                            report_dir: Path) -> TestCommand:
        return self._command(project_root, _start_dir(project_root), report_dir, ["-k", test])

    def rerun_command(self, project_root: Path, test: str, command: str | None) -> str:
        start, top = _discovery_dirs(project_root, _start_dir(project_root))
        python = shown_python(project_python(project_root), project_root)
        return shlex.join([python, "-m", "unittest", "discover", "-s", start, "-t", top, "-k", test])

    def on_line(self, line: str, stream: str, progress: LiveProgress, now_ns: int) -> None:
        word, _, rest = line.partition(" ")
        if stream != "stdout" or not rest:
            return
        name = rest.strip().split("  (", 1)[0]
        if word == "RUN":
            progress.start(name, now_ns)
        elif word in _FINISHED:
            progress.finish(_FINISHED[word])

    def parse(self, run: FinishedRun) -> ParsedRun:
        root = run.command.cwd.resolve()
        output = tail(run.stdout + "\n" + run.stderr)
        try:
            assert run.command.report is not None
            report = json.loads(run.command.report.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            code = run.exit_code
            what = f"was killed by signal {-code}" if code < 0 else f"exited with {code}"
            return ParsedRun([], error=f"The unittest runner wrote no report ({what}), so no result is known. "
                                       f"Its output:\n\n{output}")
        if report.get("fatal"):
            return ParsedRun([], error=f"unittest discovery failed: {report['fatal']}. Check that the test "
                                       f"directory exists and is importable.\n\n{output}")
        cases = [self._case(record, root) for record in report.get("tests", [])]
        imports = [r for r in report.get("tests", []) if r.get("kind") == "import_error"]
        if imports and len(imports) == len(cases):
            listed = "\n".join(f"- {c.name}: {c.message} ({c.file}:{c.line})" for c in cases)
            return ParsedRun([], error=f"unittest could not import any test module, so no test ran:\n{listed}\n"
                                       f"Fix these errors and run again.\n\n{output}")
        return ParsedRun(cases)

    @staticmethod
    def _case(record: dict[str, Any], root: Path) -> TestCase:
        frames: list[Frame] = []
        for raw in record.get("frames", []):
            path = Path(os.path.normpath(root / raw["file"]))
            if is_user_file(path, root):
                module = raw.get("module") or module_name(path)
                function, line = str(raw["function"]), int(raw["line"])
                if "." not in function and not function.startswith("<"):  # before 3.11: no co_qualname
                    function = qualname_at(path, line, function)
                frames.append(Frame(path, line, f"{module}.{function}"))
        test_module = record.get("test_module") or ""
        test_files = [f.file for f in frames if f.function.startswith(f"{test_module}.")]
        where, where_line = locate(frames, test_files[0] if test_files else None)
        return TestCase(
            name=record["id"], outcome=Outcome(record["outcome"]), duration_ms=record.get("duration_ms"),
            file=str(where) if where else None, line=where_line, message=record.get("message"),
            stack=[frame.label(root) for frame in frames], output=record.get("output") or "")

    def suggest_traces(self, case: TestCase) -> list[str]:
        return python_suggestions(case)

    def project_info(self, project_root: Path) -> ProjectInfo:
        return python_project_info(project_root, "unittest")
