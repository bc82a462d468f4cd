"""debug_launch response time: with a cold agent cache (first launch on a new STROBE_HOME) and warm."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.harness import build_c, median, strobe


async def run(build: Path, launches: int) -> dict[str, Any]:
    binary = build_c("loop", build)
    project = Path(tempfile.mkdtemp(prefix="sb-proj-"))
    times: list[float] = []
    try:
        async with strobe() as client:
            for _ in range(launches + 1):
                args = ["1", "1", str(project / "never")]
                elapsed, launched = await client.timed(
                    "debug_launch", command=str(binary), args=args, projectRoot=str(project)
                )
                times.append(elapsed)
                await client.call("debug_stop", sessionId=launched["sessionId"])
    finally:
        shutil.rmtree(project, ignore_errors=True)
    return {"cold_cache_s": times[0], "warm_median_s": median(times[1:]), "warm_max_s": max(times[1:])}
