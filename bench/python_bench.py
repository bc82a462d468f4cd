"""Python tracing: what Strobe's tracer costs inside CPython, against peers recording the same calls on the same
workload in the same run, and how many Python events per second Strobe stores with every loss counted.

The workload (bench/targets/pywork/) times its own loops of CALLS calls to `work.hot` with time.perf_counter_ns
(and the thread's CPU time), so start-up is never counted. Figures, per interpreter:

- `untraced_function`: the median loop of the plain interpreter against the same program under Strobe with one
  *other* function of the module traced (`work.checksum`, called once per loop, outside the timing). The slowdown
  is what tracing one function costs every untraced call; runs alternate (plain, Strobe, plain...) so a drift of
  the machine's load is shared. Many calls per loop: a plain call is a few tens of ns.
- `per_call_ns` (wall) and `per_call_thread_cpu_ns`: (median loop - untraced median) / CALLS with every call of the
  module traced (`work.*`), for Strobe (sys.monitoring on 3.12+, sys.settrace on 3.11; arguments and return values
  rendered, every call recorded), a pure-Python sys.setprofile recorder appending (event, name, time) tuples
  (run.py), viztracer with its defaults and viztracer logging arguments and return values.
  `recorded_calls` says how many calls of `work.hot` each one really kept.
- `sustained`: the target calls `work.paced` at SUSTAINED_HEADROOM x the target rate for a while (ingest.py's
  method); events stored per second from the go signal until all are stored, with events produced, stored,
  dropped (the tracer's full buffer, the daemon's full queue: the session's loss counter) and unaccounted for.

The targets are measured on CPython 3.12 and 3.13 (sys.monitoring); 3.11 (sys.settrace) is reported for
information. Interpreters are real ones (never pyenv's shims). viztracer comes from PyPI into a virtualenv made
from each interpreter under bench/.build/venvs (scripts/bench-deps.sh, or lazily here); when it cannot be
installed it is reported as unavailable.

Findings (2-core shared VM, busy with another engineer's tests; f98dcdc; 3.12.1, 3.13.0, 3.11.2):
- Untraced calls while one other function is traced: within noise on 3.12+ (-4.8% and +1.7% in the thread's
  CPU time, ~40 ns a call): sys.monitoring DISABLEs an untargeted code object after its first PY_START. On 3.11
  sys.settrace's global function runs on every call: ~30 -> ~160 ns (+420%).
- A traced call costs ~4.2 us of the loop thread's CPU on 3.12/3.13 (~5.8 us wall, the daemon competing for the
  2 cores), every call recorded; viztracer ~110 ns (Strobe/viztracer 27-52x in wall time, 38-39x in CPU time;
  viztracer logging arguments and return values with repr: ~1.3-1.8 us), the pure-Python setprofile recorder
  ~500-700 ns. Measured in-process with a sink that discards
  (no Frida): ~4.4 us, of which ~2.2 us is Outbox.emit (encoding each event to JSON as it is recorded, ~0.8 us
  an event) and ~0.14 us sys.monitoring's dispatch of two empty Python callbacks; the rest builds the events
  (frame.f_locals, rendering, the thread's stack).
- Sustained: the target produces the offered 240k events/s, every event is stored, none dropped, but the daemon
  stores ~70-90k events/s and catches up 15-25 s after the last call, its RSS reaching ~1 GB meanwhile. The
  daemon's decoding alone (PythonIngest.on_py_batch without the writer) is ~3 us an event (~0.9 us json.loads,
  the rest building rows and re-encoding arguments and return values).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from bench import ingest
from bench.harness import BENCH, Strobe, median, poll, strobe
from bench.overhead import Loops, _loops

WORKLOAD = BENCH / "targets" / "pywork"
VENVS = BENCH / ".build" / "venvs"
VIZTRACER = "viztracer>=1.0,<2"
TARGET_VERSIONS = ("3.12", "3.13")
INFO_VERSIONS = ("3.11",)
SUSTAINED_HEADROOM = 1.2
_RECORDED = re.compile(r"^recorded (\d+)$", re.MULTILINE)
_SETTINGS = '{"events.maxPerSession": 10000000}'


def find_python(version: str) -> str | None:
    """A real interpreter of `version`: /usr/bin, /usr/local/bin, the newest under pyenv's versions, then PATH
    (pyenv's shims pick a version by context: never them)."""
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))

    def patch(path: str) -> int:
        found = re.search(rf"/{re.escape(version)}\.(\d+)/", path)
        return int(found.group(1)) if found else -1

    pyenv = sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}"), key=patch, reverse=True)
    for path in (f"/usr/bin/python{version}", f"/usr/local/bin/python{version}", *pyenv,
                 shutil.which(f"python{version}")):
        if path and "/shims/" not in path and os.access(path, os.X_OK):
            return path
    return None


