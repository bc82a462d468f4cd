"""Scaling curves of the native tracer and the store: how Strobe's costs move as one dimension grows.

- `hooks`: per traced call (enter + exit) versus the number of hooked functions. The target
  (bench/targets/hooks.py, generated and compiled into the build directory) holds FUNCTIONS tiny functions and a
  table of pointers to them; `debug_trace` hooks the first N (one pattern, e.g. 'hook_00*' for 100). Each rep runs a
  loop of CALLS calls cycling through the N functions ("all": every hook is exercised, so the hooks' code, data and
  trampolines compete for the caches) and a loop of CALLS calls to the first one alone ("one": N functions hooked,
  one of them called). The target times its own loops; as in bench/overhead.py the cost per call is (median traced
  loop - median untraced loop of the same binary, same arguments) / CALLS, in wall time and in the looping thread's
  CPU time, with every call recorded (sampling off through the project's settings). Loops are PAUSE_MS apart and
  each waits until the previous one's events are stored (with a fixed pause a backlog built up over the ten loops
  on a busy 2-core machine and overflowed the agent's ring), so each loop runs beside the draining of its own
  events only. `debug_trace_s` is the time debug_trace took to hook them (the first debug_trace of a fresh store: it
  includes waiting for the binary's function index), `events` what the store kept of the 4 * CALLS * REPS events
  (dropped and sampled counted).
- `query`: debug_query latency (p50 / p95, through MCP, the filters of bench/ingest.py) versus the events the
  queried session holds. The events are real: the threads target (one thread) calls paced() at RATE calls per
  second under Strobe, with events.maxPerSession set to SIZE, until the session holds SIZE events (debug_query's
  totalCount, polled; events dropped while filling only make it take longer), then it is told to stop; the session
  keeps its newest SIZE events and the daemon that stored them answers the queries. A session holds at most
  events.maxPerSession events, and that setting has a maximum (src/strobe/settings.py): a size above it is reported
  as {"cap": ...}, not measured. Each size runs on a fresh store (a private STROBE_HOME).
- `ingest`: sustained ingest versus traced threads. The threads target runs THREADS threads calling paced() at
  RATE / THREADS calls per second each (the same total offered to every point: bench/ingest.py's target rate with
  its headroom) for SECONDS. As in bench/ingest.py: events stored per second from the go signal until every event
  is stored, and the produced events split into stored, sampled, dropped (counted by Strobe) and unaccounted
  (silent loss: must be 0), with the daemon's peak RSS. `threads_seen` checks that the last thread's calls were
  traced too. Each point runs on a fresh store.

    python -m bench --only curves [--quick]

`--quick` runs every curve at toy sizes (a 100-function target; sessions of a few thousand events; 1 s of ingest) on
one shared daemon, so the code cannot rot; its figures mean nothing. The full run takes ~8-10 minutes here, most of
it filling the 10M-event session.

Findings (2-core VM shared with another engineer's test runs, load average 4-5, bench under nice 10; a36f030 plus
the working tree, 2026-11-28):
- hooks: per call, thread CPU ~610-635 ns with 1 or 100 functions hooked, whichever is called; cycling through
  10,000 hooked functions ~865-930 ns (untraced, the same cycling costs ~21 ns a call against ~5 ns: the code no
  longer fits the caches, and the hooks' trampolines and per-function state add to it). One function called while
  10,000 are hooked costs what it costs with one hooked. Wall figures (1.8-3.1 us) are mostly the loop waiting for a
  CPU and moved by +-20% between runs. Hooking 10,000 functions took debug_trace 15-26 s (1.2-1.8 s for 1 or 100,
  mostly the function index).
- query: p50 3-22 ms at 200k, 1M and 10M for every filter but minDurationNs at 10M (63-81 ms p50, 147-172 ms p95);
  the MCP round trip alone was 3-9 ms. Filling 10M took 150-170 s (the store kept ~60-90k events/s here).
- ingest: of 300k events/s offered, 68-101k stored per second at 1, 4 and 16 threads, the rest dropped and counted,
  0 unaccounted; 4 and 16 threads stored 15-30% less than 1 in the same run.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio

from bench import ingest
from bench.harness import Strobe, build_c, median, poll, strobe
from bench.targets import hooks
from strobe.settings import SETTING_SPECS

HOOKED = (1, 100, 10_000)
HOOKED_QUICK = (1, 100)
HOOK_CALLS, HOOK_REPS = 100_000, 5
HOOK_PAUSE_MS = 300  # after each loop, as bench/overhead.py pauses; then the next waits until the store caught up
HOOK_CALLS_QUICK, HOOK_REPS_QUICK, HOOK_PAUSE_MS_QUICK = 2_000, 2, 100

QUERY_SIZES = (200_000, 1_000_000, 10_000_000, 50_000_000)
QUERY_SIZES_QUICK = (2_000, 10_000, 50_000_000)  # the largest costs nothing: it is over the cap
QUERY_FILL_RATE = 100_000  # calls/s: 200k events/s, under the store's 250k target; what it cannot take is dropped
# (counted), which only makes the fill longer
QUERY_FILL_POLL_S = 0.25  # each poll answers once what arrived before it is stored (debug_query catches up first)
QUERY_FILL_SLACK = 5  # a fill taking this many times longer than at the offered rate (plus a minute) is cut short
QUERY_ROUNDS, QUERY_ROUNDS_QUICK = 25, 3

THREADS = (1, 4, 16)
INGEST_RATE = round(125_000 * ingest.SUSTAINED_HEADROOM)  # calls per second, all threads together
INGEST_SECONDS = 10.0
INGEST_RATE_QUICK, INGEST_SECONDS_QUICK = 20_000, 1.0

_LOOP = re.compile(r"^(all|one) (\d+) (\d+) (\d+)$", re.MULTILINE)
_FULL_CAPTURE = {"trace.samplePercent": 100, "trace.hotCallsPerSecond": 100_000_000}
MAX_PER_SESSION = next(s.maximum for s in SETTING_SPECS if s.key == "events.maxPerSession")

Loops = dict[str, tuple[float, float]]  # "all" / "one": median wall ns, median thread-CPU ns of a loop
Daemon = Callable[[], AbstractAsyncContextManager[Strobe]]
"""Gives each point of a curve its Strobe: a fresh daemon and store (`harness.strobe`), or in a quick run one shared
daemon (`_shared`), since starting a daemon takes seconds."""


def _shared(client: Strobe) -> Daemon:
    @asynccontextmanager
    async def same() -> AsyncIterator[Strobe]:
        yield client

    return same


@contextmanager
def _project(max_per_session: int) -> Iterator[Path]:
    """A throwaway project root whose settings record every call and keep `max_per_session` events."""
    project = Path(tempfile.mkdtemp(prefix="sb-proj-"))
    try:
        (project / ".strobe").mkdir()
        settings = {**_FULL_CAPTURE, "events.maxPerSession": max_per_session}
        (project / ".strobe" / "settings.json").write_text(json.dumps(settings))
        yield project
    finally:
        shutil.rmtree(project, ignore_errors=True)


async def _start(client: Strobe, binary: Path, args: list[str], project: Path,
                 pattern: str) -> tuple[str, float, dict[str, Any]]:
    """Launch `binary` (it waits for its GO_FILE) and hook `pattern`: the session id, debug_trace's time and answer."""
    launched = await client.call("debug_launch", command=str(binary), args=args, projectRoot=str(project))
    sid: str = launched["sessionId"]
    await client.wait_output(sid, lambda t: "ready\n" in t, 60)
    elapsed, traced = await client.timed("debug_trace", sessionId=sid, add=[pattern])
    return sid, elapsed, traced


