"""Node tracing: what Strobe costs a JavaScript program, untraced and traced, against a naive console.log wrapper on
the same workload in the same run, and how many JavaScript events per second Strobe stores with every loss counted.

The workload (bench/targets/jswork/) times its own loops of CALLS calls to `work.hot` with process.hrtime.bigint()
(with the process's CPU time, process.cpuUsage(), and the time the loop's thread waited for a CPU, from
/proc/thread-self/schedstat), so start-up is never counted. Figures:

- `untraced`: the median loop of plain `node run.js` (no Strobe) against the same program under Strobe with no
  pattern, and under Strobe with one *other* function of the module traced (`work.checksum`, called once per loop,
  outside the timing: "cost elsewhere"; its module, work.js, is then rewritten and loaded from the rewrite). Runs
  alternate (plain, no pattern, one traced, plain...) so a drift of the machine's load is shared; the slowdown is
  the median over runs of each run's median loop. `hot` is a few ns of integer work that V8 inlines into the loop,
  so any change in how V8 compiles the loop shows. The verdict is on wall time. Each run has a private STROBE_HOME,
  so the first launch indexes /usr/bin/node's symbols with a cold cache: before the program starts when a pattern is
  staged, while it runs when none is; a second launch without pattern on the same daemon (cache warm) is reported
  for information.
- `per_call_ns`, `per_call_cpu_ns`: (median loop - untraced median) / CALLS with every function of work.js traced
  (`work.*`: its arguments and return value rendered, every call recorded), and for the naive peer: each function
  work.js exports wrapped by hand with a wrapper that console.log's the call with its arguments and the return with
  its value (run.js consolelog), stdout redirected to a file (Node writes to a file synchronously), whose lines are
  counted to check the peer logged every call. `strobe_vs_consolelog` is the ratio of the two per-call figures.
- `store`: the same Strobe run (`work.*`), from the debug_launch call until the session reads as ended (the daemon
  stores the last batch before it does): events stored per second, and every event accounted for: the totalCount of
  each work.js function (plus any trimmed by events.maxPerSession, set out of the way) + events reported lost
  ("dropped") + sampled must equal the 2 events per call the program made. The verdict is on this first launch
  (cold symbol cache, its time reported apart with the rate from its response); `store_warm_cache` is a second
  launch on the same daemon.

Findings (2-core shared VM, Node 20.20.2, 0c6dc7d; five full runs, one while another engineer's test suite ran):
- Untraced loop (0.67-0.69 ns a call, inlined): +1.8% with work.checksum traced, +2.0% with no pattern, +0.4% with
  no pattern and a warm cache on a quiet machine. What Strobe adds is waiting for a CPU, not slower code (the
  process's CPU time per loop is within +-1.5%): ~1 ms per 70 ms loop from the daemon's and the process's background
  wake-ups, and with no pattern on a cold cache the daemon's index of /usr/bin/node (79k functions, ~1.1 s of one
  core) runs during the program's first second (4-10 ms of wait on each of those loops). Run to run the median moves
  by several % (the no-pattern figure read +7.9% and +14% in runs disturbed by other work; the waits show it).
- V8 alone sometimes runs the first two loops of a run ~6x slower (~4 ns a call: the loop not inlined yet), with or
  without Strobe (2/60 plain runs, a little more often with a rewritten module): medians of 7 loops hide it.
- A traced call costs ~1.1 us wall, ~1.05 us of process CPU (the console.log wrapper: ~5.1 us, so Strobe is ~4.5x
  cheaper). In-process, with a recorder fed by a loop (no daemon): ~0.6 us recording (two hrtime.bigint() reads,
  two Atomics seqs, rendering the arguments and the value, building each event's text, the arrow and arguments
  object of the wrapper), ~0.2 us joining batches, ~0.26 us writeSync to the events file.
- The program produces ~1.8M events/s during its loops; the daemon stores ~250-265k/s (the CPython ingest path),
  its ingest queue holds 750k records and refuses the rest, counted as dropped (~30% of this burst): 0 unaccounted
  in every run. From the debug_launch call: 195-216k events/s on quiet runs (199,833 in the last), of which the
  first launch's 1.3-1.4 s (indexing /usr/bin/node with a cold cache) is ~20% of the time; 250-285k/s with a warm
  cache.
"""

