"""Run an adapter's command for real, the way the runner does: output lines feed live progress, then the
report is parsed. Also finds the JavaScript toolchains installed by scripts/bootstrap.sh."""

from __future__ import annotations

import json
import os
import selectors
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from strobe.testing.adapters.base import FinishedRun, TestAdapter
from strobe.testing.model import LiveProgress, ParsedRun, TestCommand

TOOLCHAINS = Path(__file__).parents[2] / "toolchains"
PROJECTS = Path(__file__).parents[2] / "targets" / "testprojects"


@dataclass
class Ran:
    parsed: ParsedRun
    progress: LiveProgress
    finished: FinishedRun
    running: list[str]  # each test the live progress named as it started, in order

    def outcomes(self) -> dict[str, str]:
        return {case.name: case.outcome.value for case in self.parsed.cases}

    def case(self, fragment: str):  # type: ignore[no-untyped-def]
        hits = [c for c in self.parsed.cases if fragment in c.name]
        assert len(hits) == 1, f"{fragment!r} matches {[c.name for c in self.parsed.cases]}"
        return hits[0]


def run(adapter: TestAdapter, command: TestCommand, timeout: float = 300.0) -> Ran:
    """Run `command` to completion (killed after `timeout`), feeding adapter.on_line, then parse."""
    env = {**os.environ, **command.env}
    proc = subprocess.Popen(command.argv, cwd=command.cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    assert proc.stdout is not None and proc.stderr is not None
    progress = LiveProgress()
    running: list[str] = []
    chunks: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
    partial: dict[str, bytes] = {"stdout": b"", "stderr": b""}
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, "stdout")
    selector.register(proc.stderr, selectors.EVENT_READ, "stderr")
    deadline = time.monotonic() + timeout
    try:
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{command.argv} still running after {timeout}s")
            for key, _ in selector.select(remaining):
                stream: str = key.data
                data = os.read(key.fd, 65536)  # type: ignore[arg-type]
                if not data:
                    selector.unregister(key.fileobj)
                    lines = [partial[stream]] if partial[stream] else []
                else:
                    chunks[stream].append(data)
                    *lines, partial[stream] = (partial[stream] + data).split(b"\n")
                for line in lines:
                    now_ns = time.monotonic_ns()
                    adapter.on_line(line.decode(errors="replace"), stream, progress, now_ns)
                    if progress.current_test is not None and progress.current_started_ns == now_ns:
                        running.append(progress.current_test)
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
    finished = FinishedRun(command, b"".join(chunks["stdout"]).decode(errors="replace"),
                           b"".join(chunks["stderr"]).decode(errors="replace"), code)
    return Ran(adapter.parse(finished), progress, finished, running)


def copy_project(name: str, dest: Path, python: str | None = None) -> Path:
    """A fresh copy of tests/targets/testprojects/<name> (the tests build and run it there). `python`: the
    interpreter its Python tests run with (its `test.python` setting; this test suite's own has pytest)."""
    target = dest / name
    shutil.copytree(PROJECTS / name, target)
    if python is not None:
        (target / ".strobe").mkdir(exist_ok=True)
        (target / ".strobe" / "settings.json").write_text(json.dumps({"test.python": python}))
    return target


def node_modules() -> Path:
    """tests/toolchains/node_modules (jest, vitest, mocha, bun, deno); skips if bootstrap has not installed it."""
    path = TOOLCHAINS / "node_modules"
    if not (path / ".bin").is_dir():
        pytest.fail("tests/toolchains/node_modules is missing: run scripts/bootstrap.sh (make test does)")
    return path


def link_node_modules(project: Path) -> None:
    """Give a copied JS project the shared toolchains as its node_modules."""
    (project / "node_modules").symlink_to(node_modules(), target_is_directory=True)