async def _finish(client: Strobe, sid: str, marker: str, timeout: float) -> list[str]:
    """The program's output once it printed a line starting with `marker` and its session ended (all stored)."""
    texts = await client.wait_output(sid, lambda t: any(x.startswith(marker) for x in t), timeout)
    await poll(lambda: ingest.ended(client, sid), 120, "the session to end")
    return texts


def _printed_loops(k: int) -> Callable[[list[str]], bool]:
    return lambda texts: sum(bool(_LOOP.match(text)) for text in texts) >= k


def _loops(output: str) -> Loops:
    found: dict[str, list[tuple[float, float]]] = {"all": [], "one": []}
    for label, _rep, wall, cpu in _LOOP.findall(output):
        found[label].append((float(wall), float(cpu)))
    if not found["all"] or not found["one"]:
        raise AssertionError(f"no timed loops in the target's output: {output[-300:]!r}")
    return {label: (median([w for w, _ in loops]), median([c for _, c in loops])) for label, loops in found.items()}


# ---- per traced call versus hooked functions ----------------------------------------------------------------------


async def _hooked_point(daemon: Daemon, binary: Path, n: int, calls: int, reps: int, pause_ms: int) -> dict[str, Any]:
    plain = await anyio.run_process([str(binary), str(n), str(calls), str(reps), "-", str(pause_ms)])
    base = _loops(plain.stdout.decode())
    expected = 4 * calls * reps
    with _project(max(expected + 1_000, 200_000)) as project:
        go = project / "go"
        async with daemon() as client:
            args = [str(n), str(calls), str(reps), str(go), str(pause_ms)]
            sid, hook_s, traced = await _start(client, binary, args, project, hooks.pattern(n))
            if traced["hookedFunctions"] != n:
                raise AssertionError(f"{hooks.pattern(n)} hooked {traced['hookedFunctions']} of {n}: {traced}")
            go.touch()
            for k in range(1, 2 * reps):
                # debug_query answers once what the agent recorded before the call is stored: when loop k-1's line
                # is in, its events are too, and loop k may start.
                await client.wait_output(sid, _printed_loops(k), 600)
                Path(f"{go}.{k}").touch()
            loops = _loops("".join(await _finish(client, sid, "done", 600)))
            page = await client.call("debug_query", sessionId=sid, function={"contains": "hook_"}, limit=1)
    sampled, dropped = ingest._counts(page.get("warnings", []))
    return {
        "hooked": n,
        "pattern": hooks.pattern(n),
        "debug_trace_s": hook_s,
        "per_call_ns": {label: (loops[label][0] - base[label][0]) / calls for label in loops},
        "per_call_thread_cpu_ns": {label: (loops[label][1] - base[label][1]) / calls for label in loops},
        "untraced_ns": {label: base[label][0] / calls for label in base},
        "events": {"stored": page["totalCount"], "expected": expected, "dropped": dropped, "sampled": sampled},
    }