def _full_version(python: str) -> str:
    out = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"], capture_output=True,
                         text=True, timeout=60, check=True)
    return out.stdout.strip()


def viztracer_python(python: str, version: str, install: bool = True) -> str:
    """The python of a virtualenv made from `python` with viztracer in it (made and installed from PyPI when
    missing and `install`). Raises LookupError with the reason when it cannot be had."""
    venv = VENVS / f"python{version}"
    exe = venv / "bin" / "python"
    probe = [str(exe), "-c", f"import sys, viztracer; assert sys.version.startswith('{version}.')"]
    if exe.exists() and subprocess.run(probe, capture_output=True, timeout=60, check=False).returncode == 0:
        return str(exe)
    if not install:
        raise LookupError(f"not installed in {venv} (scripts/bench-deps.sh installs it)")
    print(f"  installing {VIZTRACER} from PyPI into {venv} (once; scripts/bench-deps.sh does it ahead)…",
          file=sys.stderr)
    steps = ([python, "-m", "venv", "--clear", str(venv)],
             [str(exe), "-m", "pip", "install", "-q", "--no-cache-dir", "--disable-pip-version-check", VIZTRACER])
    for step in steps:
        try:
            done = subprocess.run(step, capture_output=True, text=True, timeout=600, check=False)
        except subprocess.TimeoutExpired:
            raise LookupError(f"{' '.join(step[:3])}… timed out") from None
        if done.returncode != 0:
            raise LookupError(f"{' '.join(step[:3])}… failed: {(done.stdout + done.stderr).strip()[-300:]}")
    if subprocess.run(probe, capture_output=True, timeout=60, check=False).returncode != 0:
        raise LookupError(f"installed, but `import viztracer` fails in {venv}")
    return str(exe)


