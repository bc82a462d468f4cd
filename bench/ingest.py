"""Sustained ingest: a target calls a function at a steady rate for a while; how many events per second
reach the queryable store, with stored / sampled / dropped counts, and the daemon's peak RSS meanwhile.
The same session, cut to 1M (and 200k) events by the FIFO limit, then serves the query-latency runs.

The sustained run offers SUSTAINED_HEADROOM times the rate asked for. Offered exactly the target rate, the
figure (events stored / time from the go signal until all are stored) can only approach it from below: the
target program's start, its last batch's trip and the end of the session take time even when the store never
lags. With more offered than the target, the figure is what the store took per second, up to its capacity."""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import psutil

from bench.harness import Strobe, build_c, median, percentile, poll, strobe

QUERIES: dict[str, dict[str, Any]] = {
    "no filter": {},
    "function contains": {"function": {"contains": "aced"}},
    "eventType": {"eventType": "function_exit"},
    "minDurationNs": {"minDurationNs": 50_000},
    "time range": {"timeFrom": "-1s"},
    "returnValue": {"returnValue": {"equals": 12345}},
}


async def ended(client: Strobe, sid: str) -> bool | None:
    sessions = (await client.call("debug_list_sessions"))["sessions"]
    return True if any(s["sessionId"] == sid and s["status"] != "running" for s in sessions) else None


def _trimmed(warnings: list[str]) -> int:
    return next((int(w.split()[0].replace(",", "")) for w in warnings if "oldest events were dropped" in w), 0)


def _counts(warnings: list[str]) -> tuple[int, int]:
    sampled = next((int(re.sub(r"\D", "", w.split(" calls")[0])) for w in warnings if "Partial data" in w), 0)
    dropped = next((int(w.split()[0].replace(",", "")) for w in warnings if "were lost" in w), 0)
    return sampled, dropped


def flow(calls: int, stored: int, sampled: int, dropped: int, started: float, produced_at: float, stored_at: float,
         peak_rss: int) -> dict[str, Any]:
    """What happened to the 2 * `calls` events a traced program produced: stored, sampled, dropped (counted) and
    unaccounted (silent loss), the rate stored, how long the store took to catch up, the daemon's peak RSS."""
    return {
        "produced_events": 2 * calls,
        "stored_events": stored,
        "sampled_events": sampled,
        "dropped_events": dropped,
        "unaccounted": 2 * calls - stored - sampled - dropped,
        "events_per_s": stored / (stored_at - started),
        "catch_up_s": stored_at - produced_at,
        "daemon_peak_rss_mb": peak_rss / 2**20,
    }


async def _peak_rss(pid: int, stop: anyio.Event, peak: list[int]) -> None:
    process = psutil.Process(pid)
    while not stop.is_set():
        try:
            peak[0] = max(peak[0], process.memory_info().rss)
        except psutil.Error:
            return
        await anyio.sleep(0.05)


async def _latencies(client: Strobe, sid: str, rounds: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    baseline = []
    for _ in range(rounds):
        elapsed, _page = await client.timed("debug_list_sessions")
        baseline.append(elapsed * 1000)
    out["(MCP round trip: debug_list_sessions)"] = {"p50_ms": median(baseline), "p95_ms": percentile(baseline, 0.95)}
    for name, filters in QUERIES.items():
        times = []
        for _ in range(rounds):
            elapsed, _page = await client.timed("debug_query", sessionId=sid, limit=50, **filters)
            times.append(elapsed * 1000)
        out[name] = {"p50_ms": median(times), "p95_ms": percentile(times, 0.95)}
    return out


async def _session(build: Path, rate: int, seconds: float, keep: int, rounds: int) -> dict[str, Any]:
    binary = build_c("rate", build)
    project = Path(tempfile.mkdtemp(prefix="sb-proj-"))
    (project / ".strobe").mkdir()
    (project / ".strobe" / "settings.json").write_text(
        f'{{"trace.hotCallsPerSecond": 100000000, "events.maxPerSession": {keep}}}'
    )
    go = project / "go"
    try:
        async with strobe() as client:
            launched = await client.call(
                "debug_launch", command=str(binary), args=[str(rate), str(seconds), str(go)], projectRoot=str(project)
            )
            sid = launched["sessionId"]
            await client.wait_output(sid, lambda t: "ready\n" in t, 30)
            await client.call("debug_trace", sessionId=sid, add=["paced"])
            stop, peak = anyio.Event(), [0]
            async with anyio.create_task_group() as tg:
                tg.start_soon(_peak_rss, client.daemon_pid(), stop, peak)
                started = time.perf_counter()
                go.touch()
                texts = await client.wait_output(sid, lambda t: any(x.startswith("done ") for x in t), seconds + 120)
                produced_at = time.perf_counter()
                # The target exits after "done": once the session reads as ended, every event is stored.
                await poll(lambda: ended(client, sid), 120, "the session to end")
                page = await client.call("debug_query", sessionId=sid, limit=1)
                stored_at = time.perf_counter()
                stop.set()
            calls = int(next(x for x in texts if x.startswith("done ")).split()[1])
            sampled, dropped = _counts(page.get("warnings", []))
            paced = await client.call("debug_query", sessionId=sid, function={"equals": "paced"}, limit=1)
            kept = paced["totalCount"]
            stdout_kept = (await client.call("debug_query", sessionId=sid, eventType="stdout", limit=1))["totalCount"]
            # Events the FIFO limit dropped later were stored first; the oldest ones include stdout lines
            # (the target prints two: "ready" and "done N").
            stored = kept + _trimmed(page.get("warnings", [])) - (2 - stdout_kept)
            result = flow(calls, stored, sampled, dropped, started, produced_at, stored_at, peak[0])
            result["session_events"] = kept
            result["query_latency"] = await _latencies(client, sid, rounds)
            return result
    finally:
        shutil.rmtree(project, ignore_errors=True)


SUSTAINED_HEADROOM = 1.2


async def run(build: Path, rate: int, seconds: float, sizes: tuple[int, ...], rounds: int) -> dict[str, Any]:
    """The first size's run is the sustained-ingest measurement (offered SUSTAINED_HEADROOM x `rate`); every size
    gives query latencies."""
    runs = {}
    for keep in sizes:
        sustained = keep == sizes[0]
        offered = round(rate * SUSTAINED_HEADROOM) if sustained else rate
        runs[keep] = await _session(build, offered, seconds if sustained else max(1.0, keep / rate / 2 + 0.5),
                                    keep, rounds)
        runs[keep]["offered_events_per_s"] = 2 * offered
    return {"rate_calls_per_s": rate, "seconds": seconds, "runs": {str(k): v for k, v in runs.items()}}
