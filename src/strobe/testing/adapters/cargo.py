"""`cargo test` for Rust projects, read through libtest's JSON event stream.

libtest prints one JSON object per line on stdout when given `-Z unstable-options --format json`; on a stable
toolchain that option is unlocked by RUSTC_BOOTSTRAP=1, which the test binaries read at run time (cargo does not
rebuild for it, so builds made without it are reused). The events carry each test's outcome, duration and, for
failures, the captured output with the panic message. Cargo's own lines ("Compiling", "Running …") go to stderr.

Levels, by cargo's target kinds:
- unit: `--lib --bins` (the `#[cfg(test)]` modules inside the crates; `--lib` only when a package has a library);
- e2e: the integration-test targets whose name contains "e2e" (`tests/e2e_cli.rs`, `[[test]] name = "api_e2e"`);
- integration: the other integration-test targets (`tests/*.rs`, `tests/*/main.rs`, `[[test]]`).
Doc tests run only with the whole suite.

RUST_BACKTRACE=1 is set so a failing test's output includes the panic's frames: they name the project's
functions the panic went through, which become the suggested trace patterns.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any

from strobe.errors import ValidationError
from strobe.testing.adapters.base import MAX_SUGGESTIONS, FinishedRun, TestAdapter, tail
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

_LIBTEST_ARGS = ["-Z", "unstable-options", "--format", "json", "--report-time"]
_ENV = {"RUSTC_BOOTSTRAP": "1", "RUST_BACKTRACE": "1"}
_OUTCOMES = {"ok": Outcome.PASSED, "failed": Outcome.FAILED, "ignored": Outcome.SKIPPED}
# New panic format (Rust >= 1.73): "thread 'x' (123) panicked at src/lib.rs:12:5:\nmessage"
_PANIC_NEW = re.compile(r"thread '[^']*'(?: \(\d+\))? panicked at ([^\n]+?):(\d+):\d+:\n(.*?)(?:\nstack backtrace:|"
                        r"\nnote: |\Z)", re.DOTALL)
# Old panic format: "thread 'x' panicked at 'message', src/lib.rs:12:5"
_PANIC_OLD = re.compile(r"thread '[^']*' panicked at '(.*?)', ([^\n]+?):(\d+):\d+", re.DOTALL)
_FRAME = re.compile(r"^\s+\d+: (.+?)(?:\n\s+at (\S+?):(\d+)(?::\d+)?)?$", re.MULTILINE)
_AT_LOCATION = re.compile(r" at ([^\s:]+\.rs):(\d+)(?::\d+)?")
_RUNNING = re.compile(r"^\s+Running (?:unittests )?\S+ \((?P<bin>[^)]+)\)|^\s+Doc-tests (?P<doc>\S+)")
_HASH = re.compile(r"-[0-9a-f]{16}$")
_NOT_USER = ("std::", "core::", "alloc::", "test::", "__rustc::")
_TEST_MODULES = ("tests", "test")


class CargoAdapter(TestAdapter):
    name = "cargo"
    display_name = "Cargo"
    language = "rust"

    def detect(self, project_root: Path, command: str | None) -> int:
        return 90 if (project_root / "Cargo.toml").is_file() else 0

    def suite_command(self, project_root: Path, level: TestLevel | None, command: str | None,
                      report_dir: Path) -> TestCommand:
        return self._command(project_root, _level_args(project_root, level))

    def single_test_command(self, project_root: Path, test: str, command: str | None,
                            report_dir: Path) -> TestCommand:
        if not test.strip():
            raise ValidationError("`test` is empty: pass part of a test's name, e.g. 'tests::parses_header'.")
        return self._command(project_root, [test])  # libtest keeps the tests whose name contains it

    def _command(self, project_root: Path, cargo_args: list[str]) -> TestCommand:
        # --no-fail-fast: without it cargo stops after the first test binary with a failure.
        argv = ["cargo", "test", "--no-fail-fast", *cargo_args, "--", *_LIBTEST_ARGS]
        return TestCommand(argv=argv, cwd=project_root, env=dict(_ENV))

    def rerun_command(self, project_root: Path, test: str, command: str | None) -> str:
        return f"cargo test {shlex.quote(test)} -- --exact"

    def on_line(self, line: str, stream: str, progress: LiveProgress, now_ns: int) -> None:
        if stream == "stderr":
            word = line.lstrip().split(" ", 1)[0]
            if word in ("Compiling", "Doc-tests"):
                progress.phase = Phase.COMPILING
            elif word == "Running":
                progress.phase = Phase.RUNNING
            return
        event = _event(line)
        if event is None or event.get("type") != "test":
            return
        kind, name = event.get("event"), str(event.get("name", ""))
        if kind == "started":
            progress.start(name, now_ns)
        elif kind in _OUTCOMES:
            progress.finish(_OUTCOMES[kind])

    def parse(self, run: FinishedRun) -> ParsedRun:
        events = [event for event in map(_event, run.stdout.splitlines()) if event is not None]
        crates = _suite_crates(run.stderr)
        suites = sum(1 for e in events if e.get("type") == "suite" and e.get("event") == "started")
        if suites == 0 and run.exit_code != 0:
            return ParsedRun([], error=_build_error(run))
        if len(crates) != suites:  # a harness=false target or a crash: the binaries cannot be told apart
            crates = [None] * suites
        suite = -1
        cases: dict[tuple[int, str], TestCase] = {}  # the same name can exist in two test binaries
        unfinished: set[tuple[int, str]] = set()
        for event in events:
            if event.get("type") == "suite" and event.get("event") == "started":
                suite += 1
            if event.get("type") != "test" or suite < 0:
                continue
            key = (suite, str(event.get("name", "")))
            if event.get("event") == "started" and key not in cases:
                cases[key] = TestCase(name=key[1], outcome=Outcome.FAILED)
                unfinished.add(key)
            elif event.get("event") in _OUTCOMES:
                cases[key] = _case(event, crates[suite], run.command.cwd)
                unfinished.discard(key)
        died = [line.strip() for line in run.stderr.splitlines() if "didn't exit successfully" in line]
        for key in unfinished:
            case, crate = cases[key], crates[key[0]]
            case.message = ("The test started but never finished: its test binary exited early (crash, abort or "
                            f"kill).\n{_pick(died, f'/{crate}-') or tail(run.stderr, 5)}")
            case.stack = [f"{crate}::{case.name}"] if crate else []
        return ParsedRun(list(cases.values()))

    def suggest_traces(self, case: TestCase) -> list[str]:
        """Modules of the project's frames the panic went through (innermost first), then the module the test
        exercises (its own module without the `tests` part), then the test's module and its file."""
        first: list[str] = []
        later: list[str] = []
        for frame in case.stack:
            name, _, location = frame.partition(" at ")
            if location.startswith("/") or (not location and name.startswith(_NOT_USER)):
                continue  # the standard library, a dependency, or the test harness
            modules = _plain_path(name)[:-1]
            if not modules:
                continue
            for candidate in (modules[:-1] if modules[-1] in _TEST_MODULES else [], modules):
                pattern = "::".join(candidate) + "::*"
                if candidate and pattern not in first + later:
                    (later if candidate[-1] in _TEST_MODULES else first).append(pattern)
        if not case.stack:  # the crate is unknown: match the test's module in any crate
            modules = case.name.split("::")[:-1]
            for candidate in (modules[:-1] if modules and modules[-1] in _TEST_MODULES else [], modules):
                if candidate:
                    (later if candidate[-1] in _TEST_MODULES else first).append("**::" + "::".join(candidate) + "::*")
        out = first + later
        if case.file:
            out.append(f"@file:{Path(case.file).name}")
        return out[:MAX_SUGGESTIONS]

    def project_info(self, project_root: Path) -> ProjectInfo:
        files: list[str] = []
        for package in _packages(project_root):
            for path in sorted(package.glob("tests/**/*.rs")) + sorted(package.glob("src/**/*.rs")):
                if len(files) < 50 and (path.parent.name == "tests" or "#[test]" in path.read_text(errors="replace")):
                    files.append(str(path.relative_to(project_root)))
        return ProjectInfo(language=self.language, build_system=self.name, test_files=files)


