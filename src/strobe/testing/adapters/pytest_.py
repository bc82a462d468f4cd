"""pytest. Named pytest_ so that importing it never shadows the real pytest.

Results come from pytest's built-in JUnit XML (`--junitxml`, no plugin needed) in the xunit1 family, the one
that still carries each test's `file` and `line`. Tracebacks are asked for in the `short` style, one
`path:line: in function` line per frame, which the failure element carries verbatim; that gives the failing
line and the frames to suggest traces from. `--setup-show` makes pytest end the line naming a test *before* the
test runs (the plain verbose line is finished only once it has passed or failed), so live progress knows the
current test even when it hangs. Tests are named by node id (tests/test_x.py::TestA::test_b[1]), which the
single-test command takes back as is; failure files are absolute paths.

Outcomes: xfail is skipped ("expected failure: <reason>"); a setup or teardown error fails the test. A collection
error (syntax error, failed import) stops pytest before any test runs, so parse() returns ParsedRun.error listing
them; exit status 5 (nothing collected, e.g. a marker no test carries) is an empty run, not an error.

Which interpreter: the `test.python` setting when a settings file gives one; else the project's virtualenv (.venv,
venv, env), since that is where its dependencies are; else `python3` on PATH. Never Strobe's own interpreter.

Levels: the directory tests/<level> (or test/<level>; e2e also end_to_end) when it exists, else the pytest
marker of that name (`-m unit`), for projects that mark tests instead of sorting them into directories.

This module also holds what the Python adapters share (unittest_ imports it): finding test files, picking the
interpreter, naming frames the way Python tracing names functions (`package.module.Class.method`) and
suggesting traces from frames and from the project modules a test file imports.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import shutil
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from strobe.errors import ValidationError
from strobe.instrument.command import pyenv_target
from strobe.paths import StrobePaths
from strobe.settings import load_settings
from strobe.testing.adapters.base import MAX_SUGGESTIONS, FinishedRun, StackKind, TestAdapter, tail
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

# ---- shared by the Python adapters -----------------------------------------------------------------

_PRUNED_DIRS = {".git", ".hg", ".venv", "venv", "env", ".tox", ".nox", "node_modules", "__pycache__", "build",
                "dist", "site-packages", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
_LIBRARY_PARTS = {"site-packages", "dist-packages", ".venv", "venv", ".tox", ".nox"}
_MAX_SCANNED_FILES = 5000
_TEST_FILE = re.compile(r"^(test_.*|.*_test)\.py$")
_LEVEL_DIRS = {TestLevel.UNIT: ("unit",), TestLevel.INTEGRATION: ("integration",),
               TestLevel.E2E: ("e2e", "end_to_end")}


def python_test_files(root: Path) -> list[Path]:
    """test_*.py and *_test.py under `root`, skipping virtualenvs, caches and build output (bounded walk)."""
    found: list[Path] = []
    seen = 0
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _PRUNED_DIRS and not d.startswith("."))
        for name in sorted(files):
            seen += 1
            if _TEST_FILE.match(name):
                found.append(Path(directory) / name)
        if seen > _MAX_SCANNED_FILES:
            break
    return found


def imports_module(path: Path, module: str) -> bool:
    """Whether a file imports `module` (a cheap textual check on its first 64 KiB; detection only)."""
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            text = handle.read(65536)
    except OSError:
        return False
    return re.search(rf"^\s*(?:import|from)\s+{re.escape(module)}\b", text, re.MULTILINE) is not None


def project_python(root: Path) -> str:
    """The interpreter that runs the project's tests: the `test.python` setting (settings.py), else its
    virtualenv (.venv, venv, env), else python3 on PATH. Never Strobe's own interpreter: the project's
    dependencies are not there, and Strobe's are not the project's."""
    configured = load_settings(StrobePaths.from_env(), root).test_python
    if configured is not None:
        path = Path(configured).expanduser()
        if "/" not in configured:
            return _unshimmed(shutil.which(configured) or configured, root)
        return _unshimmed(str(path if path.is_absolute() else root / path), root)
    for venv in (".venv", "venv", "env"):
        candidate = root / venv / "bin" / "python"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return _unshimmed(shutil.which("python3") or "python3", root)


def _unshimmed(python: str, root: Path) -> str:
    """A pyenv shim as what it runs in `root` (a traced run would otherwise follow its helpers: seconds of
    exec()s); anything else as it is."""
    try:
        shimmed = pyenv_target(Path(python), root) if os.path.isabs(python) else None
    except ValidationError:  # it selects nothing here: running it says so
        shimmed = None
    return str(shimmed) if shimmed is not None else python


def shown_python(python: str, root: Path) -> str:
    """The interpreter as a human in the project directory types it."""
    path = Path(python)
    if path.is_absolute() and path.is_relative_to(root):
        return str(path.relative_to(root))
    return python


def level_directory(root: Path, level: TestLevel) -> Path | None:
    for parent in ("tests", "test"):
        for name in _LEVEL_DIRS[level]:
            if (root / parent / name).is_dir():
                return root / parent / name
    return None


def is_user_file(path: Path, root: Path) -> bool:
    """A file of the project itself: under its root and not in a virtualenv or installed package."""
    return path.is_relative_to(root) and not _LIBRARY_PARTS.intersection(path.relative_to(root).parts)


def module_name(path: Path) -> str:
    """The dotted name Python imports a file under: its stem plus each enclosing package (`__init__.py`)."""
    parts = [path.stem]
    directory = path.parent
    while (directory / "__init__.py").is_file() and directory.parent != directory:
        parts.append(directory.name)
        directory = directory.parent
    return ".".join(reversed(parts))


@lru_cache(maxsize=256)
def _definitions(path: str, _mtime_ns: int) -> tuple[tuple[int, int, str, str], ...]:
    """(first line, last line, function name, qualified name) of every def in a file."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return ()
    out: list[tuple[int, int, str, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                qualified = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    out.append((first, child.end_lineno or child.lineno, child.name, qualified))
                visit(child, qualified + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return tuple(out)


def qualname_at(path: Path, line: int, function: str) -> str:
    """`Class.method` for the function `function` whose body holds `line` (tracebacks give bare names)."""
    try:
        mtime = path.stat().st_mtime_ns
    except OSError:
        return function
    best: tuple[int, str] | None = None
    for first, last, name, qualified in _definitions(str(path), mtime):
        if name == function and first <= line <= last and (best is None or first >= best[0]):
            best = (first, qualified)
    return best[1] if best else function


def qualified_function(path: Path, line: int, function: str) -> str:
    """`package.module.Class.method`: how Python tracing names the function of a traceback line."""
    return f"{module_name(path)}.{qualname_at(path, line, function)}"


@dataclass(frozen=True)
class Frame:
    file: Path  # absolute
    line: int
    function: str  # qualified: package.module.Class.method

    def label(self, root: Path) -> str:
        shown = self.file.relative_to(root) if self.file.is_relative_to(root) else self.file
        return f"{self.function} ({shown}:{self.line})"


def locate(frames: list[Frame], test_file: Path | None) -> tuple[Path | None, int | None]:
    """Where a failure is shown: the innermost frame in the test's own file (the line the test failed on),
    else the innermost project frame."""
    for frame in frames:
        if test_file is not None and frame.file == test_file:
            return frame.file, frame.line
    return (frames[0].file, frames[0].line) if frames else (test_file, None)


def _imported_project_modules(test_file: Path) -> list[str]:
    """Modules of the project that a test file imports (`from calc.ops import add` -> calc.ops): what an
    assertion in the test itself most likely exercised. A module counts as the project's when its top package
    sits in a directory at or above the test file (or in its src/)."""
    try:
        tree = ast.parse(test_file.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return []
    package = module_name(test_file).split(".")[:-1]
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level <= len(package):  # `from ..x import y` in a package
            base = package[: len(package) - node.level + 1] if node.level else []
            names.append(".".join([*base, *filter(None, [node.module])]))
    ancestors = [test_file.parent, *test_file.parent.parents][:6]
    out: list[str] = []
    for name in names:
        top = name.split(".")[0]
        if not top or name in out or top in sys.stdlib_module_names:
            continue
        if any((d / top / "__init__.py").is_file() or (d / f"{top}.py").is_file()
               or (d / "src" / top / "__init__.py").is_file() for d in ancestors):
            out.append(name)
    return out


def python_suggestions(case: TestCase) -> list[str]:
    """What owns each frame outside the test file (module, or class for a method; innermost first: the code
    that failed), then the project modules the test file imports, then the test's own module, then the file."""
    test_file = Path(case.file) if case.file else None
    owners: list[str] = []
    for frame in case.stack:  # "package.module.Class.method (path/to/file.py:12)"
        name, _, where = frame.partition(" (")
        location = where.rsplit(":", 1)[0]
        in_test_file = test_file is not None and location and (
            test_file.as_posix() == location or test_file.as_posix().endswith("/" + location))
        if "." in name and not in_test_file:
            owners.append(name.rsplit(".", 1)[0])
    if test_file is not None:
        if test_file.is_absolute():
            owners += _imported_project_modules(test_file)
        owners.append(module_name(test_file))
    out: list[str] = []
    for owner in owners:
        if f"{owner}.*" not in out:
            out.append(f"{owner}.*")
    if test_file is not None:
        out.append(f"@file:{test_file.name}")
    return out[:MAX_SUGGESTIONS]


def python_project_info(root: Path, build_system: str) -> ProjectInfo:
    files = [str(p.relative_to(root)) for p in python_test_files(root)]
    return ProjectInfo(language="python", build_system=build_system, test_files=files[:50])


# ---- pytest ------------------------------------------------------------------------------------------

_CONFIG_SECTIONS = (("pytest.ini", None), ("pyproject.toml", "[tool.pytest"), ("setup.cfg", "[tool:pytest]"),
                    ("tox.ini", "[pytest]"))
_SHORT_FRAME = re.compile(r"^(?P<file>\S.*?):(?P<line>\d+): in (?P<function>\S+)$")
_CHAINED = re.compile(r"^(The above exception was the direct cause|During handling of the above exception)")
_CAPTURE_HEADER = re.compile(r"^-+ Captured \w+ -+$", re.MULTILINE)
_K_IDENT = re.compile(r"^[\w:+\-.\[\]\\/]+$")
_START = re.compile(r"^(?P<id>\S.*::.*\S) $")
_OUTCOME = re.compile(r"^\s*(?P<id>\S.*?::.*?)(?: \(fixtures used: [^)]*\))? "
                      r"(?P<word>PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b")
_BANNER = re.compile(r"^=+ (?:FAILURES|ERRORS|PASSES|warnings summary|short test summary info|.* in [\d.]+s.*) =+$")
_WORDS = {"PASSED": Outcome.PASSED, "XPASS": Outcome.PASSED, "FAILED": Outcome.FAILED, "ERROR": Outcome.FAILED,
          "SKIPPED": Outcome.SKIPPED, "XFAIL": Outcome.SKIPPED}
_EXIT_HINTS = {2: "pytest was interrupted", 3: "pytest hit an internal error",
               4: "pytest rejected its command line (check addopts and plugins in the project's pytest config)"}


class PytestAdapter(TestAdapter):
    name = "pytest"
    display_name = "pytest"
    language = "python"
    stack_kind = StackKind.PYTHON

    def detect(self, project_root: Path, command: str | None) -> int:
        """90 for pytest configuration (pytest.ini, [tool.pytest…] in pyproject.toml, [tool:pytest] in
        setup.cfg, [pytest] in tox.ini, a conftest.py); 80 for test files importing pytest; 40 for test files
        importing neither pytest nor unittest (pytest runs plain `def test_*` files; unittest finds nothing)."""
        for name, section in _CONFIG_SECTIONS:
            path = project_root / name
            if path.is_file() and (section is None or section in path.read_text(errors="replace")):
                return 90
        if any((project_root / d / "conftest.py").is_file() for d in (".", "tests", "test")):
            return 90
        files = python_test_files(project_root)
        if any(imports_module(f, "pytest") for f in files):
            return 80
        return 40 if files and not all(imports_module(f, "unittest") for f in files) else 0

    def _command(self, project_root: Path, report_dir: Path, selection: list[str]) -> TestCommand:
        report = report_dir / "junit.xml"
        argv = [project_python(project_root), "-m", "pytest", "--verbosity=1", "--setup-show",
                "--tb=short", "--color=no", "-o", "junit_family=xunit1", "-o", "junit_logging=all",
                f"--junitxml={report}", *selection]
        return TestCommand(argv=argv, cwd=project_root, env={"PYTHONUNBUFFERED": "1"}, report=report)

    def suite_command(self, project_root: Path, level: TestLevel | None, command: str | None,
                      report_dir: Path) -> TestCommand:
        if level is None:
            return self._command(project_root, report_dir, [])
        directory = level_directory(project_root, level)
        selection = [str(directory.relative_to(project_root))] if directory else ["-m", level.value]
        return self._command(project_root, report_dir, selection)

    def single_test_command(self, project_root: Path, test: str, command: str | None,
                            report_dir: Path) -> TestCommand:
        return self._command(project_root, report_dir, self._selection(project_root, test))

    @staticmethod
    def _selection(project_root: Path, test: str) -> list[str]:
        """A node id (`tests/test_x.py::TestA::test_b`, as results name tests) is passed as is; anything else is
        a `-k` substring, each `::` part of it a keyword that must match."""
        if "::" in test and (project_root / test.split("::", 1)[0]).is_file():
            return [test]
        parts = [p for p in test.split("::") if p]
        if not parts or not all(_K_IDENT.match(p) and p not in ("and", "or", "not") for p in parts):
            raise ValidationError(
                f"pytest cannot select tests by {test!r}: pass a test's node id as results show it "
                "(tests/test_x.py::test_name) or part of a name made of letters, digits and _ . - [ ] / :")
        return ["-k", " and ".join(parts)]

    def rerun_command(self, project_root: Path, test: str, command: str | None) -> str:
        python = shown_python(project_python(project_root), project_root)
        return shlex.join([python, "-m", "pytest", *self._selection(project_root, test)])

    def on_line(self, line: str, stream: str, progress: LiveProgress, now_ns: int) -> None:
        """Verbose lines: `id ` when a test starts (ended early by --setup-show), `id PASSED` and the like when
        it ends. A teardown ERROR after PASSED is not counted twice: ERROR counts only for the running test."""
        if stream != "stdout" or progress.phase is Phase.SUITES_FINISHED:
            return
        if _BANNER.match(line):
            progress.phase = Phase.SUITES_FINISHED
            return
        if outcome := _OUTCOME.match(line):
            if outcome["word"] != "ERROR" or progress.current_test == outcome["id"]:
                progress.finish(_WORDS[outcome["word"]])
        elif start := _START.match(line):
            progress.start(start["id"], now_ns)

    def parse(self, run: FinishedRun) -> ParsedRun:
        root = run.command.cwd.resolve()
        output = tail(run.stdout + "\n" + run.stderr)
        try:
            assert run.command.report is not None
            suite = ET.parse(run.command.report).getroot()
        except (OSError, ET.ParseError):
            return ParsedRun([], error=self._no_report(run, output))
        cases: list[TestCase] = []
        broken: list[TestCase] = []
        for element in suite.iter("testcase"):
            case = self._case(element, root)
            is_collection = element.get("classname") == "" and any(
                e.get("message") == "collection failure" for e in element.iter("error"))
            (broken if is_collection else cases).append(case)
        if broken and not cases:
            listed = "\n".join(f"- {c.name}: {c.message}" for c in broken)
            return ParsedRun([], error=f"pytest could not collect the tests, so none ran:\n{listed}\n"
                                       f"Fix these errors and run again.\n\n{output}")
        if not cases and run.exit_code not in (0, 1, 5):
            return ParsedRun([], error=self._no_report(run, output))
        return ParsedRun(cases + broken)

    @staticmethod
    def _no_report(run: FinishedRun, output: str) -> str:
        code = run.exit_code
        if "No module named pytest" in output:
            return (f"pytest is not installed for {run.command.argv[0]}. Install it there (python -m pip install "
                    f"pytest) or give the project a .venv that has it.\n\n{output}")
        what = f"was killed by signal {-code}" if code < 0 else _EXIT_HINTS.get(code, f"exited with {code}")
        return f"pytest ran no tests: {what}. Its output:\n\n{output}"

    def _case(self, element: ET.Element, root: Path) -> TestCase:
        file_attr = element.get("file")
        test_file = (root / file_attr).resolve() if file_attr else None
        classname, name = element.get("classname", ""), element.get("name", "")
        module = file_attr[: -len(".py")].replace("/", ".") if file_attr and file_attr.endswith(".py") else None
        if file_attr and module and (classname == module or classname.startswith(module + ".")):
            node = "::".join([file_attr, *filter(None, classname[len(module) + 1:].split(".")), name])
        else:
            node = "::".join(filter(None, [classname, name]))
        line = int(element.get("line", "-1")) + 1 or None
        case = TestCase(name=node, outcome=Outcome.PASSED, duration_ms=float(element.get("time", "0")) * 1000,
                        file=str(test_file) if test_file else None, line=line, output=self._output(element))
        problems = [*element.iter("failure"), *element.iter("error")]
        skipped = element.find("skipped")
        if problems:
            case.outcome = Outcome.FAILED
            text = problems[0].text or ""
            frames = self._frames(text, root)
            where, case.line = locate(frames, test_file)
            case.file = str(where) if where else case.file
            case.stack = [frame.label(root) for frame in frames]
            detail = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
            case.message = problems[0].get("message") or "\n".join(detail) or text.strip()
            if case.message == "collection failure":
                case.message = "\n".join(detail) or text.strip()
        elif skipped is not None:
            case.outcome = Outcome.SKIPPED
            reason = skipped.get("message", "")
            case.message = f"expected failure: {reason}" if skipped.get("type") == "pytest.xfail" else reason
        return case

    @staticmethod
    def _frames(text: str, root: Path) -> list[Frame]:
        """The project's frames of the short traceback, innermost first; for chained exceptions, those of the
        last one (the exception the test failed with)."""
        frames: list[Frame] = []
        for line in text.splitlines():
            if _CHAINED.match(line):
                frames = []
            elif match := _SHORT_FRAME.match(line):
                path = Path(os.path.normpath(root / match["file"]))
                if is_user_file(path, root):
                    number = int(match["line"])
                    frames.append(Frame(path, number, qualified_function(path, number, match["function"])))
        return frames[::-1]

    @staticmethod
    def _output(element: ET.Element) -> str:
        parts = [_CAPTURE_HEADER.sub("", e.text or "").strip() for e in (*element.iter("system-out"),
                                                                          *element.iter("system-err"))]
        return "\n".join(p for p in parts if p)

    def suggest_traces(self, case: TestCase) -> list[str]:
        return python_suggestions(case)

    def project_info(self, project_root: Path) -> ProjectInfo:
        return python_project_info(project_root, "pytest")
