"""`go test` for Go modules, read through `go test -json` (test2json events on stdout, one per line).

Each event names an action (run, output, pass, fail, skip, and since Go 1.24 build-output/build-fail) for a
package and, when it concerns one, a test; subtests ("TestParent/case") are cases of their own. What a test
logged ("    calc_test.go:12: message") comes as its output events: the failure's file, line and message are
read from there, and a panic's goroutine trace gives the stack.

`-count=1` is always passed: go test would otherwise replay a cached result without running the test binary,
and a traced or watched run would then see nothing.

Levels follow the usual Go conventions, found by reading the *_test.go files:
- a test is an integration (or e2e) test when its file's `//go:build` line names the tag `integration` (`e2e`),
  its file name contains "integration" ("e2e"), or its function name does (TestIntegrationDB, TestE2ELogin);
- unit: `-short` (long tests skip themselves with testing.Short()), and `-skip` (Go >= 1.20) the
  integration/e2e tests that no build tag already excludes;
- integration / e2e: `-tags <level> -run '^(TestA|TestB)$'` for the tests found.

Packages that fail to build: when no test ran at all, parse returns ParsedRun.error with the compiler's
messages; when other packages ran, each broken package becomes a failed case "<package> [build failed]" with
the compiler's first error as file/line/message, so the results that exist are not lost.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import defaultdict
from pathlib import Path, PurePosixPath
from typing import Any

from strobe.errors import ValidationError
from strobe.testing.adapters.base import MAX_SUGGESTIONS, FinishedRun, TestAdapter, tail
from strobe.testing.model import LiveProgress, Outcome, ParsedRun, Phase, ProjectInfo, TestCase, TestCommand, TestLevel

_OUTCOMES = {"pass": Outcome.PASSED, "fail": Outcome.FAILED, "skip": Outcome.SKIPPED}
_LOG = re.compile(r"^(\s+)([\w.\-]+\.go):(\d+): ?(.*)$")  # "    calc_test.go:12: message"
_FRAME_CALL = re.compile(r"^(\S.*)\([^()]*\)$")  # "example.com/m/calc.(*T).Div(0x1, 0x0)"
_FRAME_LOCATION = re.compile(r"^\t(\S+\.go):(\d+)")
_COMPILER = re.compile(r"^(\S+\.go):(\d+)(?::\d+)?: (.+)$")
_TEST_FUNC = re.compile(r"^func (Test\w*)\(\w+ \*testing\.T\)", re.MULTILINE)
_BUILD_TAGS = re.compile(r"^//go:build (.+)$", re.MULTILINE)
_REGEX_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$])")
_LEVEL_WORDS = {TestLevel.INTEGRATION: "integration", TestLevel.E2E: "e2e"}
_SKIPPED_DIRS = {"vendor", "testdata", "node_modules"}


class GoTestAdapter(TestAdapter):
    name = "go"
    display_name = "Go"
    language = "go"

    def detect(self, project_root: Path, command: str | None) -> int:
        return 90 if (project_root / "go.mod").is_file() or (project_root / "go.work").is_file() else 0

    def suite_command(self, project_root: Path, level: TestLevel | None, command: str | None,
                      report_dir: Path) -> TestCommand:
        return _command(project_root, _level_args(project_root, level))

    def single_test_command(self, project_root: Path, test: str, command: str | None,
                            report_dir: Path) -> TestCommand:
        if not test.strip():
            raise ValidationError("`test` is empty: pass part of a test's name, e.g. 'TestParse' or 'TestTable/empty'.")
        # -run splits its regex at "/" into one pattern per subtest level; each level matches by substring.
        return _command(project_root, ["-run", "/".join(_escape(part) for part in test.split("/"))])

    def rerun_command(self, project_root: Path, test: str, command: str | None) -> str:
        exact = "/".join(f"^{_escape(part)}$" for part in test.split("/"))
        return f"go test -count=1 -run {shlex.quote(exact)} {' '.join(_package_patterns(project_root))}"

    def on_line(self, line: str, stream: str, progress: LiveProgress, now_ns: int) -> None:
        event = _event(line) if stream == "stdout" else None
        if event is None:
            return
        action, test = event.get("Action"), event.get("Test")
        if action == "build-output":
            progress.phase = Phase.COMPILING
        elif test and action == "run":
            progress.start(str(test), now_ns)
        elif test and action in _OUTCOMES:
            progress.finish(_OUTCOMES[str(action)])

    def parse(self, run: FinishedRun) -> ParsedRun:
        root = run.command.cwd
        modules = _modules(root)
        build_output: dict[str, list[str]] = defaultdict(list)
        package_output: dict[str, list[str]] = defaultdict(list)
        outputs: dict[tuple[str, str], list[str]] = defaultdict(list)
        cases: dict[tuple[str, str], TestCase] = {}
        unfinished: set[tuple[str, str]] = set()
        failed_packages: dict[str, str | None] = {}
        events = [event for event in map(_event, run.stdout.splitlines()) if event is not None]
        for event in events:
            action, package, test = event.get("Action"), str(event.get("Package", "")), event.get("Test")
            if action == "build-output":
                build_output[str(event.get("ImportPath", ""))].append(str(event.get("Output", "")))
            elif not test:
                if action == "output":
                    package_output[package].append(str(event.get("Output", "")))
                elif action == "fail":
                    failed_packages[package] = event.get("FailedBuild")
            elif action == "run":
                cases[package, test] = TestCase(name=test, outcome=Outcome.FAILED)
                unfinished.add((package, test))
            elif action == "output":
                outputs[package, test].append(str(event.get("Output", "")))
            elif action in _OUTCOMES:
                case = cases.setdefault((package, test), TestCase(name=test, outcome=Outcome.FAILED))
                case.outcome = _OUTCOMES[str(action)]
                elapsed = event.get("Elapsed")
                case.duration_ms = float(elapsed) * 1000 if isinstance(elapsed, int | float) else None
                unfinished.discard((package, test))
        for (package, test), case in cases.items():
            _describe(case, outputs[package, test], _package_dir(modules, package), root)
            if (package, test) in unfinished:
                case.message = (f"{case.message or 'The test started but never finished'}\n(its test binary exited "
                                "before the test finished)\n" + tail("".join(package_output[package]), 10))
            elif case.outcome is Outcome.FAILED and not case.message:
                failed_subtests = [c.name for (p, _), c in cases.items() if p == package and
                                   c.name.startswith(f"{test}/") and c.outcome is Outcome.FAILED]
                case.message = (f"Failed subtests: {', '.join(failed_subtests)}" if failed_subtests
                                else "The test failed without logging a message.")
            if case.outcome is Outcome.FAILED and not case.stack:
                case.stack = [f"{package}.{test.split('/')[0]}"]  # the test function: where the failure is
        broken = [_package_failure(package, failed_build, build_output, package_output[package], run.stderr)
                  for package, failed_build in failed_packages.items()
                  if not any(p == package and c.outcome is Outcome.FAILED for (p, _), c in cases.items())]
        if not cases and (broken or (not events and run.exit_code != 0)):
            return ParsedRun([], error=_run_error(broken, run))
        return ParsedRun([*cases.values(), *broken])

    def suggest_traces(self, case: TestCase) -> list[str]:
        """The package of each project frame in the stack (`example.com/m/calc.*`: Go names functions by
        their import path), innermost first, then the failing file."""
        out: list[str] = []
        for frame in case.stack:
            name, _, location = frame.partition(" at ")
            if location.startswith(("/", "vendor/")):
                continue  # the Go runtime, the testing package, or a module dependency
            slash = name.rfind("/")
            dot = name.find(".", slash + 1)
            pattern = f"{name[:dot]}.*" if dot > 0 else None
            if pattern and pattern not in out:
                out.append(pattern)
        if case.file:
            out.append(f"@file:{Path(case.file).name}")
        return out[:MAX_SUGGESTIONS]

    def project_info(self, project_root: Path) -> ProjectInfo:
        files = [str(path.relative_to(project_root)) for path in _test_files(project_root)][:50]
        return ProjectInfo(language=self.language, build_system=self.name, test_files=files)


def _command(project_root: Path, go_args: list[str]) -> TestCommand:
    argv = ["go", "test", "-json", "-count=1", *go_args, *_package_patterns(project_root)]
    return TestCommand(argv=argv, cwd=project_root)


def _package_patterns(root: Path) -> list[str]:
    """`./...` for a module; for a go.work workspace (where `./...` is refused), each module it uses."""
    if (root / "go.mod").is_file():
        return ["./..."]
    patterns = []
    for directory in _workspace_dirs(root):
        path = str(PurePosixPath(directory))
        patterns.append("./..." if path == "." else f"{path}/..." if path.startswith("../") else f"./{path}/...")
    return patterns or ["./..."]


def _workspace_dirs(root: Path) -> list[str]:
    """The directories of go.work's `use` directives (`use ./a` or a `use ( … )` block)."""
    try:
        text = (root / "go.work").read_text()
    except OSError:
        return []
    dirs: list[str] = []
    for block, single in re.findall(r"^use\s*\(([^)]*)\)|^use\s+(\S+)", text, re.MULTILINE):
        dirs += [d.split("//")[0].strip() for d in block.splitlines()] if block else [single]
    return [d.strip('"') for d in dirs if d.strip('"')]


