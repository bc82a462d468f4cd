"""Per-traced-call overhead (enter + exit captured) of Strobe, frida-trace and uftrace on one binary.

The target times its own loops of CALLS calls to work(); a tracer's cost per call is its median loop
time minus the untraced median, divided by CALLS. Loops are separated by pauses so every tracer can
drain, and Strobe records every call (sampling off) so the figure is the full-capture cost.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench import ingest
from bench.harness import build_c, median, poll, strobe

_LOOP = re.compile(r"^loop \d+ (\d+)$", re.MULTILINE)


def _loop_ns(output: str) -> list[float]:
    return [float(v) for v in _LOOP.findall(output)]


def untraced(binary: Path, calls: int, reps: int) -> float:
    out = subprocess.run([str(binary), str(calls), str(reps)], capture_output=True, text=True, check=True).stdout
    return median(_loop_ns(out))


def _offset(binary: Path, symbol: str) -> int:
    for line in subprocess.run(["nm", str(binary)], capture_output=True, text=True, check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == symbol:
            return int(parts[0], 16)
    raise LookupError(f"{symbol} not in {binary}")


def frida_trace(binary: Path, calls: int, reps: int) -> float | str:
    tool = shutil.which("frida-trace") or str(Path(__file__).resolve().parents[1] / ".venv" / "bin" / "frida-trace")
    if not Path(tool).exists():
        return "not installed (pip install frida-tools)"
    # work() is not exported: name it by module offset. frida-trace hooks after resuming the program, so the
    # target waits 2 s before its first loop.
    where = f"{binary.name}!{hex(_offset(binary, 'work'))}"
    with tempfile.TemporaryDirectory() as work:
        done = subprocess.run(
            [tool, "-q", "-f", str(binary), "-a", where, "--", str(calls), str(reps), "-", "2000"],
            capture_output=True, text=True, cwd=work, timeout=600, check=False,
        )
        if "Started tracing 1 function" not in done.stdout + done.stderr:
            return f"did not hook work(): {(done.stdout + done.stderr).strip()[-200:]}"
    loops = _loop_ns(done.stdout)
    return median(loops) if loops else f"failed: {done.stderr.strip()[-200:]}"


def uftrace(binary: Path, calls: int, reps: int) -> float | str:
    tool = shutil.which("uftrace")
    if tool is None:
        return "not installed (apt-get install uftrace)"
    with tempfile.TemporaryDirectory() as work:
        done = subprocess.run(
            [tool, "record", "--no-pager", "-P", "work", "-d", f"{work}/data", str(binary), str(calls), str(reps)],
            capture_output=True, text=True, timeout=600, check=False,
        )
    loops = _loop_ns(done.stdout)
    return median(loops) if loops else f"failed: {done.stderr.strip()[-200:]}"


async def strobe_trace(binary: Path, calls: int, reps: int, project: Path) -> tuple[float, dict[str, Any]]:
    (project / ".strobe").mkdir(exist_ok=True)
    (project / ".strobe" / "settings.json").write_text(
        '{"trace.samplePercent": 100, "trace.hotCallsPerSecond": 100000000, "events.maxPerSession": 10000000}'
    )
    go = project / "go"
    async with strobe() as client:
        launched = await client.call(
            "debug_launch", command=str(binary), args=[str(calls), str(reps), str(go)], projectRoot=str(project)
        )
        sid = launched["sessionId"]
        await client.wait_output(sid, lambda t: "ready\n" in t, 30)
        traced = await client.call("debug_trace", sessionId=sid, add=["work"])
        assert traced["hookedFunctions"] == 1, traced
        go.touch()
        texts = await client.wait_output(sid, lambda t: "done\n" in t, 600)
        loops = _loop_ns("".join(texts))
        await poll(lambda: ingest.ended(client, sid), 120, "the session to end")  # all events stored
        page = await client.call("debug_query", sessionId=sid, function={"equals": "work"}, limit=1)
        await client.call("debug_stop", sessionId=sid)
    captured = {"events": page["totalCount"], "expected": 2 * calls * reps, "warnings": page.get("warnings", [])}
    # Events the agent could not keep up with are counted (ring full), never silently lost.
    return median(loops), captured


async def run(build: Path, calls: int, reps: int) -> dict[str, Any]:
    binary = build_c("loop", build)
    base = untraced(binary, calls, reps)
    project = Path(tempfile.mkdtemp(prefix="sb-proj-"))
    try:
        strobe_ns, captured = await strobe_trace(binary, calls, reps, project)
    finally:
        shutil.rmtree(project, ignore_errors=True)
    peers: dict[str, Any] = {"untraced": base / calls, "strobe": (strobe_ns - base) / calls}
    frida_calls = max(1, calls // 5)  # frida-trace is ~20x slower: fewer calls keep the run short
    frida_base = untraced(binary, frida_calls, reps)
    for name, measure, n, reference in (("frida-trace", frida_trace, frida_calls, frida_base),
                                        ("uftrace", uftrace, calls, base)):
        result = measure(binary, n, reps)
        peers[name] = (result - reference) / n if isinstance(result, float) else result
    return {"per_call_ns": peers, "strobe_capture": captured, "calls": calls, "reps": reps}
