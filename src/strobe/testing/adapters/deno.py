"""Deno's test runner (`deno test`).

Results come from Deno's JUnit report (`--junit-path=<file>`), the console keeps Deno's own reporter for the
log and live progress. Test steps (`t.step`) are cases named "test > step"; a test that failed only because
a step did is left out, since the step's failure says more. Deno type-checks before running, so a type error
leaves no report and comes back as the run's error.

Permissions: tests often read files or the environment, and a denied permission would fail them for a
reason unrelated to the bug at hand. So the run grants what the project grants its own tests: the permission
flags of a `deno test` in deno.json's `test` task; else `-P` when deno.json declares permissions (Deno then
insists on it); else `--allow-all`, as the project said nothing. `--no-prompt` always: no one is there to
answer. Deno caches compiled modules in DENO_DIR (default ~/.cache/deno); the tests point it into a temporary
directory.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from strobe.errors import ValidationError
from strobe.testing.adapters._junit import JunitError, parse_junit
from strobe.testing.adapters._node import (
    find_bin,
    level_dirs,
    locate,
    missing_report,
    relative,
    split_error,
    strip_ansi,
    suggest,
    test_files,
)
from strobe.testing.adapters.base import FinishedRun, StackKind, TestAdapter
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

_CONFIGS = ("deno.json", "deno.jsonc")
_STEP = " > "  # how Deno's report names a step: "test > step"
_TEST_FILE = re.compile(r"(?:^|[._])test\.[cm]?[jt]sx?$")  # Deno's rule: test.ts, *_test.ts, *.test.ts, ...
_PERMISSION_FLAG = re.compile(r"^(?:-A|-[RWNESI](?:=.*)?|--allow-[a-z-]+(?:=.*)?|--deny-[a-z-]+(?:=.*)?"
                              r"|-P(?:=.*)?|--permission-set(?:=.*)?)$")
_JSONC_NOISE = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/', re.DOTALL)
_CARET = re.compile(r"^\s*[~^]+\s*$")  # under the quoted source line of an error
_RUNTIME_FRAME = re.compile(r"\(ext:|^ext:")
_STEP_FAILED = re.compile(r"^\d+ test steps? failed\.?$")
# "name ... ok (3ms)", "  step ... FAILED (1ms)", "name ... ignored (0ms)"; a parent failing by its steps says
# "FAILED (due to 1 failed step)" and is not counted, as parse() leaves it out.
_RESULT = re.compile(r"^(?P<name>.+?) \.\.\. (?P<result>ok|FAILED|ignored)(?P<rest>.*)$")
_STARTED = re.compile(r"^(?P<name>\S.*?) \.\.\.$")
_RESULTS = {"ok": Outcome.PASSED, "FAILED": Outcome.FAILED, "ignored": Outcome.SKIPPED}


def _config(project_root: Path) -> dict[str, Any]:
    """deno.json or deno.jsonc, comments and trailing commas allowed; {} when missing or unreadable."""
    for name in _CONFIGS:
        try:
            text = (project_root / name).read_text(encoding="utf-8")
        except OSError:
            continue
        text = _JSONC_NOISE.sub(lambda m: m.group(1) or "", text)
        try:
            data = json.loads(re.sub(r",(\s*[}\]])", r"\1", text))
        except ValueError:
            return {}
        return data if isinstance(data, dict) else {}
    return {}


def permission_flags(project_root: Path) -> list[str]:
    """The permissions the project gives its tests (see the module docstring)."""
    config = _config(project_root)
    tasks = config.get("tasks")
    task = tasks.get("test") if isinstance(tasks, dict) else None
    if isinstance(task, dict):  # {"command": "deno test -R", "description": ...}
        task = task.get("command")
    if isinstance(task, str):
        try:
            words = shlex.split(task)
        except ValueError:
            words = []
        for i in range(len(words) - 1):
            if Path(words[i]).name == "deno" and words[i + 1] == "test":
                return [w for w in words[i + 2:] if _PERMISSION_FLAG.match(w)] + ["--no-prompt"]
    test_config = config.get("test")
    if "permissions" in config or (isinstance(test_config, dict) and "permissions" in test_config):
        return ["-P", "--no-prompt"]
    return ["--allow-all", "--no-prompt"]


def _deno(project_root: Path) -> str:
    found = find_bin(project_root, "deno")
    tool = str(found) if found else shutil.which("deno")
    if tool is None:
        raise ValidationError(f"Deno is not installed: no `deno` in node_modules/.bin at or above {project_root}, "
                              f"nor on PATH. Install it (https://deno.com, or `npm i -D deno`) or pick another "
                              f"framework with `framework`.")
    return tool


def _filter(test: str) -> str:
    """`--filter` takes a substring, or a regex between slashes; a step runs with its test, so a step's name
    filters on the test's part. A name that itself looks like /.../ is matched literally through a regex."""
    top = test.split(_STEP, 1)[0]
    if top.startswith("/") and top.endswith("/"):
        return "/" + re.sub(r"[\\^$.*+?()[\]{}|/]", r"\\\g<0>", top) + "/"
    return top