def _event(line: str) -> dict[str, Any] | None:
    """A libtest JSON event, or None for any other line (harness=false binaries print what they like)."""
    text = line.strip()
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _case(event: dict[str, Any], crate: str | None, root: Path) -> TestCase:
    name = str(event["name"])
    seconds = event.get("exec_time")
    case = TestCase(name=name, outcome=_OUTCOMES[event["event"]],
                    duration_ms=float(seconds) * 1000 if isinstance(seconds, int | float) else None)
    output = str(event.get("stdout") or "")
    case.output = output
    reason = event.get("message")
    if case.outcome is Outcome.SKIPPED:
        case.message = str(reason) if reason else None
        return case
    if case.outcome is Outcome.PASSED:
        return case
    case.stack = [_frame_text(m, root) for m in _FRAME.finditer(output.split("stack backtrace:", 1)[-1])] \
        if "stack backtrace:" in output else []
    if not case.stack and crate and " - " not in name:
        case.stack = [f"{crate}::{name}"]  # the test function: the one frame known without a backtrace
    panic = _panic(output)
    if panic:
        message, file, line = panic
        case.message = f"{reason}\n{message}" if reason else message
        case.file, case.line = file, line
    else:
        lines = [text for text in output.strip().splitlines() if text.strip()]
        case.message = str(reason) if reason else (lines[-1] if lines else "the test failed without a message")
        located = _AT_LOCATION.search(case.message)  # "test did not panic as expected at src/lib.rs:32:8"
        if located:
            case.file, case.line = located.group(1), int(located.group(2))
    if case.file and (case.file.startswith("/") or not case.file.endswith(".rs")):
        user = [frame.partition(" at ")[2] for frame in case.stack if " at " in frame]
        user = [loc for loc in user if not loc.startswith("/")]
        if user:  # the panic happened in the standard library or a dependency: show the project's frame
            where, _, number = user[0].rpartition(":")
            case.file, case.line = where, int(number)
    if case.file is None and " - " in name:  # a doc test: "src/lib.rs - add (line 3)"
        doc = re.match(r"(\S+) - .*\(line (\d+)\)", name)
        if doc:
            case.file, case.line = doc.group(1), int(doc.group(2))
    return case