def _escape(text: str) -> str:
    """Go regexp syntax for `text` taken literally (Go accepts a backslash before any punctuation)."""
    return _REGEX_SPECIAL.sub(r"\\\1", text)


def _event(line: str) -> dict[str, Any] | None:
    text = line.strip()
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) and "Action" in value else None


def _modules(root: Path) -> dict[str, str]:
    """Module path -> its directory relative to `root` ("" for the root module), from go.mod or go.work."""
    found: dict[str, str] = {}
    for directory in [".", *_workspace_dirs(root)]:
        try:
            match = re.search(r"^module\s+(\S+)", (root / directory / "go.mod").read_text(), re.MULTILINE)
        except OSError:
            continue
        if match:
            found[match.group(1).strip('"')] = directory
    return found


def _package_dir(modules: dict[str, str], package: str) -> str | None:
    """The package's directory relative to the project root ("" for the root package), when it is in it."""
    for module, directory in modules.items():
        if package == module or package.startswith(module + "/"):
            path = str(PurePosixPath(directory, package[len(module) + 1:]))
            return "" if path == "." else path
    return None


def _describe(case: TestCase, output: list[str], directory: str | None, root: Path) -> None:
    """Fill in message, file, line and stack from what the test printed."""
    case.output = "".join(output)
    lines = case.output.splitlines()
    panic = next((i for i, line in enumerate(lines) if line.startswith("panic: ")), None)
    if panic is not None and case.outcome is Outcome.FAILED:
        case.message = re.sub(r"\s*\[recovered[^\]]*\]", "", lines[panic][len("panic: "):]).strip()
        case.stack = _goroutine_frames(lines[panic + 1:], root)
        locations = (frame.partition(" at ")[2] for frame in case.stack)
        project = [loc for loc in locations if loc and not loc.startswith(("/", "vendor/"))]
        if project:
            where, _, at_line = project[0].rpartition(":")
            case.file, case.line = where, int(at_line)
        return
    entries: list[tuple[str, int, list[str]]] = []  # (file, line, message lines) of each t.Log/t.Error/t.Skip
    indent = None
    for line in lines:
        match = _LOG.match(line)
        if match:
            indent = len(match.group(1))
            entries.append((match.group(2), int(match.group(3)), [match.group(4)]))
        elif entries and indent is not None and line.startswith(" " * (indent + 4)):
            entries[-1][2].append(line[indent + 4:])
        else:
            indent = None
    if case.outcome is Outcome.PASSED or not entries:
        return
    file, number, _ = entries[-1]  # t.Fatal/t.Skip end the test; an Errorf is usually the last thing logged
    case.file = f"{directory}/{file}" if directory else file
    case.line = number
    case.message = "\n".join(text for *_, texts in entries[-10:] for text in texts).strip()