from __future__ import annotations

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

WORKLOAD = BENCH / "targets" / "jswork"
FUNCTIONS = ("work.hot", "work.checksum", "work.describe")  # every function of work.js
_SETTINGS = '{"events.maxPerSession": 10000000}'
_LOOP = re.compile(r"^loop (\d+) (\d+) (\d+) (-?\d+)$", re.MULTILINE)
Loops = tuple[float, float, float]  # median of a run's loops: wall, process CPU, the loop's wait for a CPU (ns)
TARGET_UNTRACED_SLOWDOWN_PCT = 5
TARGET_EVENTS_PER_S = 200_000


def _node() -> str | None:
    return shutil.which("node")


def _project() -> Path:
    """A private copy of the workload (Strobe indexes projectRoot and reads .strobe/settings.json there)."""
    project = Path(tempfile.mkdtemp(prefix="sb-jsproj-"))
    shutil.copytree(WORKLOAD, project, dirs_exist_ok=True)
    (project / ".strobe").mkdir(exist_ok=True)
    (project / ".strobe" / "settings.json").write_text(_SETTINGS)
    return project


def _parsed(output: str, what: str) -> Loops:
    found = {int(rep): (float(wall), float(cpu), float(waited)) for rep, wall, cpu, waited in _LOOP.findall(output)}
    if not found:
        raise RuntimeError(f"{what}: no loop timings in its output: {output[-500:]!r}")
    return (median([t[0] for t in found.values()]), median([t[1] for t in found.values()]),
            median([t[2] for t in found.values()]))


def plain(node: str, project: Path, calls: int, reps: int) -> Loops:
    """The workload run directly, no Strobe."""
    done = subprocess.run([node, "run.js", str(calls), str(reps)], cwd=project, capture_output=True, text=True,
                          timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"node run.js failed: {done.stderr.strip()[-500:]}")
    return _parsed(done.stdout, "node run.js")


def consolelog(node: str, project: Path, calls: int, reps: int) -> tuple[Loops, int, int]:
    """The naive peer: every export of work.js wrapped by a console.log wrapper, stdout to a file; its loops, the
    calls of work.hot it logged and the size of its log."""
    log = project / "consolelog.out"
    try:
        with open(log, "w") as out:
            done = subprocess.run([node, "run.js", str(calls), str(reps), "consolelog"], cwd=project, stdout=out,
                                  stderr=subprocess.PIPE, text=True, timeout=600, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"node run.js consolelog failed: {done.stderr.strip()[-500:]}")
        text = log.read_text()
    finally:
        size = log.stat().st_size if log.exists() else 0
        log.unlink(missing_ok=True)
    logged = sum(1 for _ in re.finditer(r"^call hot ", text, re.MULTILINE))
    returned = sum(1 for _ in re.finditer(r"^return hot ", text, re.MULTILINE))
    return _parsed(text, "node run.js consolelog"), min(logged, returned), size


async def _stage(client: Strobe, project: Path, pattern: str | None) -> None:
    """Stage `pattern` for the next launch (before it: a module already loaded keeps its code)."""
    if pattern is not None:
        await client.call("debug_trace", add=[pattern], projectRoot=str(project))


async def _launch(client: Strobe, node: str, project: Path, pattern: str | None, args: list[str]) -> dict[str, Any]:
    """Launch the workload, `pattern` staged."""
    launched = await client.call("debug_launch", command=node, args=["run.js", *args], projectRoot=str(project),
                                 cwd=str(project))
    if pattern is not None and launched.get("hookedFunctions", 0) < 1:
        raise RuntimeError(f"{pattern} hooked nothing: {launched}")
    return launched


async def _stored(client: Strobe, sid: str) -> tuple[dict[str, int], list[str]]:
    counts: dict[str, int] = {}
    warnings: list[str] = []
    for function in FUNCTIONS:
        page = await client.call("debug_query", sessionId=sid, function={"equals": function}, limit=1)
        counts[function] = int(page["totalCount"])
        warnings = page.get("warnings", [])
    return counts, warnings


