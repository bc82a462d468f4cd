"""What the JavaScript adapters share: finding the framework in the project's node_modules, reading package.json
for detection, test-level directories, the running test from a helper's stderr lines, reading V8 stack frames into
a failure's location and trace suggestions, and reading the Jest-shaped JSON report that both Jest and Vitest
write.

Not an adapter (the leading underscore keeps the registry from scanning it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from strobe.errors import ValidationError
from strobe.testing.adapters.base import MAX_SUGGESTIONS, FinishedRun, tail
from strobe.testing.model import LiveProgress, Outcome, ParsedRun, TestCase, TestLevel

# ---- the project ----------------------------------------------------------------------------------

_PRUNED_DIRS = {"node_modules", "dist", "build", "coverage", "out", "vendor", "target"}
_MAX_WALKED_DIRS = 5000
_DEPENDENCY_KEYS = ("dependencies", "devDependencies", "peerDependencies", "optionalDependencies")


def find_bin(project_root: Path, name: str) -> Path | None:
    """node_modules/.bin/<name> in the project or the nearest directory above it that has one (workspaces
    install at the top), so the run uses the version the project pins."""
    root = project_root.resolve()
    for directory in (root, *root.parents):
        candidate = directory / "node_modules" / ".bin" / name
        if candidate.exists() and os.access(candidate, os.X_OK):
            return candidate
    return None


def tool_argv(project_root: Path, name: str) -> list[str]:
    """How to start the framework: the project's binary, else one on PATH, else `npx --no-install`, which
    fails fast without downloading anything, and parse() turns its complaint into an install hint."""
    found = find_bin(project_root, name)
    if found:
        return [str(found)]
    on_path = shutil.which(name)  # a global install
    return [on_path] if on_path else ["npx", "--no-install", name]


def read_package_json(project_root: Path) -> dict[str, Any]:
    """package.json as a dict; {} when it is missing or not valid JSON (detection then just scores lower)."""
    try:
        data = json.loads((project_root / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _word(tool: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![\w@-]){re.escape(tool)}(?![\w-])")


def script_runs(package: dict[str, Any], tool: str) -> bool:
    """Whether a package.json script starts `tool` (`"test": "jest --ci"`, `"test:unit": "vitest run"`):
    what `npm test` runs is the strongest sign of which framework the project uses."""
    scripts = package.get("scripts")
    if not isinstance(scripts, dict):
        return False
    word = _word(tool)
    return any(isinstance(s, str) and word.search(s) for s in scripts.values())


def depends_on(package: dict[str, Any], tool: str) -> bool:
    return any(isinstance(package.get(key), dict) and tool in package[key] for key in _DEPENDENCY_KEYS)


def has_file(project_root: Path, glob: str) -> bool:
    """A config file such as `jest.config.*` at the project root."""
    return any(path.is_file() for path in project_root.glob(glob))


def detect_score(project_root: Path, tool: str, config_globs: tuple[str, ...], confidence: int) -> int:
    """`confidence` (the spec's score) for a config file, a `"<tool>"` section in package.json or a script
    running the tool; 6 less when the tool is merely a dependency. A package.json that lists both Jest and
    Vitest still picks the one its config or scripts use, and any framework's config file outranks another
    framework that is only installed."""
    if any(has_file(project_root, glob) for glob in config_globs):
        return confidence
    package = read_package_json(project_root)
    if tool in package or script_runs(package, tool):
        return confidence
    return confidence - 6 if depends_on(package, tool) else 0


def walk_dirs(root: Path) -> Iterator[Path]:
    """The project's directories, skipping dependencies, build outputs and hidden directories."""
    for seen, (directory, subdirs, _) in enumerate(os.walk(root)):
        if seen >= _MAX_WALKED_DIRS:
            return
        subdirs[:] = sorted(d for d in subdirs if d not in _PRUNED_DIRS and not d.startswith("."))
        yield Path(directory)


def imports_module(project_root: Path, files: re.Pattern[str], module: str, max_scanned: int = 500) -> bool:
    """Whether one of the project's files named like `files` (the first `max_scanned`) imports `module`
    ('bun:test', 'node:test') in its first 8 KB, where imports are."""
    scanned = 0
    for directory in walk_dirs(project_root):
        for entry in sorted(os.listdir(directory)):
            if not files.search(entry):
                continue
            scanned += 1
            if scanned > max_scanned:
                return False
            try:
                with open(directory / entry, encoding="utf-8", errors="replace") as handle:
                    head = handle.read(8192)
            except OSError:
                continue
            if f"'{module}'" in head or f'"{module}"' in head:
                return True
    return False


def test_files(project_root: Path, name: re.Pattern[str], limit: int = 50) -> list[str]:
    """Files whose name matches `name` (e.g. `*.test.js`), relative to the project, for `noTests` results."""
    found: list[str] = []
    for directory in walk_dirs(project_root):
        for entry in sorted(os.listdir(directory)):
            if name.search(entry) and (directory / entry).is_file():
                found.append(str((directory / entry).relative_to(project_root)))
                if len(found) >= limit:
                    return found
    return found


def level_dirs(project_root: Path, level: TestLevel, display: str) -> list[str]:
    """JavaScript frameworks have no test levels of their own: Strobe runs a level from the directories named
    after it (`test/unit`, `tests/e2e`, `src/integration`, ...), as paths relative to the project."""
    found = [str(d.relative_to(project_root)) for d in walk_dirs(project_root)
             if d.name == level.value and d != project_root]
    if not found:
        raise ValidationError(
            f"{display} has no test levels of its own, so Strobe runs a level from directories named "
            f"'{level.value}' (e.g. tests/{level.value}/), and {project_root} has none. Omit `level` to run the "
            f"whole suite, or pass `test` to run one test."
        )
    return found


def js_regex_escape(text: str) -> str:
    """A literal inside a JavaScript RegExp (what `-t` takes): only the characters JS treats specially, since
    Python's re.escape adds escapes (like `\\-`) that a RegExp compiled with /u rejects."""
    return re.sub(r"[\\^$.*+?()[\]{}|/]", r"\\\g<0>", text)


def js_regex_unescape(pattern: str) -> str:
    return re.sub(r"\\(.)", r"\1", pattern)


def relative(path: str, cwd: Path) -> str:
    """A path relative to the project when it is inside it (what the agent opens), else unchanged."""
    absolute = Path(path) if os.path.isabs(path) else cwd / path
    for base in (cwd, cwd.resolve()):
        try:
            return str(absolute.relative_to(base))
        except ValueError:
            continue
    return path


# ---- live progress from a helper Strobe writes into the run's report dir ------------------------------

def write_helper(report_dir: Path, name: str, source: str) -> Path:
    """A reporter or hook file Strobe writes for one run (the user's files are never touched)."""
    path = report_dir / name
    path.write_text(source, encoding="utf-8")
    return path


def tagged_line(line: str, tag: str) -> tuple[str, str] | None:
    """(event, test name) from a helper's stderr line `<tag><event> <JSON name>`; None for any other line."""
    if not line.startswith(tag):
        return None
    event, _, raw = line[len(tag):].rstrip().partition(" ")
    try:
        name = json.loads(raw) if raw else ""
    except ValueError:
        name = raw
    return event, str(name)


def follow_starts(line: str, stream: str, tag: str, progress: LiveProgress, now_ns: int) -> bool:
    """A reporter's "start <name>" / "end <name>" lines set and clear the running test (results are counted
    from the runner's own lines); True when the line was one of them."""
    parsed = tagged_line(line, tag) if stream == "stderr" else None
    if parsed is None:
        return False
    event, name = parsed
    if event == "start":
        progress.start(name, now_ns)
    elif event == "end":
        progress.ended(name)
    return True


# ---- stacks, messages, suggestions ------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# "at fn (/x.js:3:9)", "at /x.js:3:9", "at async fn (file:///x.js:3:9)", "at new Foo (x.js:3:9)"
_FRAME = re.compile(r"^\s*(?:at )?(?:(?P<fn>[^()]+?) \((?P<file>[^()]+):(?P<line>\d+):\d+\)"
                    r"|(?P<bare>[^()]+):(?P<bare_line>\d+):\d+)\s*$")
_RUNTIME_FILES = ("node:", "internal/", "<anonymous>", "native", "evalmachine")
# Receivers V8 invents for module-level functions and test callbacks: `Object.parsePrice`, `Context.<anonymous>`.
_RUNTIME_RECEIVERS = {"Object", "Module", "Context", "Promise", "Function", "process", "Array", "Generator"}
_IDENTIFIER_PATH = re.compile(r"^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*$")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


@dataclass(frozen=True)
class Frame:
    function: str | None
    file: str  # a path; a file:// URL's scheme is removed
    line: int

    @property
    def in_project(self) -> bool:
        return not self.file.startswith(_RUNTIME_FILES) and "/node_modules/" not in self.file


def parse_frame(text: str) -> Frame | None:
    match = _FRAME.match(text)
    if match is None:
        return None
    function = match["fn"]
    if function:
        function = re.sub(r"^(?:async |new )|\s*\[as [^\]]*\]$", "", function).strip() or None
    file = match["file"] or match["bare"]
    if file.startswith("file://"):
        file = unquote(file.removeprefix("file://"))
    return Frame(function, file, int(match["line"] or match["bare_line"]))


def split_error(text: str) -> tuple[str, list[str]]:
    """A printed error into its message (the lines before the first frame) and its frames, innermost first,
    without their "at " (the form TestCase.stack keeps)."""
    message: list[str] = []
    frames: list[str] = []
    for line in strip_ansi(text).splitlines():
        stripped = line.strip()
        if stripped.startswith("at ") and _FRAME.match(stripped):
            frames.append(stripped[3:])
        elif not frames:
            message.append(line.rstrip())
    return "\n".join(message).strip(), frames


def _is_file(frame_file: str, test_file: str, cwd: Path) -> bool:
    if frame_file == test_file:
        return True
    a = Path(frame_file) if os.path.isabs(frame_file) else cwd / frame_file
    b = Path(test_file) if os.path.isabs(test_file) else cwd / test_file
    return a.resolve() == b.resolve()


def locate(case: TestCase, test_file: str | None, cwd: Path) -> None:
    """Point a failure at the line that failed: the first stack frame in the test's file (the assertion, more
    useful than the `test(...)` line a report's location gives), else the first frame in project code.
    Keeps the report's file and line when the stack has neither (a timeout, an error thrown by the runner)."""
    frames = [f for f in (parse_frame(line) for line in case.stack) if f is not None and f.in_project]
    pick = next((f for f in frames if test_file and _is_file(f.file, test_file, cwd)), None)
    if pick is None and case.line is None and frames:
        pick = frames[0]
    if pick is not None:
        case.file, case.line = relative(pick.file, cwd), pick.line
    if test_file and case.file and case.line is not None and _is_file(case.file, test_file, cwd):
        case.source_line = _source_line(cwd / case.file, case.line)  # the test's own line: what it called


_MAX_SOURCE_LINE = 2000


def _source_line(path: Path, line: int) -> str | None:
    try:
        with path.open(encoding="utf-8", errors="replace") as source:
            return next((text[:_MAX_SOURCE_LINE] for number, text in enumerate(source, 1) if number == line), None)
    except OSError:
        return None


def suggest(case: TestCase) -> list[str]:
    """Trace patterns for a traced rerun: the functions on the failure's stack in project code, innermost first
    (`Class.*` for a method, the bare name for a function), then what the test's failing line calls, then their
    files and the test's file as `@file:`. Frames in the test file itself are only used for their file: V8 names
    test callbacks after whatever they call (`Object.toBe`), which would suggest tracing the assertion library.
    Some of these may select nothing (a test file of anonymous callbacks): the daemon keeps those that select
    a function of the project (daemon/js_suggestions.py)."""
    functions: list[str] = []
    files: list[str] = []
    own = Path(case.file).name if case.file else None
    called = _called(case.source_line) if case.source_line and own else []
    for frame in (parse_frame(line) for line in case.stack):
        if frame is None or not frame.in_project:
            continue
        base = Path(frame.file).name
        if base == own:
            continue
        files.append(f"@file:{base}")
        name = frame.function or ""
        if not _IDENTIFIER_PATH.match(name):
            continue
        receiver, _, method = name.rpartition(".")
        if not receiver:
            functions.append(name)
        elif receiver in _RUNTIME_RECEIVERS:
            functions.append(method)
        else:
            functions.append(f"{receiver.rpartition('.')[2]}.*")
    if own:
        files.append(f"@file:{own}")
    return list(dict.fromkeys(functions + called + files))[:MAX_SUGGESTIONS]


_CALL = re.compile(r"(?:(?P<receiver>[A-Za-z_$][\w$]*)?\s*(?P<dot>\.)\s*)?(?<![\w$])(?P<name>[A-Za-z_$][\w$]*)\s*\(")
_BUILTIN_RECEIVERS = frozenset({"Math", "JSON", "Object", "Array", "Number", "String", "Promise", "Date", "console",
                                "Reflect", "Symbol", "BigInt", "Buffer", "process", "t", "assert", "expect"})
# Calls on a test's line that are the test framework's or the language's, never the project's.
_NOT_PROJECT_CALLS = frozenset({
    "expect", "assert", "it", "test", "describe", "require", "import", "await", "if", "for", "while", "switch",
    "return", "typeof", "new", "function", "catch", "super", "then", "resolves", "rejects", "not", "equal",
    "strictEqual", "deepEqual", "deepStrictEqual", "ok", "throws", "is", "same"})


def _called(text: str) -> list[str]:
    """The project functions a failing test line calls, as patterns: `average` for `average([1, 2, 3])`,
    `**.count` for `inv.count("A")` (any class's `count`). The test framework's calls (expect, matchers named
    `toBe`...) are left out; what is left is a guess the daemon checks against the project's functions."""
    found: list[str] = []
    for match in _CALL.finditer(text):
        name = match["name"]
        if name in _NOT_PROJECT_CALLS or (match["dot"] and re.match(r"to[A-Z]", name)):  # .toBe(), .toEqual()
            continue
        if match["receiver"] in _BUILTIN_RECEIVERS:  # Math.round(), t.step(), assert.equal()
            continue
        found.append(f"**.{name}" if match["dot"] else name)
    return found


# ---- reports ----------------------------------------------------------------------------------------


_NOT_INSTALLED = ("npx canceled due to missing packages", "could not determine executable", "command not found")


def missing_report(display: str, run: FinishedRun, hint: str) -> ParsedRun:
    """The suite never got to write its report: say how the process ended, what to do, and its output's tail."""
    output = strip_ansi("\n".join(p for p in (run.stdout, run.stderr) if p.strip()))
    how = f"killed by signal {-run.exit_code}" if run.exit_code < 0 else f"exit code {run.exit_code}"
    if any(sign in output for sign in _NOT_INSTALLED):
        hint = (f"{display} is not installed where this project can find it: run `npm install` in "
                f"{run.command.cwd} (`npm install --save-dev {display.lower()}` if package.json does not list it).")
    return ParsedRun([], error=f"{display} wrote no test report ({how}). {hint}\n{tail(output)}")


def load_json(path: Path | None) -> Any:
    """The report's JSON, or None when it is missing, empty or cut short (the process died writing it)."""
    if path is None:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


_OUTCOMES = {"passed": Outcome.PASSED, "failed": Outcome.FAILED}


def jest_style_cases(report: dict[str, Any], cwd: Path, separator: str) -> tuple[list[TestCase], list[TestCase]]:
    """Cases from the report Jest writes with `--json` and Vitest with `--reporter=json` (the same shape):
    testResults[] per file, assertionResults[] per test. A file that failed before any test ran (a syntax
    error, a failed import) has no assertions and a message: it comes back in the second list, as a failed
    case named after the file. `separator` joins describe blocks and title the way the framework's `-t`
    matches them ("a b" for Jest, "a > b" for Vitest), so a name can be passed back as `test`."""
    cases: list[TestCase] = []
    broken: list[TestCase] = []
    for suite in report.get("testResults") or []:
        test_file = str(suite.get("name") or "")
        assertions = suite.get("assertionResults") or []
        if not assertions and suite.get("status") == "failed":
            name = relative(test_file, cwd)
            message = load_error(str(suite.get("message") or suite.get("failureMessage") or ""))
            broken.append(TestCase(name, Outcome.FAILED, file=name, message=message or "The file failed to load."))
            continue
        for test in assertions:
            cases.append(_jest_case(test, test_file, cwd, separator))
    return cases, broken


_ERROR_LINE = re.compile(r"^\s*(?:[\w.]*Error|Cannot find module)\b")


def load_error(text: str) -> str:
    """Why a test file failed to load, without the frames of the loader it failed in and without the advice Jest
    prints before it: from the first line naming an error (`SyntaxError: <file>: Unexpected token (23:0)`, and
    the source excerpt under it) when there is one."""
    message, _ = split_error(text)
    lines = message.splitlines()
    start = next((i for i, line in enumerate(lines) if _ERROR_LINE.match(line)), 0)
    return textwrap.dedent("\n".join(lines[start:])).strip()


def _jest_case(test: dict[str, Any], test_file: str, cwd: Path, separator: str) -> TestCase:
    titles = [str(t) for t in test.get("ancestorTitles") or []]
    name = separator.join([*titles, str(test.get("title") or test.get("fullName") or "")])
    status = str(test.get("status"))
    outcome = _OUTCOMES.get(status, Outcome.SKIPPED)  # pending, skipped, todo, disabled
    location = test.get("location") or {}
    duration = test.get("duration")
    case = TestCase(name, outcome, duration_ms=float(duration) if isinstance(duration, int | float) else None,
                    file=relative(test_file, cwd) if test_file else None,
                    line=location.get("line") if isinstance(location.get("line"), int) else None)
    if status == "todo":
        case.message = "todo"
    if outcome is Outcome.FAILED:
        texts = [str(m) for m in test.get("failureMessages") or []]
        message, frames = split_error(texts[0]) if texts else ("", [])
        extra = [split_error(t)[0] for t in texts[1:]]
        case.message = "\n".join([message, *extra]).strip() or "failed"
        case.stack = frames
        locate(case, test_file or None, cwd)
    return case


def drop_filtered(cases: list[TestCase], argv: list[str], flag: str) -> list[TestCase]:
    """Jest and Vitest report the tests a `-t` filter left out as skipped; a one-test run should list only the
    tests it selected (a skipped test that matches the filter is still reported)."""
    if flag not in argv or argv.index(flag) + 1 >= len(argv):
        return cases
    pattern = argv[argv.index(flag) + 1]
    try:  # the patterns Strobe builds (escaped punctuation, groups) mean the same to Python's re
        wanted = re.compile(pattern, re.IGNORECASE)
    except re.error:
        wanted = re.compile(re.escape(js_regex_unescape(pattern)), re.IGNORECASE)
    return [c for c in cases if c.outcome is not Outcome.SKIPPED or wanted.search(c.name)]


def broken_files_result(display: str, cases: list[TestCase], broken: list[TestCase], run: FinishedRun) -> ParsedRun:
    """When every file failed to load, the suite did not run: an error with the first file's message. When some
    ran, the broken files stay as failed cases, so the summary does not hide them."""
    if broken and not cases:
        files = ", ".join(case.name for case in broken)
        detail = tail(broken[0].message or "", 25) or tail(strip_ansi(run.stdout + "\n" + run.stderr))
        return ParsedRun([], error=f"{display} could not load {files}, so no test ran (a syntax error, a failed "
                                   f"import?). Fix what the first error below points at and rerun.\n{detail}")
    return ParsedRun(cases + broken)