def _goroutine_frames(lines: list[str], root: Path) -> list[str]:
    """"function at file:line" for the first goroutine trace, the file relative to the project when it is
    inside it (suggest_traces keeps only those)."""
    frames: list[str] = []
    started = False
    for i, line in enumerate(lines):
        if line.startswith("goroutine "):
            if started:
                break
            started = True
            continue
        call = _FRAME_CALL.match(line) if started else None
        if not call or line.startswith("created by "):
            continue
        location = _FRAME_LOCATION.match(lines[i + 1]) if i + 1 < len(lines) else None
        if not location:
            frames.append(call.group(1))
            continue
        path = Path(location.group(1))
        inside = next((base for base in (root, root.resolve()) if path.is_relative_to(base)), None)
        file = str(path.relative_to(inside)) if inside else str(path)
        frames.append(f"{call.group(1)} at {file}:{location.group(2)}")
    return frames


def _package_failure(package: str, failed_build: str | None, build_output: dict[str, list[str]],
                     package_output: list[str], stderr: str) -> TestCase:
    """A failed case for a package that failed without a failing test: a build error, or a crash outside
    any test (TestMain, init)."""
    if failed_build is not None or any("[build failed]" in line for line in package_output):
        own = [line for key, chunk in build_output.items() if key.split(" ")[0] == package for line in chunk]
        # FailedBuild names the package that broke (maybe one this package imports); before Go 1.24 the
        # compiler's messages went to stderr.
        text = "".join(build_output.get(failed_build or "", []) or own) or stderr
        messages = [line for line in text.splitlines() if not line.startswith("#")]
        case = TestCase(name=f"{package} [build failed]", outcome=Outcome.FAILED,
                        message="\n".join(messages[:30]).strip() or "the package did not build")
        first = next((m for m in map(_COMPILER.match, messages) if m), None)
        if first:
            case.file, case.line = first.group(1), int(first.group(2))
        return case
    text = "".join(package_output).strip()
    return TestCase(name=package, outcome=Outcome.FAILED, message=tail(text, 20) or "the package's tests failed",
                    output=text)


