"""The README's demo keeps working: it builds the example and drives a real MCP session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.e2e
def test_demo_finds_the_bug_through_stderr_then_a_trace() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "demo.py")], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "does not match the ledger (98.75): off by 999.00" in done.stdout
    assert '"exitCode": 2' in done.stdout
    assert '"success": true' in done.stdout
    # The traced relaunch: the conclusion is built from the events (arguments and return values), so it only
    # reads like this when staged traces caught every call of both functions with their values.
    assert (
        "stock_value was called with n = 4 but line_value ran 5 times: the last row is "
        '{"name": "TEMPLATE", "quantity": 999, "unit_price": 1.0}, which returned 999.0.'
    ) in done.stdout
    assert '"returnValue": 1097.75' in done.stdout
