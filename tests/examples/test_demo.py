"""The README's demo keeps working: it builds the example and drives a real MCP session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.e2e
def test_demo_finds_the_bug_through_stderr() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py")], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "does not match the ledger (98.75): off by 999.00" in done.stdout
    assert '"exitCode": 2' in done.stdout
    assert '"success": true' in done.stdout