def _run_error(broken: list[TestCase], run: FinishedRun) -> str:
    if any(case.name.endswith("[build failed]") for case in broken):
        details = "\n\n".join(f"{case.name}:\n{case.message}" for case in broken)
        return f"go test could not build the tests: fix the errors below and run again.\n{details}"
    if broken:
        return "go test failed before any test ran:\n" + "\n\n".join(f"{c.name}:\n{c.message}" for c in broken)
    return (f"go test exited with status {run.exit_code} before any test ran. Its output ends with:\n"
            + tail(run.stderr or run.stdout))


def _test_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for path in sorted(root.rglob("*_test.go")):
        parts = path.relative_to(root).parts[:-1]
        if not any(part in _SKIPPED_DIRS or part.startswith((".", "_")) for part in parts):
            found.append(path)
    return found


def _level_args(root: Path, level: TestLevel | None) -> list[str]:
    if level is None:
        return []
    tagged: dict[str, set[str]] = {word: set() for word in _LEVEL_WORDS.values()}
    untagged: dict[str, set[str]] = {word: set() for word in _LEVEL_WORDS.values()}
    for path in _test_files(root):
        text = path.read_text(errors="replace")
        constraint = _BUILD_TAGS.search(text.split("\npackage ", 1)[0])
        tags = set(re.findall(r"(?<![!\w])\w+", constraint.group(1))) if constraint else set()
        for test in _TEST_FUNC.findall(text):
            for word in _LEVEL_WORDS.values():
                if word in tags:
                    tagged[word].add(test)
                elif word in path.name.lower() or word in test.lower():
                    untagged[word].add(test)
    if level is TestLevel.UNIT:
        excluded = sorted(set().union(*untagged.values()))
        return ["-short", "-skip", _exact(excluded)] if excluded else ["-short"]
    word = _LEVEL_WORDS[level]
    tests = sorted(tagged[word] | untagged[word])
    if not tests:
        raise ValidationError(
            f"No Go {word} tests found. Strobe counts as {word} tests the Test functions in files with "
            f"`//go:build {word}`, in files whose name contains '{word}', or whose name contains it "
            f"(e.g. Test{'Integration' if word == 'integration' else 'E2E'}Login). Omit `level` to run every test."
        )
    return ["-tags", word, "-run", _exact(tests)]


def _exact(names: list[str]) -> str:
    return "^(" + "|".join(_escape(name) for name in names) + ")$"
