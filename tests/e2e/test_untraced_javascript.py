"""Deno programs: their JavaScript functions cannot be traced, and Strobe says so instead of matching nothing in
silence; their output is captured all the same (Bun's are traced: test_bun.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import StrobeClient

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

TOOLCHAINS = Path(__file__).resolve().parents[1] / "toolchains" / "node_modules" / ".bin"


async def test_javascript_patterns_on_deno_are_refused_with_the_reason(strobe: StrobeClient, tmp_path: Path) -> None:
    binary = TOOLCHAINS / "deno"
    if not binary.exists():
        pytest.skip("deno is not installed in tests/toolchains (scripts/bootstrap.sh installs it)")
    (tmp_path / "app.js").write_text('function greet(name) { return "hi " + name; }\nconsole.log(greet("x"));\n')
    await strobe.call("debug_trace", add=["greet"], projectRoot=str(tmp_path))
    launched = await strobe.call("debug_launch", command=str(binary), args=["run", "app.js"],
                                 projectRoot=str(tmp_path), cwd=str(tmp_path))
    assert any("Deno runs this program" in w and "cannot be traced" in w
               for w in launched.get("warnings", [])), launched
    await strobe.wait_for_status(launched["sessionId"], "exited", timeout=60)
    output = [e["text"] for e in await strobe.all_events(launched["sessionId"], eventType="stdout")]
    assert output == ["hi x\n"]
