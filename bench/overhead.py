"""Per-traced-call overhead (enter + exit captured) of Strobe, frida-trace and uftrace on one binary.

The target (bench/targets/loop.c) times its own loops of CALLS calls to work(), reporting each loop's wall
time and the CPU time of the looping thread. A tracer's cost per call is its median loop time minus the
untraced median, divided by CALLS: every peer runs the same binary with the same CALLS and REPS, against
one untraced baseline. Loops are separated by pauses so every tracer can drain, and Strobe records every
call (sampling off) so the figure is the full-capture cost.

`per_call_ns` (wall time) is the headline: what the traced program loses. `per_call_thread_cpu_ns` is the
part spent in the traced thread itself, i.e. in the hooks; the rest is the loop waiting for a CPU while the
tracer's other threads and processes run (Strobe: the agent's drain, the daemon's decoding and storing;
frida-trace: its host printing every call). On a 2-core machine that share is large and moves with
whatever else the machine is doing, so compare peers within one run, and repeat.

Findings (2-core shared VM, Frida 17.26):
- frida-trace used to run a fifth of the calls, and loop lines were matched at the start of a line. It
  writes its own trace lines into the same stream without always ending them ("sub_11a9()loop 0 ..."), so
  such loops were skipped and its median came from whichever loops printed cleanly, inflating it to
  ~23 us. With the same call count and every loop parsed it costs ~6.5-7.5 us per call here (~5 us of it
  in the traced thread: its JavaScript handler).
- Strobe's in-thread cost is ~270-350 ns, of which ~230-250 ns is Frida's Interceptor itself (measured with
  empty CModule callbacks: its trampolines save and restore the whole CPU state, fxsave/fxrstor included,
  on enter and on leave) and ~30-40 ns the tracer's C code. The wall figure adds ~150-250 ns on a quiet
  machine, several hundred more when the machine is busy.
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

# Not anchored at the line start: frida-trace prints its own trace lines into the same stream without always
# ending them first ("sub_11a9()loop 0 …"), and an anchored pattern silently skipped those loops.
_LOOP = re.compile(r"loop (\d+) (\d+) (\d+)$", re.MULTILINE)

Loops = tuple[float, float]  # median wall ns, median thread-CPU ns of one loop


def _loops(output: str) -> Loops | None:
    found = {int(rep): (float(wall), float(cpu)) for rep, wall, cpu in _LOOP.findall(output)}
    if not found:
        return None
    return median([wall for wall, _ in found.values()]), median([cpu for _, cpu in found.values()])


def untraced(binary: Path, calls: int, reps: int) -> Loops:
    out = subprocess.run([str(binary), str(calls), str(reps)], capture_output=True, text=True, check=True).stdout
    loops = _loops(out)
    assert loops is not None, out
    return loops


def _offset(binary: Path, symbol: str) -> int:
    for line in subprocess.run(["nm", str(binary)], capture_output=True, text=True, check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == symbol:
            return int(parts[0], 16)
    raise LookupError(f"{symbol} not in {binary}")


def frida_trace(binary: Path, calls: int, reps: int) -> Loops | str:
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
    loops = _loops(done.stdout)
    return loops if loops else f"failed: {done.stderr.strip()[-200:]}"


def uftrace(binary: Path, calls: int, reps: int) -> Loops | str:
    tool = shutil.which("uftrace")
    if tool is None:
        return "not installed (apt-get install uftrace)"
    with tempfile.TemporaryDirectory() as work:
        done = subprocess.run(
            [tool, "record", "--no-pager", "-P", "work", "-d", f"{work}/data", str(binary), str(calls), str(reps)],
            capture_output=True, text=True, timeout=600, check=False,
        )
    loops = _loops(done.stdout)
    return loops if loops else f"failed: {done.stderr.strip()[-200:]}"


async def strobe_trace(binary: Path, calls: int, reps: int, project: Path) -> tuple[Loops, dict[str, Any]]:
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
        loops = _loops("".join(texts))
        assert loops is not None, texts
        await poll(lambda: ingest.ended(client, sid), 120, "the session to end")  # all events stored
        page = await client.call("debug_query", sessionId=sid, function={"equals": "work"}, limit=1)
        await client.call("debug_stop", sessionId=sid)
    captured = {"events": page["totalCount"], "expected": 2 * calls * reps, "warnings": page.get("warnings", [])}
    # Events the agent could not keep up with are counted (ring full), never silently lost.
    return loops, captured


async def run(build: Path, calls: int, reps: int) -> dict[str, Any]:
    binary = build_c("loop", build)
    base = untraced(binary, calls, reps)
    project = Path(tempfile.mkdtemp(prefix="sb-proj-"))
    try:
        strobe_loops, captured = await strobe_trace(binary, calls, reps, project)
    finally:
        shutil.rmtree(project, ignore_errors=True)
    wall: dict[str, Any] = {"untraced": base[0] / calls, "strobe": (strobe_loops[0] - base[0]) / calls}
    cpu: dict[str, Any] = {"untraced": base[1] / calls, "strobe": (strobe_loops[1] - base[1]) / calls}
    for name, measure in (("frida-trace", frida_trace), ("uftrace", uftrace)):
        result = measure(binary, calls, reps)
        wall[name] = (result[0] - base[0]) / calls if isinstance(result, tuple) else result
        cpu[name] = (result[1] - base[1]) / calls if isinstance(result, tuple) else result
    return {"per_call_ns": wall, "per_call_thread_cpu_ns": cpu, "strobe_capture": captured, "calls": calls,
            "reps": reps}