async def hooks_curve(daemon: Daemon, build: Path, counts: tuple[int, ...], calls: int, reps: int, pause_ms: int
                      ) -> dict[str, Any]:
    functions = max(counts)
    binary = await anyio.to_thread.run_sync(hooks.build, functions, build)
    points = {str(n): await _hooked_point(daemon, binary, n, calls, reps, pause_ms) for n in counts}
    return {"functions_in_binary": functions, "calls": calls, "reps": reps, "pause_ms": pause_ms, "points": points}


# ---- debug_query latency versus stored events ---------------------------------------------------------------------


def _cap(size: int) -> str | None:
    if size <= MAX_PER_SESSION:
        return None
    return (f"cap: a session holds at most events.maxPerSession events, and that setting's maximum is "
            f"{MAX_PER_SESSION:,} (src/strobe/settings.py); {size:,} not measured")


async def _held(client: Strobe, sid: str) -> dict[str, Any]:
    return await client.call("debug_query", sessionId=sid, function={"equals": "paced"}, limit=1)


async def _query_point(daemon: Daemon, binary: Path, size: int, rate: int, rounds: int) -> dict[str, Any]:
    """Fill a session until it holds `size` events (the target runs until told to stop, so events dropped while
    filling only make it take longer), then time the queries."""
    longest = QUERY_FILL_SLACK * size / (2 * rate) + 60
    with _project(size) as project:
        go, stop = project / "go", project / "stop"
        async with daemon() as client:
            sid, _, _ = await _start(client, binary, ["1", str(rate), f"{longest:.0f}", str(go), str(stop)], project,
                                     "paced")
            started = time.perf_counter()
            go.touch()
            while (await _held(client, sid))["totalCount"] < size and time.perf_counter() - started < longest:
                await anyio.sleep(QUERY_FILL_POLL_S)
            stop.touch()
            await _finish(client, sid, "done ", 120)
            fill_s = time.perf_counter() - started
            page = await _held(client, sid)
            sampled, dropped = ingest._counts(page.get("warnings", []))
            held = page["totalCount"]
            result: dict[str, Any] = {"session_events": held, "fill_s": fill_s, "dropped_while_filling": dropped}
            if held < size:
                result["short"] = (f"the session holds {held:,} of {size:,} events after {fill_s:.0f} s ({dropped:,} "
                                   f"dropped, {sampled:,} sampled while filling)")
            result["query_latency"] = await ingest._latencies(client, sid, rounds)
    return result