def _panic(output: str) -> tuple[str, str, int] | None:
    """(message, file, line) of the first panic in a test's output, in either of Rust's formats."""
    new = _PANIC_NEW.search(output)
    if new:
        return new.group(3).strip(), new.group(1), int(new.group(2))
    old = _PANIC_OLD.search(output)
    if old:
        return old.group(1).strip(), old.group(2), int(old.group(3))
    return None


def _pick(lines: list[str], fragment: str) -> str | None:
    """The line that mentions `fragment`, else the first line, else None."""
    return next((line for line in lines if fragment in line), lines[0] if lines else None)


def _frame_text(match: re.Match[str], root: Path) -> str:
    """"name at file:line", the file relative to the project when it is inside it (so the project's frames
    are the ones with a relative path), as suggest_traces expects."""
    name, file, line = match.group(1).strip(), match.group(2), match.group(3)
    if not file:
        return name
    if file.startswith("./"):
        file = file[2:]
    elif file.startswith("/"):
        inside = next((base for base in (root, root.resolve()) if Path(file).is_relative_to(base)), None)
        file = str(Path(file).relative_to(inside)) if inside else file
    return f"{name} at {file}:{line}"


def _plain_path(name: str) -> list[str]:
    """`<cargo_basic::Pair>::sum::<i32>::{closure#0}` -> ["cargo_basic", "Pair", "sum"] (Strobe writes inherent
    methods as `crate::Type::method`); [] for a trait impl `<T as Trait>::f`, which no module pattern matches."""
    if name.startswith("<"):
        depth = 0
        for i, char in enumerate(name):
            depth += {"<": 1, ">": -1}.get(char, 0)
            if depth == 0:
                if " as " in name[1:i]:
                    return []
                name = name[1:i] + name[i + 1:]
                break
    while (stripped := re.sub(r"<[^<>]*>", "", name)) != name:
        name = stripped
    return [part for part in name.split("::") if part and not part.startswith("{")]