class DenoAdapter(TestAdapter):
    name = "deno"
    display_name = "Deno"
    language = "javascript"
    stack_kind = StackKind.NODE

    def detect(self, project_root: Path, command: str | None) -> int:
        """90 for a deno.json or deno.jsonc at the project root."""
        return 90 if any((project_root / name).is_file() for name in _CONFIGS) else 0

    def _command(self, project_root: Path, report_dir: Path, extra: list[str]) -> TestCommand:
        report = report_dir / "junit.xml"
        argv = [_deno(project_root), "test", *permission_flags(project_root), f"--junit-path={report}", *extra]
        return TestCommand(argv=argv, cwd=project_root, env={"NO_COLOR": "1"}, report=report)

    def suite_command(self, project_root: Path, level: TestLevel | None, command: str | None,
                      report_dir: Path) -> TestCommand:
        paths = level_dirs(project_root, level, self.display_name) if level is not None else []
        return self._command(project_root, report_dir, paths)

    def single_test_command(self, project_root: Path, test: str, command: str | None,
                            report_dir: Path) -> TestCommand:
        return self._command(project_root, report_dir, ["--filter", _filter(test)])

    def rerun_command(self, project_root: Path, test: str, command: str | None) -> str:
        deno = _deno(project_root)
        tool = "deno" if shutil.which("deno") == deno else relative(deno, project_root)
        return shlex.join([tool, "test", *permission_flags(project_root), "--filter", _filter(test)])

    def parse(self, run: FinishedRun) -> ParsedRun:
        cwd = run.command.cwd
        report = run.command.report
        try:
            cases = parse_junit(report) if report else []
            elements = list(ET.parse(report).getroot().iter("testcase")) if report else []
        except (JunitError, ET.ParseError):
            return missing_report(self.display_name, run, "Deno stopped before running the tests (a type error, a "
                                  "syntax error or a failed import); fix what its output shows and rerun.")
        failures: dict[int, str] = {}
        for case, element in zip(cases, elements, strict=True):  # Deno names the test's module in `classname`
            module = element.get("classname")
            case.file = case.file or (relative(module, cwd) if module else None)
            failures[id(case)] = element.findtext("failure") or ""
        argv = run.command.argv
        if "--filter" in argv:  # Deno reports the tests its filter left out as skipped: drop them
            wanted = argv[argv.index("--filter") + 1]
            regex = re.compile(wanted[1:-1]) if len(wanted) > 1 and wanted[0] == wanted[-1] == "/" else None
            cases = [c for c in cases if c.outcome is not Outcome.SKIPPED or (
                regex.search(c.name) if regex else wanted in c.name.split(_STEP, 1)[0])]
        failed_steps = {c.name.rsplit(_STEP, 1)[0] for c in cases if c.outcome is Outcome.FAILED and _STEP in c.name}
        kept = []
        for case in cases:
            if case.name in failed_steps and _STEP_FAILED.match(case.message or ""):
                continue
            if case.outcome is Outcome.FAILED:
                self._tidy_failure(case, failures[id(case)], cwd)
            kept.append(case)
        return ParsedRun(kept)

    @staticmethod
    def _tidy_failure(case: TestCase, text: str, cwd: Path) -> None:
        """The failure's text, read as Deno wrote it (a diff keeps its indentation): the message is what comes
        before the frames, less the quoted source line and its caret; the report's `message` attribute has lost
        its line breaks to XML. Frames in Deno's own runtime (ext:) are left out: nothing there to trace."""
        message, frames = split_error(text)
        lines = message.splitlines()
        caret = next((i for i, line in enumerate(lines) if _CARET.match(line)), None)
        if caret is not None:
            lines = lines[:max(caret - 1, 0)]
        if any(line.strip() for line in lines):
            case.message = "\n".join(line for line in lines if line.strip())
        elif case.message:
            case.message = case.message.removeprefix("Uncaught ")
        case.stack = [frame for frame in frames if not _RUNTIME_FRAME.search(frame)]
        locate(case, case.file, cwd)

    def on_line(self, line: str, stream: str, progress: LiveProgress, now_ns: int) -> None:
        """Deno prints "name ... ok (3ms)" when a test ends; a test with steps first prints "name ..." alone."""
        text = strip_ansi(line.rstrip())
        if text.startswith("running ") and " test" in text:
            progress.phase = Phase.RUNNING
            return
        started = _STARTED.match(text)
        if started:
            progress.start(started["name"], now_ns)
            return
        result = _RESULT.match(text)
        if result and "due to" not in result["rest"]:
            progress.finish(_RESULTS[result["result"]])

    def suggest_traces(self, case: TestCase) -> list[str]:
        return suggest(case)

    def project_info(self, project_root: Path) -> ProjectInfo:
        files = test_files(project_root, _TEST_FILE)
        return ProjectInfo(language=self.language, build_system="deno", test_files=files)
