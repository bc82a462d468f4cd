"""Fixtures shared by the stack, stuck-detector and runner tests."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

STUCK_PROGRAMS = Path(__file__).parents[1] / "targets" / "testprojects" / "stuck"


@pytest.fixture(scope="session")
def programs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """tests/targets/testprojects/stuck/*.c (deadlock, spin, blocked_read, steady), built once per session."""
    out = tmp_path_factory.mktemp("stuck-programs")
    for source in STUCK_PROGRAMS.glob("*.c"):
        subprocess.run(["gcc", "-g", "-O0", "-pthread", "-o", str(out / source.stem), str(source)], check=True)
    return lambda name: out / name