def _project() -> Path:
    """A private copy of the workload (the interpreter writes __pycache__ there; Strobe reads .strobe/)."""
    project = Path(tempfile.mkdtemp(prefix="sb-pyproj-"))
    shutil.copytree(WORKLOAD, project, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    (project / ".strobe").mkdir(exist_ok=True)
    (project / ".strobe" / "settings.json").write_text(_SETTINGS)
    return project


def _parsed(output: str, what: str) -> Loops:
    loops = _loops(output)
    if loops is None:
        raise RuntimeError(f"{what}: no loop timings in its output: {output[-500:]!r}")
    return loops


def plain(python: str, project: Path, calls: int, reps: int, mode: str = "plain") -> tuple[Loops, int | None]:
    """The workload run directly (`mode`: plain, or one of run.py's in-process recorders); its loops, and the calls
    of work.hot the recorder kept."""
    done = subprocess.run([python, "run.py", "loop", str(calls), str(reps), mode], cwd=project, capture_output=True,
                          text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{python} run.py {mode} failed: {done.stderr.strip()[-500:]}")
    recorded = _RECORDED.search(done.stdout)
    return _parsed(done.stdout, f"{python} run.py {mode}"), int(recorded.group(1)) if recorded else None


async def _calls(client: Strobe, sid: str, function: str) -> int:
    page = await client.call("debug_query", sessionId=sid, function={"equals": function}, eventType="function_enter",
                             limit=1)
    return int(page["totalCount"])


async def _launch(client: Strobe, python: str, project: Path, pattern: str, args: list[str]) -> str:
    """Stage `pattern` (pending: active before the program's first line) and launch the workload under it."""
    await client.call("debug_trace", add=[pattern])
    launched = await client.call("debug_launch", command=python, args=["run.py", *args], projectRoot=str(project),
                                 cwd=str(project))
    if launched.get("hookedFunctions", 0) < 1:
        raise RuntimeError(f"{pattern} hooked nothing: {launched}")
    return str(launched["sessionId"])


async def under_strobe(python: str, project: Path, calls: int, reps: int, pattern: str) -> tuple[Loops, dict[str, Any]]:
    """The workload's loops under Strobe with `pattern` traced, and what Strobe stored of work.hot and
    work.checksum. The program runs to its end untouched: the bench only waits for the session to end (no query
    while it runs: a query has the tracer flush)."""
    async with strobe() as client:
        sid = await _launch(client, python, project, pattern, ["loop", str(calls), str(reps)])
        await poll(lambda: ingest.ended(client, sid), 600, f"the workload under {pattern} to end")
        texts = await client.output(sid)
        page = await client.call("debug_query", sessionId=sid, limit=1)
        captured = {"hot_calls": await _calls(client, sid, "work.hot"),
                    "checksum_calls": await _calls(client, sid, "work.checksum"),
                    "dropped_events": ingest._counts(page.get("warnings", []))[1]}
        await client.call("debug_stop", sessionId=sid)
    return _parsed("".join(texts), f"{python} under Strobe ({pattern})"), captured


async def untraced_function(python: str, project: Path, calls: int, reps: int, rounds: int) -> dict[str, Any]:
    """How much slower an untraced function runs while one other function of its module is traced: in the loop
    thread's CPU time (the verdict: what the interpreter does more per call) and in wall time (which on a shared
    2-core machine moves by more than the 5% asked for from one run to the next)."""
    base: list[Loops] = []
    traced: list[Loops] = []
    checksums: list[int] = []
    for _ in range(rounds):
        base.append(plain(python, project, calls, reps)[0])
        loops, captured = await under_strobe(python, project, calls, reps, "work.checksum")
        traced.append(loops)
        if captured["hot_calls"]:
            raise RuntimeError(f"work.hot was recorded while only work.checksum was traced: {captured}")
        checksums.append(captured["checksum_calls"])
    out: dict[str, Any] = {"calls": calls, "reps": reps, "rounds": rounds}
    for clock, index in (("wall", 0), ("thread_cpu", 1)):
        plain_ns = median([loops[index] for loops in base]) / calls
        strobe_ns = median([loops[index] for loops in traced]) / calls
        out[clock] = {"untraced_ns_per_call": plain_ns, "strobe_ns_per_call": strobe_ns,
                      "slowdown_pct": 100 * (strobe_ns - plain_ns) / plain_ns}
    out["traced_function_calls"] = {"recorded": sum(checksums), "expected": reps * rounds}
    return out


async def traced_calls(python: str, viz: str | None, why: str, project: Path, calls: int,
                       reps: int) -> dict[str, Any]:
    """Per traced call, for Strobe and the peers, against one untraced baseline of the same run."""
    base, _none = plain(python, project, calls, reps)
    runs: dict[str, Loops | str] = {}
    recorded: dict[str, Any] = {}
    strobe_loops, captured = await under_strobe(python, project, calls, reps, "work.*")
    runs["strobe"] = strobe_loops
    recorded["strobe"] = captured["hot_calls"]
    recorded["strobe_dropped_events"] = captured["dropped_events"]
    runs["setprofile"], recorded["setprofile"] = plain(python, project, calls, reps, "setprofile")
    for name, mode in (("viztracer", "viztracer"), ("viztracer +args/retval", "viztracer-args")):
        if viz is None:
            runs[name] = f"unavailable: {why}"
            continue
        runs[name], recorded[name] = plain(viz, project, calls, reps, mode)
    wall: dict[str, Any] = {"untraced": base[0] / calls}
    cpu: dict[str, Any] = {"untraced": base[1] / calls}
    for name, result in runs.items():
        wall[name] = (result[0] - base[0]) / calls if isinstance(result, tuple) else result
        cpu[name] = (result[1] - base[1]) / calls if isinstance(result, tuple) else result
    return {"calls": calls, "reps": reps, "per_call_ns": wall, "per_call_thread_cpu_ns": cpu,
            "recorded_calls": recorded, "expected_calls": calls * reps}


async def sustained(python: str, project: Path, rate: int, seconds: float) -> dict[str, Any]:
    """Python events stored per second while the target calls work.paced at `rate` calls/s (2 events a call), from
    the go signal until all are stored; the daemon's peak RSS meanwhile, and how long after the target's last call
    (go + `seconds`) the last event was stored."""
    go = project / "go"
    go.unlink(missing_ok=True)
    async with strobe() as client:
        sid = await _launch(client, python, project, "work.paced", ["rate", str(rate), str(seconds), str(go)])
        await client.wait_output(sid, lambda t: "ready\n" in t, 60)
        stop, peak = anyio.Event(), [0]
        async with anyio.create_task_group() as tg:
            tg.start_soon(ingest._peak_rss, client.daemon_pid(), stop, peak)
            started = time.perf_counter()
            go.touch()
            # The target exits after "done": once the session reads as ended, every event it sent is stored.
            await poll(lambda: ingest.ended(client, sid), seconds + 300, "the sustained Python run to end")
            page = await client.call("debug_query", sessionId=sid, limit=1)
            stored_at = time.perf_counter()
            stop.set()
        texts = await client.output(sid)
        calls = int(next(x for x in texts if x.startswith("done ")).split()[1])
        paced = await client.call("debug_query", sessionId=sid, function={"equals": "work.paced"}, limit=1)
        await client.call("debug_stop", sessionId=sid)
    warnings = page.get("warnings", [])
    sampled, dropped = ingest._counts(warnings)
    stored = paced["totalCount"] + ingest._trimmed(warnings)
    return {"offered_events_per_s": 2 * rate, "seconds": seconds, "produced_events": 2 * calls,
            "stored_events": stored, "dropped_events": dropped, "sampled_events": sampled,
            "unaccounted": 2 * calls - stored - dropped - sampled, "events_per_s": stored / (stored_at - started),
            "catch_up_s": stored_at - started - seconds, "daemon_peak_rss_mb": peak[0] / 2**20}


async def run_interpreter(python: str, version: str, role: str, quick: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"python": python.replace(os.path.expanduser("~"), "~"), "version": _full_version(python),
                           "role": role}
    viz: str | None = None
    why = ""
    try:
        viz = viztracer_python(python, version)
    except LookupError as exc:
        why = str(exc)
        print(f"  viztracer unavailable for {python}: {why}", file=sys.stderr)
    project = _project()
    try:
        out["untraced_function"] = await untraced_function(python, project, 2_000 if quick else 1_000_000,
                                                           2 if quick else 7, 1 if quick else 3)
        out.update(await traced_calls(python, viz, why, project, 2_000 if quick else 100_000, 2 if quick else 5))
        out["sustained"] = await sustained(python, project, round((10_000 if quick else 100_000) * SUSTAINED_HEADROOM),
                                           1.0 if quick else 10.0)
    finally:
        shutil.rmtree(project, ignore_errors=True)
    return out


async def run(quick: bool) -> dict[str, Any]:
    """Every 3.12 / 3.13 interpreter found (quick: the first one only), then 3.11 for information (not quick)."""
    found = [(v, "target", find_python(v)) for v in TARGET_VERSIONS]
    found += [(v, "information", find_python(v)) for v in INFO_VERSIONS]
    results: dict[str, Any] = {"missing": [v for v, _, p in found if p is None], "interpreters": {}}
    chosen = [(v, role, p) for v, role, p in found if p is not None]
    if quick:
        chosen = [c for c in chosen if c[1] == "target"][:1]
    for version, role, python in chosen:
        print(f"  Python {version} ({role}): {python}", file=sys.stderr)
        results["interpreters"][version] = await run_interpreter(python, version, role, quick)
    return results


def install_peers() -> int:
    """For scripts/bench-deps.sh: viztracer in a virtualenv per interpreter found (a failure is reported, not
    fatal: the benchmark then reports viztracer as unavailable)."""
    for version in (*TARGET_VERSIONS, *INFO_VERSIONS):
        python = find_python(version)
        if python is None:
            print(f"python{version}: not found", file=sys.stderr)
            continue
        try:
            print(f"python{version}: viztracer in {viztracer_python(python, version)}", file=sys.stderr)
        except LookupError as exc:
            print(f"python{version}: viztracer unavailable: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    if sys.argv[1:] != ["install-peers"]:
        raise SystemExit("usage: python -m bench.python_bench install-peers (the benchmark is `python -m bench`)")
    raise SystemExit(install_peers())
