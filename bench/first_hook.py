"""Time to the first hooked function on a large generated binary (~400k functions), end to end through
MCP: a pattern is staged, then debug_launch indexes the binary and hooks the match before the program
runs. Cold: empty symbol cache; cached: the same binary launched again.

`launch_floor_s` is the same call on a ten-function program with the same pattern staged: what any launch
costs (spawn, agent, MCP round trip). first_hook_cached_s minus it is the price of the 400k functions."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench import symbols_bench
from bench.harness import build_c, strobe


async def run(build: Path, functions: int) -> dict[str, Any]:
    binary, facts = symbols_bench.ensure_binary(build / "symbols", functions)
    warmup = build_c("loop", build)
    project = Path(tempfile.mkdtemp(prefix="sb-proj-"))
    out: dict[str, Any] = {"functions_requested": functions, "debug_info_mb": facts["debug_info_mb"]}
    try:
        async with strobe() as client:
            warm = await client.call("debug_launch", command=str(warmup), args=["1", "1", str(project / "never")],
                                     projectRoot=str(project))  # compiles the agent: not part of the figure
            await client.call("debug_stop", sessionId=warm["sessionId"])
            await client.call("debug_trace", add=[symbols_bench.PATTERN], projectRoot=str(project))
            floor, small = await client.timed("debug_launch", command=str(warmup),
                                              args=["1", "1", str(project / "never")], projectRoot=str(project))
            await client.call("debug_stop", sessionId=small["sessionId"])
            out["launch_floor_s"] = floor
            for label in ("cold", "cached"):
                elapsed, launched = await client.timed("debug_launch", command=str(binary), projectRoot=str(project))
                out[f"first_hook_{label}_s"] = elapsed
                out[f"hooked_{label}"] = launched.get("hookedFunctions", 0)
                await client.call("debug_stop", sessionId=launched["sessionId"])
    finally:
        shutil.rmtree(project, ignore_errors=True)
    return out
