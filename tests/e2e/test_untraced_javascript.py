"""Bun and Deno programs: their JavaScript functions cannot be traced yet, and Strobe says so instead of
matching nothing in silence; their output is captured all the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import StrobeClient

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

TOOLCHAINS = Path(__file__).resolve().parents[1] / "toolchains" / "node_modules" / ".bin"


@pytest.mark.parametrize("runtime", ["bun", "deno"])
async def test_javascript_patterns_on_bun_and_deno_are_refused_with_the_reason(
        strobe: StrobeClient, tmp_path: Path, runtime: str) -> None:
    binary = TOOLCHAINS / runtime
    if not binary.exists():
        pytest.skip(f"{runtime} is not installed in tests/toolchains (scripts/bootstrap.sh installs it)")
    (tmp_path / "app.js").write_text('function greet(name) { return "hi " + name; }\nconsole.log(greet("x"));\n')
    await strobe.call("debug_trace", add=["greet"], projectRoot=str(tmp_path))
    args = ["run", "app.js"] if runtime == "deno" else ["app.js"]
    launched = await strobe.call("debug_launch", command=str(binary), args=args, projectRoot=str(tmp_path),
                                 cwd=str(tmp_path))
    name = "Bun" if runtime == "bun" else "Deno"
    assert any(f"{name} runs this program" in w and "cannot be traced yet" in w
               for w in launched.get("warnings", [])), launched
    await strobe.wait_for_status(launched["sessionId"], "exited", timeout=60)
    output = [e["text"] for e in await strobe.all_events(launched["sessionId"], eventType="stdout")]
    assert output == ["hi x\n"]