def _suite_crates(stderr: str) -> list[str | None]:
    """The crate of each test binary cargo ran, in order ("Running …(target/debug/deps/mycrate-<hash>)",
    "Doc-tests mycrate"): the n-th libtest suite on stdout is the n-th of these."""
    crates: list[str | None] = []
    for line in stderr.splitlines():
        match = _RUNNING.match(line)
        if match:
            crates.append(_HASH.sub("", Path(match.group("bin")).name) if match.group("bin") else None)
    return crates


def _build_error(run: FinishedRun) -> str:
    diagnostics: list[str] = []
    block = False
    for line in run.stderr.splitlines():
        if line.startswith("error"):
            block = True
        elif not line.strip() or re.match(r"(warning|\s+Compiling|\s+Finished)", line):
            block = False
        if block and len(diagnostics) < 60:
            diagnostics.append(line)
    if any("could not compile" in line for line in diagnostics):
        return ("cargo test could not compile the tests: fix the errors below and run again.\n"
                + "\n".join(diagnostics))
    if any("no test target matches pattern" in line or "no library targets" in line for line in diagnostics):
        return ("cargo found no test target for this level: integration tests live in tests/*.rs, e2e ones in "
                "tests/*e2e*.rs; omit `level` to run everything.\n" + "\n".join(diagnostics))
    return (f"cargo test exited with status {run.exit_code} before any test ran. Its output ends with:\n"
            + tail(run.stderr or run.stdout))


def _manifest(directory: Path) -> dict[str, Any]:
    try:
        return tomllib.loads((directory / "Cargo.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _packages(root: Path) -> list[Path]:
    """The directories of the packages `cargo test` runs from `root`: the root package, or for a virtual
    workspace its (default) members."""
    manifest = _manifest(root)
    if "package" in manifest:
        return [root]
    workspace = manifest.get("workspace", {})
    members = workspace.get("default-members") or workspace.get("members") or []
    found: list[Path] = []
    for member in members:
        found += [path for path in sorted(root.glob(str(member))) if (path / "Cargo.toml").is_file()]
    return found


def _integration_targets(package: Path) -> list[str]:
    manifest = _manifest(package)
    names = [str(test["name"]) for test in manifest.get("test", []) if "name" in test]
    if manifest.get("package", {}).get("autotests", True) is not False:
        names += [path.stem for path in sorted(package.glob("tests/*.rs"))]
        names += [path.parent.name for path in sorted(package.glob("tests/*/main.rs"))]
    return names


def _level_args(root: Path, level: TestLevel | None) -> list[str]:
    if level is None:
        return []
    packages = _packages(root)
    if level is TestLevel.UNIT:
        has_lib = any((p / "src" / "lib.rs").is_file() or "lib" in _manifest(p) for p in packages)
        return ["--lib", "--bins"] if has_lib else ["--bins"]
    if level is TestLevel.E2E:
        return ["--test", "*e2e*"]  # cargo globs over every package's test targets
    targets = sorted({name for package in packages for name in _integration_targets(package)})
    if not any("e2e" in name for name in targets):
        return ["--test", "*"]
    plain = [name for name in targets if "e2e" not in name]
    if not plain:
        raise ValidationError(f"This project's only integration-test targets are e2e ones ({', '.join(targets)}): "
                              "use level 'e2e', or omit `level` to run everything.")
    return [arg for name in plain for arg in ("--test", name)]