async def query_curve(daemon: Daemon, build: Path, sizes: tuple[int, ...], rate: int, rounds: int) -> dict[str, Any]:
    binary = build_c("threads", build, "-pthread")
    points: dict[str, Any] = {}
    for size in sizes:
        cap = _cap(size)
        points[str(size)] = {"cap": cap} if cap else await _query_point(daemon, binary, size, rate, rounds)
    return {"source": f"traced program: bench/targets/threads.c, one thread calling paced() at {rate:,} calls/s",
            "fill_rate_calls_per_s": rate, "rounds": rounds, "points": points}


# ---- sustained ingest versus traced threads -----------------------------------------------------------------------


async def _ingest_point(daemon: Daemon, binary: Path, threads: int, rate: int, seconds: float) -> dict[str, Any]:
    with _project(MAX_PER_SESSION) as project:
        go = project / "go"
        async with daemon() as client:
            sid, _, _ = await _start(client, binary, [str(threads), str(rate), str(seconds), str(go)], project,
                                     "paced")
            stop, peak = anyio.Event(), [0]
            async with anyio.create_task_group() as tg:
                tg.start_soon(ingest._peak_rss, client.daemon_pid(), stop, peak)
                started = time.perf_counter()
                go.touch()
                texts = await client.wait_output(sid, lambda t: any(x.startswith("done ") for x in t), seconds + 120)
                produced_at = time.perf_counter()
                await poll(lambda: ingest.ended(client, sid), 120, "the session to end")
                page = await client.call("debug_query", sessionId=sid, function={"equals": "paced"}, limit=1)
                stored_at = time.perf_counter()
                stop.set()
            last = await client.call("debug_query", sessionId=sid, threadName={"contains": f"pacer-{threads - 1}"},
                                     limit=1)
    calls = int(next(x for x in texts if x.startswith("done ")).split()[1])
    warnings = page.get("warnings", [])
    sampled, dropped = ingest._counts(warnings)
    stored = page["totalCount"] + ingest._trimmed(warnings)
    return {"threads": threads, "threads_seen": last["totalCount"] > 0, "offered_events_per_s": 2 * rate,
            **ingest.flow(calls, stored, sampled, dropped, started, produced_at, stored_at, peak[0])}


async def ingest_curve(daemon: Daemon, build: Path, counts: tuple[int, ...], rate: int, seconds: float
                       ) -> dict[str, Any]:
    binary = build_c("threads", build, "-pthread")
    points = {str(n): await _ingest_point(daemon, binary, n, rate, seconds) for n in counts}
    return {"rate_calls_per_s": rate, "seconds": seconds, "points": points}


async def run(build: Path, quick: bool) -> dict[str, Any]:
    if not quick:
        return {
            "hooks": await hooks_curve(strobe, build, HOOKED, HOOK_CALLS, HOOK_REPS, HOOK_PAUSE_MS),
            "query": await query_curve(strobe, build, QUERY_SIZES, QUERY_FILL_RATE, QUERY_ROUNDS),
            "ingest": await ingest_curve(strobe, build, THREADS, INGEST_RATE, INGEST_SECONDS),
        }
    async with strobe() as client:
        daemon = _shared(client)
        return {
            "hooks": await hooks_curve(daemon, build, HOOKED_QUICK, HOOK_CALLS_QUICK, HOOK_REPS_QUICK,
                                       HOOK_PAUSE_MS_QUICK),
            "query": await query_curve(daemon, build, QUERY_SIZES_QUICK, QUERY_FILL_RATE // 10, QUERY_ROUNDS_QUICK),
            "ingest": await ingest_curve(daemon, build, THREADS, INGEST_RATE_QUICK, INGEST_SECONDS_QUICK),
        }
