"""Host side of the pytracer tests: the interpreters to test, targets computed from a program's source, and runs of
harness.py (one shot, or driven step by step through the control pipe). No sleeps: every wait polls a deadline."""

from __future__ import annotations

import ast
import glob
import json
import os
import select
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from strobe.daemon.runtimes.cpython import batch_size
from strobe.instrument.pytracer import source

HERE = Path(__file__).parent
PROGRAMS = HERE / "programs"
HARNESS = HERE / "harness.py"
DEADLINE_S = 60.0
ENTER, RETURN, UNWIND, CRASH = 1, 2, 3, 9
Event = list[Any]


def _candidates(version: str) -> list[str]:
    """Real interpreters of one version (and its debug build, `d` suffix): on PATH (not pyenv's shims, which pick
    a version by context), in /usr/bin and /usr/local/bin, and under pyenv's versions."""
    found: list[str | None] = []
    for name in (f"python{version}", f"python{version}d"):
        found += [shutil.which(name), f"/usr/bin/{name}", f"/usr/local/bin/{name}"]
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found += sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}"))
    found += sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}d"))
    unique: list[str] = []
    for path in found:
        if (path and "/shims/" not in path and os.access(path, os.X_OK)
                and os.path.realpath(path) not in map(os.path.realpath, unique)):
            unique.append(path)
    return unique


def interpreters() -> list[Any]:
    """One pytest param per interpreter found for 3.11, 3.12 and 3.13 (a skipped one for a missing version)."""
    params: list[Any] = []
    for version in ("3.11", "3.12", "3.13"):
        paths = _candidates(version)
        if not paths:
            params.append(pytest.param(None, id=version, marks=pytest.mark.skip(
                reason=f"no python{version} on PATH or under ~/.pyenv/versions")))
        for path in paths:
            label = path.replace(os.path.expanduser("~"), "~")
            params.append(pytest.param(path, id=f"{version}:{label}"))
    return params


def version_of(python: str) -> tuple[int, int]:
    out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True, text=True,
                         check=True, timeout=DEADLINE_S)
    major, minor = out.stdout.split()
    return int(major), int(minor)


def marked_line(program: Path, name: str) -> int:
    """The line of `program` that ends with the comment `# @name`."""
    found = [n for n, text in enumerate(program.read_text().splitlines(), 1) if text.endswith(f"# @{name}")]
    assert len(found) == 1, f"{program.name}: {len(found)} lines marked @{name}"
    return found[0]


def targets(program: Path, *qualnames: str) -> list[dict[str, Any]]:
    """Host-style targets (id, file, line, qualname) for functions of `program`; ids are 1, 2... in argument
    order. The line is co_firstlineno: the first decorator's line when there is one."""
    found: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                qualname = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    found[qualname] = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                visit(child, qualname + (".<locals>." if not isinstance(child, ast.ClassDef) else "."))
            else:
                visit(child, prefix)

    visit(ast.parse(program.read_text()), "")
    return [{"id": i, "file": str(program), "line": found[q], "qualname": q} for i, q in enumerate(qualnames, 1)]


@dataclass
class Run:
    """What one harness run left: the sink's batches (and replies), the harness's report, the process output."""

    work: Path
    stdout: str = ""
    stderr: str = ""
    returncode: int | None = None
    report: dict[str, Any] = field(default_factory=dict)

    def messages(self) -> list[dict[str, Any]]:
        path = self.work / "batches.jsonl"
        if not path.exists():
            return []
        complete = path.read_bytes().split(b"\n")[:-1]  # the last line may still be being written
        return [json.loads(line) for line in complete if line.strip()]

    def batches(self) -> list[dict[str, Any]]:
        """The batches; each says how many events it carries in its head, read by the host without parsing it
        (daemon/runtimes/cpython.batch_size)."""
        path = self.work / "batches.jsonl"
        complete = path.read_bytes().split(b"\n")[:-1] if path.exists() else []
        lines = [line for line in complete if line.startswith(b'{"v":1,"n":')]
        batches = [json.loads(line) for line in lines]
        for line, batch in zip(lines, batches, strict=True):
            assert batch_size(line) == batch["n"] == len(batch["events"]), line[:200]
        return batches

    def events(self, pid: int | None = None) -> list[Event]:
        return [e for b in self.batches() if pid is None or b["pid"] == pid for e in b["events"]]

    def of(self, fid: int, kind: int | None = None) -> list[Event]:
        return [e for e in self.events() if e[1] == fid and (kind is None or e[0] == kind)]

    def reply(self, rid: int) -> dict[str, Any] | None:
        return next((m for m in self.messages() if m.get("reply") == rid), None)

    def pauses(self) -> list[dict[str, Any]]:
        """The pause reports of threads stopped by a breakpoint or a step's end (breaks.py), in order."""
        return [m["pause"] for m in self.messages() if "pause" in m]

    def logpoints(self) -> list[dict[str, Any]]:
        """The messages carrying logpoint lines, in order."""
        return [m for m in self.messages() if "logpoints" in m]

    def threads(self) -> dict[int, str]:
        return {tid: name for b in self.batches() for tid, name in b["threads"]}


