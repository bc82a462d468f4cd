"""A fake machine for `strobe install`: a temporary HOME, STROBE_HOME, project and an empty PATH directory, and a
runner that calls the real `strobe` executable with only those in its environment (never the real home)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

STROBE = Path(sys.executable).parent / "strobe"


@dataclass
class Sandbox:
    home: Path
    project: Path
    bin: Path
    strobe_home: Path

    def env(self) -> dict[str, str]:
        # Only what the sandbox defines: no CODEX_HOME or XDG_CONFIG_HOME of the real user leaks in.
        return {"HOME": str(self.home), "STROBE_HOME": str(self.strobe_home), "PATH": str(self.bin),
                "LANG": "C.UTF-8"}

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(STROBE), *args], cwd=self.project, env=self.env(), capture_output=True,
                              text=True, timeout=60, check=False)

    def tree(self) -> dict[str, bytes]:
        """Every file under home and project with its bytes (to prove a run wrote nothing)."""
        files: dict[str, bytes] = {}
        for root in (self.home, self.project):
            for path in sorted(root.rglob("*")):
                if path.is_file():
                    files[str(path)] = path.read_bytes()
        return files

    def fake_executable(self, name: str) -> None:
        path = self.bin / name
        path.write_text("#!/bin/sh\nexit 0\n")
        os.chmod(path, 0o755)


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    box = Sandbox(tmp_path / "home", tmp_path / "project", tmp_path / "bin", tmp_path / "strobe-home")
    for path in (box.home, box.project, box.bin):
        path.mkdir()
    return box


@pytest.fixture
def run_strobe(sandbox: Sandbox) -> Callable[..., subprocess.CompletedProcess[str]]:
    return sandbox.run
