"""TestRun: one plain-subprocess test run's state, shared by the runner that drives it (testing/runner.py) and
the result assembly that reads it at its end (testing/results.py)."""

from __future__ import annotations

import asyncio
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from strobe.testing.adapters.base import TestAdapter
from strobe.testing.model import LiveProgress, TestCommand, TestLevel
from strobe.testing.stuck import StuckDetector, StuckVerdict


@dataclass(eq=False)
class TestRun:
    """One run's state. `status` is "running", "completed" or "failed"; `result`/`error` are set at the end."""

    __test__ = False  # not a pytest test class, despite the name

    id: str
    adapter: TestAdapter
    command: TestCommand
    test_name: str | None
    level: TestLevel | None
    project_root: Path
    details: Path
    started: float = field(default_factory=time.monotonic)
    progress: LiveProgress = field(default_factory=LiveProgress)
    status: str = "running"
    result: dict[str, Any] | None = None
    error: str | None = None
    verdict: StuckVerdict | None = None
    cancelled: bool = False
    done: asyncio.Event = field(default_factory=asyncio.Event)
    process: subprocess.Popen[bytes] | None = None
    detector: StuckDetector | None = None
    task: asyncio.Task[None] | None = None
    output: dict[str, list[bytes]] = field(default_factory=lambda: {"stdout": [], "stderr": []})
    pipes: set[int] = field(default_factory=set)  # inodes of the output pipes, to find processes holding them
    log_file: TextIO | None = None
    user_command: str | None = None  # debug_test's `command` (a test binary), for rerun commands
    launcher: list[str] = field(default_factory=list)  # put before command.argv when spawned (a traced run's gate)
    timeout_s: float | None = None  # the run's own time limit, instead of its level's

    def fail(self, error: str) -> None:
        self.status, self.error = "failed", error