async def under_strobe(node: str, project: Path, calls: int, reps: int, pattern: str | None,
                       launches: int = 1) -> list[tuple[Loops, dict[str, int]]]:
    """The workload's loops under Strobe (`pattern` traced, or nothing), and the calls stored per function, for each
    of `launches` launches one after the other on the same daemon (the first with a cold symbol cache, the next warm).
    No query while it runs (a query has the tracer flush): the bench waits for the session to end."""
    async def once(client: Strobe) -> tuple[Loops, dict[str, int]]:
        sid = str((await _launch(client, node, project, pattern, [str(calls), str(reps)]))["sessionId"])
        await poll(lambda: ingest.ended(client, sid), 600, f"the workload under {pattern} to end")
        texts = await client.output(sid)
        counts, _warnings = await _stored(client, sid)
        await client.call("debug_stop", sessionId=sid)
        return _parsed("".join(texts), f"node under Strobe ({pattern})"), {f: n // 2 for f, n in counts.items()}

    async with strobe() as client:
        await _stage(client, project, pattern)
        return [await once(client) for _ in range(launches)]


NO_PATTERN = "strobe, no pattern"
NO_PATTERN_WARM = "strobe, no pattern, warm cache"
ONE_TRACED = "strobe, work.checksum traced"


async def untraced(node: str, project: Path, calls: int, reps: int, rounds: int) -> dict[str, Any]:
    """How much slower the hot loop (untraced) runs under Strobe with no pattern, and with one other function of its
    module traced, than without Strobe; rounds alternate them. With no pattern, the first launch of a daemon on a
    fresh STROBE_HOME indexes /usr/bin/node's symbols while the program runs (with a pattern staged, before it
    starts): a second launch on the same daemon (cache warm) is reported too, for information."""
    runs: dict[str, list[Loops]] = {"plain": [], NO_PATTERN: [], NO_PATTERN_WARM: [], ONE_TRACED: []}
    checksums = 0
    for _ in range(rounds):
        runs["plain"].append(plain(node, project, calls, reps))
        (cold, cold_calls), (warm, warm_calls) = await under_strobe(node, project, calls, reps, None, launches=2)
        runs[NO_PATTERN].append(cold)
        runs[NO_PATTERN_WARM].append(warm)
        if any(cold_calls.values()) or any(warm_calls.values()):
            raise RuntimeError(f"calls were recorded with no pattern: {cold_calls} {warm_calls}")
        [(loops, calls_stored)] = await under_strobe(node, project, calls, reps, "work.checksum")
        runs[ONE_TRACED].append(loops)
        if calls_stored["work.hot"]:
            raise RuntimeError(f"work.hot was recorded while only work.checksum was traced: {calls_stored}")
        checksums += calls_stored["work.checksum"]
    out: dict[str, Any] = {"calls": calls, "reps": reps, "rounds": rounds}
    for clock, index in (("wall", 0), ("cpu", 1), ("waited", 2)):
        figures: dict[str, Any] = {}
        base = median([loops[index] for loops in runs["plain"]]) / calls
        for name, loops_of_runs in runs.items():
            per_call = median([loops[index] for loops in loops_of_runs]) / calls
            figures[name] = {"ns_per_call": per_call, "runs_ms": [loops[index] / 1e6 for loops in loops_of_runs]}
            if name != "plain" and clock != "waited":
                figures[name]["slowdown_pct"] = 100 * (per_call - base) / base
        out[clock] = figures
    out["traced_function_calls"] = {"recorded": checksums, "expected": reps * rounds}
    return out


async def _store_run(client: Strobe, node: str, project: Path, calls: int, reps: int) -> tuple[Loops, dict[str, Any]]:
    """One launch of the workload with the staged pattern (`work.*`): its loops, and what reached the store from the
    debug_launch call until the session reads as ended (the daemon has then read the tracer's file to its end and
    stored it), every event accounted for."""
    stop, peak = anyio.Event(), [0]
    async with anyio.create_task_group() as tg:
        tg.start_soon(ingest._peak_rss, client.daemon_pid(), stop, peak)
        started = time.perf_counter()
        launched = await _launch(client, node, project, "work.*", [str(calls), str(reps)])
        responded = time.perf_counter()
        sid = str(launched["sessionId"])
        await poll(lambda: ingest.ended(client, sid), 600, "the traced workload to end")
        stored_at = time.perf_counter()
        stop.set()
    texts = await client.output(sid)
    counts, warnings = await _stored(client, sid)
    await client.call("debug_stop", sessionId=sid)
    loops = _parsed("".join(texts), "node under Strobe (work.*)")
    sampled, dropped = ingest._counts(warnings)
    trimmed = ingest._trimmed(warnings)
    produced = 2 * (calls * reps + reps + 1)  # hot CALLS times a loop, checksum once a loop, describe once
    stored = sum(counts.values()) + trimmed
    elapsed, after_launch = stored_at - started, stored_at - responded
    return loops, {
        "produced_events": produced, "stored_events": stored, "stored_by_function": counts,
        "dropped_events": dropped, "sampled_events": sampled, "trimmed_events": trimmed,
        "unaccounted": produced - stored - dropped - sampled,
        "events_per_s": stored / elapsed, "seconds": elapsed,
        "launch_s": responded - started, "events_per_s_after_launch": stored / after_launch,
        "traced_loops_s": loops[0] * reps / 1e9, "daemon_peak_rss_mb": peak[0] / 2**20,
    }


async def traced(node: str, project: Path, calls: int, reps: int) -> dict[str, Any]:
    """Every function of work.js traced: the cost per call and what reached the store, with one untraced baseline
    and the console.log peer of the same run. The store figures of the verdict are the first launch's (a private
    STROBE_HOME: /usr/bin/node's symbols indexed with a cold cache, as any first launch); a second launch on the same
    daemon (cache warm) is reported next to them."""
    base = plain(node, project, calls, reps)
    async with strobe() as client:
        await _stage(client, project, "work.*")  # staged patterns stay staged: both launches trace work.*
        strobe_loops, store = await _store_run(client, node, project, calls, reps)
        _loops, store_warm = await _store_run(client, node, project, calls, reps)
    peer_loops, peer_logged, peer_bytes = consolelog(node, project, calls, reps)
    per_call: dict[str, Any] = {}
    per_call_cpu: dict[str, Any] = {}
    for name, loops in (("untraced", base), ("strobe", strobe_loops), ("console.log wrapper", peer_loops)):
        per_call[name] = (loops[0] - (base[0] if loops is not base else 0)) / calls
        per_call_cpu[name] = (loops[1] - (base[1] if loops is not base else 0)) / calls
    return {
        "calls": calls, "reps": reps, "expected_calls": calls * reps,
        "per_call_ns": per_call, "per_call_cpu_ns": per_call_cpu,
        "strobe_waited_ns_per_call": strobe_loops[2] / calls,
        "strobe_vs_consolelog": per_call["strobe"] / per_call["console.log wrapper"],
        "recorded_calls": {"strobe": store["stored_by_function"]["work.hot"] // 2, "console.log wrapper": peer_logged},
        "consolelog_output": f"a file ({peer_bytes / 2**20:.1f} MB written)",
        "store": store, "store_warm_cache": store_warm,
    }


def _version(node: str) -> str:
    return subprocess.run([node, "--version"], capture_output=True, text=True, timeout=60,
                          check=False).stdout.strip()


def verdicts(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The section's rows, shaped as bench/report.py's."""
    from bench.report import _verdict

    if "untraced" not in node:
        return []
    wall = node["untraced"]["wall"]
    rows = [
        _verdict("Node: untraced loop slowdown, one other function traced",
                 wall[ONE_TRACED]["slowdown_pct"], TARGET_UNTRACED_SLOWDOWN_PCT, "lower", "%"),
        _verdict("Node: untraced loop slowdown, Strobe with no pattern",
                 wall[NO_PATTERN]["slowdown_pct"], TARGET_UNTRACED_SLOWDOWN_PCT, "lower", "%"),
    ]
    store = node["store"]
    rows.append(_verdict("Node: JS events/s into the store (launch to all stored)", store["events_per_s"],
                         TARGET_EVENTS_PER_S, "higher", "events/s"))
    rows.append(_verdict("Node: events unaccounted for (silent loss)", store["unaccounted"], 0, "lower", "events"))
    rows.append({"metric": "Node: Strobe / console.log wrapper per traced call", "value": node["strobe_vs_consolelog"],
                 "target": None, "ok": True, "note": "no target", "unit": "x"})
    return rows


def _store_line(store: dict[str, Any], what: str) -> str:
    from bench.report import _fmt

    return (f"  store, {what}: {store['stored_events']:,} stored, {store['dropped_events']:,} dropped, "
            f"{store['sampled_events']:,} sampled, {store['unaccounted']:,} unaccounted of "
            f"{store['produced_events']:,} produced; {_fmt(store['events_per_s'])} events/s over "
            f"{_fmt(store['seconds'])} s from debug_launch "
            f"(the launch {_fmt(store['launch_s'])} s; {_fmt(store['events_per_s_after_launch'])} events/s from its "
            f"response; traced loops {_fmt(store['traced_loops_s'])} s); daemon peak RSS "
            f"{_fmt(store['daemon_peak_rss_mb'])} MB")


def table(node: dict[str, Any]) -> list[str]:
    from bench.report import _fmt

    if "untraced" not in node:
        return [f"Node: {node.get('missing', 'not measured')}"]
    lines = [f"Node {node['version']} ({node['node']}):"]
    figures = node["untraced"]
    lines.append(f"  untraced hot loop, {figures['calls']:,} calls a loop, median of {figures['reps']} loops, "
                 f"median of {figures['rounds']} runs (ns per call: wall / process CPU / waiting for a CPU):")
    for name, wall in figures["wall"].items():
        cpu, waited = figures["cpu"][name], figures["waited"][name]
        slowdown = f"   ({wall['slowdown_pct']:+.1f}% / {cpu['slowdown_pct']:+.1f}%)" if "slowdown_pct" in wall else ""
        lines.append(f"    {name:<32} {_fmt(wall['ns_per_call'])} / {_fmt(cpu['ns_per_call'])} / "
                     f"{_fmt(waited['ns_per_call'])}{slowdown}")
    lines.append(f"  per traced call (ns: wall / process CPU) and calls of work.hot recorded of "
                 f"{node['expected_calls']:,}:")
    for peer, wall in node["per_call_ns"].items():
        kept = node["recorded_calls"].get(peer)
        lines.append(f"    {peer:<24} {_fmt(wall)} / {_fmt(node['per_call_cpu_ns'][peer])}"
                     + (f"   {kept:,}" if kept is not None else ""))
    lines.append(f"    (Strobe's loop waited {_fmt(node['strobe_waited_ns_per_call'])} ns a call for a CPU; the "
                 f"console.log wrapper's stdout: {node['consolelog_output']}; Strobe / console.log "
                 f"{_fmt(node['strobe_vs_consolelog'])}x)")
    lines.append(_store_line(node["store"], "first launch (cold symbol cache)"))
    lines.append(_store_line(node["store_warm_cache"], "second launch, same daemon (warm cache)"))
    return lines


async def run(quick: bool) -> dict[str, Any]:
    node = _node()
    if node is None:
        return {"missing": "node not found on PATH"}
    results: dict[str, Any] = {"node": node, "version": _version(node)}
    print(f"  Node {results['version']}: {node}", file=sys.stderr)
    project = _project()
    try:
        results["untraced"] = await untraced(node, project, 1_000_000 if quick else 100_000_000, 2 if quick else 7,
                                             1 if quick else 7)
        results.update(await traced(node, project, 5_000 if quick else 200_000, 2 if quick else 5))
    finally:
        shutil.rmtree(project, ignore_errors=True)
    results["verdicts"] = verdicts(results)
    for line in table(results):
        print(line, file=sys.stderr)
    for row in results["verdicts"]:
        print(f"  {row['metric']:<58} {_fmt_value(row['value']):>14} {_fmt_value(row['target']):>10}  {row['note']}",
              file=sys.stderr)
    return results


def _fmt_value(value: Any) -> str:
    from bench.report import _fmt

    return _fmt(value)
