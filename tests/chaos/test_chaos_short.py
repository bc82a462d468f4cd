"""`make chaos` in its short form: every reliability probe runs once, small, so none can rot (the figures of
docs/reliability.md come from the full run)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)
def test_every_probe_holds_in_the_short_form() -> None:
    run = subprocess.run([sys.executable, "-m", "chaos", "--short"], cwd=ROOT, capture_output=True, text=True,
                         timeout=880, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("| yes |") == 6, run.stdout