def _prepare(work: Path, config: dict[str, Any]) -> None:
    work.mkdir(parents=True, exist_ok=True)
    (work / "tracer_source.py").write_text(source(), encoding="utf-8")
    (work / "config.py").write_text(repr(config), encoding="utf-8")


def _finish(run: Run, proc: subprocess.Popen[str]) -> Run:
    try:
        run.stdout, run.stderr = proc.communicate(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    run.returncode = proc.returncode
    report = run.work / "report.py"
    if report.exists():
        run.report = ast.literal_eval(report.read_text(encoding="utf-8"))
    return run


def run_program(python: str, program: Path, work: Path, config: dict[str, Any],
                env: dict[str, str] | None = None) -> Run:
    """Run `program` under the tracer to its end; the batches are complete (atexit flushed them)."""
    _prepare(work, config)
    proc = subprocess.Popen([python, "-I", str(HARNESS), str(work), str(program)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                            env={**os.environ, **(env or {})})
    return _finish(Run(work), proc)


def poll(check: Any, what: str, deadline_s: float = DEADLINE_S) -> Any:
    end = time.monotonic() + deadline_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)  # a polling interval, not a synchronisation


class Driven:
    """A run whose program waits at each `step()` (programs/steps.py) while the test sends commands."""

    def __init__(self, run: Run, proc: subprocess.Popen[str], go_w: int) -> None:
        self.run, self.proc, self._go, self._next_id = run, proc, go_w, 1000
        self._stdout = ""

    def wait_line(self, text: str) -> None:
        """Until the program printed a line `text` (it reached a step)."""
        assert self.proc.stdout is not None
        end = time.monotonic() + DEADLINE_S
        while f"{text}\n" not in self._stdout:
            left = end - time.monotonic()
            if left <= 0 or (self.proc.poll() is not None and not select.select([self.proc.stdout], [], [], 0)[0]):
                raise AssertionError(f"the program never printed {text!r}; output so far: {self._stdout!r}")
            if select.select([self.proc.stdout], [], [], left)[0]:
                line = self.proc.stdout.readline()
                if not line and self.proc.poll() is not None:
                    continue
                self._stdout += line

    def send_raw(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line)
        self.proc.stdin.flush()

    def command(self, cmd: dict[str, Any]) -> dict[str, Any]:
        """Send a command through the control pipe and wait for its reply."""
        self._next_id += 1
        rid = self._next_id
        self.send_raw(json.dumps({**cmd, "id": rid}) + "\n")
        reply: dict[str, Any] = poll(lambda: self.run.reply(rid), f"the reply to {cmd}")
        return reply

    def go(self) -> None:
        os.write(self._go, b"go\n")

    def pause(self, count: int) -> dict[str, Any]:
        """Until the program sent its `count`th pause report (1-based); that report."""
        pauses: list[dict[str, Any]] = poll(lambda: (p := self.run.pauses()) and len(p) >= count and p,
                                            f"pause report #{count}")
        return pauses[count - 1]

    def close_control(self) -> None:
        """Close our end of the control pipe (as a host that went away)."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.stdin = None  # communicate() must not flush it


@contextmanager
def driven(python: str, program: Path, work: Path, config: dict[str, Any],
           env: dict[str, str] | None = None) -> Iterator[Driven]:
    """Run `program` with a control pipe (our end: the child's stdin) and a go pipe; finish it on exit."""
    _prepare(work, {**config, "control": True})
    go_r, go_w = os.pipe()
    proc = subprocess.Popen([python, "-I", str(HARNESS), str(work), str(program)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=[go_r],
                            env={**os.environ, **(env or {}), "STROBE_TEST_GO_FD": str(go_r)})
    os.close(go_r)
    session = Driven(Run(work), proc, go_w)
    try:
        yield session
    finally:
        os.close(go_w)
        _finish(session.run, proc)  # closes the control pipe: the tracer sees its end
        session.run.stdout = session._stdout + session.run.stdout


def assert_clean(run: Run) -> None:
    """The tracer reported no internal error and the program exited 0."""
    errors = [e for b in run.batches() for e in b["errors"]]
    assert not errors, errors
    assert run.returncode == 0, run.stderr


