"""The benchmark's verdicts against the performance targets, and the table it prints."""

from __future__ import annotations

from typing import Any

TARGET_CALL_NS = 700
TARGET_VS_FRIDA_TRACE = 20
TARGET_EVENTS_PER_S = 250_000
TARGET_QUERY_P50_MS = 10
TARGET_LAUNCH_S = 1.0
TARGET_FIRST_HOOK_COLD_S = 5.0
TARGET_FIRST_HOOK_CACHED_S = 0.3
TARGET_RSS_MB = 300


def _verdict(name: str, value: float | None, target: float, better: str, unit: str) -> dict[str, Any]:
    if value is None:
        return {"metric": name, "value": None, "target": target, "ok": False, "note": "not measured"}
    ok = value <= target if better == "lower" else value >= target
    if ok:
        note = "met"
    elif better == "lower":
        note = f"missed by {value - target:,.4g} {unit} ({value / target:.2f}x the target)"
    else:
        note = f"missed by {target - value:,.4g} {unit} ({value / target:.0%} of the target)"
    return {"metric": name, "value": value, "target": target, "ok": ok, "note": note, "unit": unit}


def verdicts(results: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    peers = results.get("overhead", {}).get("per_call_ns", {})
    if peers:
        strobe = peers.get("strobe")
        out.append(_verdict("traced-call overhead, Strobe", strobe, TARGET_CALL_NS, "lower", "ns"))
        frida = peers.get("frida-trace")
        if isinstance(frida, float) and isinstance(strobe, float) and strobe > 0:
            out.append(_verdict("frida-trace / Strobe per call", frida / strobe, TARGET_VS_FRIDA_TRACE, "higher", "x"))
    runs = results.get("ingest", {}).get("runs", {})
    if runs:
        first = next(iter(runs.values()))
        out.append(_verdict("sustained events/s into the store", first["events_per_s"], TARGET_EVENTS_PER_S,
                            "higher", "events/s"))
        out.append(_verdict("events unaccounted for (silent loss)", first["unaccounted"], 0, "lower", "events"))
        out.append(_verdict("daemon peak RSS while ingesting", first["daemon_peak_rss_mb"], TARGET_RSS_MB, "lower",
                            "MB"))
        for size, run in runs.items():
            for query, timing in run["query_latency"].items():
                if query.startswith("("):
                    continue
                out.append(_verdict(f"debug_query p50 at {int(size):,} events: {query}", timing["p50_ms"],
                                    TARGET_QUERY_P50_MS, "lower", "ms"))
    launch = results.get("launch")
    if launch:
        out.append(_verdict("debug_launch response (warm)", launch["warm_median_s"], TARGET_LAUNCH_S, "lower", "s"))
    symbols = results.get("symbols")
    if symbols:
        out.append(_verdict("first hook, large binary, cold", symbols.get("first_hook_cold_s"),
                            TARGET_FIRST_HOOK_COLD_S, "lower", "s"))
        out.append(_verdict("first hook, large binary, cached", symbols.get("first_hook_cached_s"),
                            TARGET_FIRST_HOOK_CACHED_S, "lower", "s"))
    return out


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def table(results: dict[str, Any]) -> str:
    lines: list[str] = []
    peers = results.get("overhead", {}).get("per_call_ns", {})
    if peers:
        lines.append("Per traced call (enter + exit), ns — same binary, same run:")
        for name, value in peers.items():
            lines.append(f"  {name:<12} {_fmt(value)}")
        captured = results["overhead"]["strobe_capture"]
        lines.append(f"  Strobe captured {captured['events']:,} of {captured['expected']:,} events")
    runs = results.get("ingest", {}).get("runs", {})
    for size, run in runs.items():
        lines.append(f"Session kept at {int(size):,} events: stored {run['stored_events']:,}, sampled "
                     f"{run['sampled_events']:,}, dropped {run['dropped_events']:,}, unaccounted "
                     f"{run['unaccounted']:,} of {run['produced_events']:,} produced; "
                     f"{_fmt(run['events_per_s'])} events/s; peak RSS {_fmt(run['daemon_peak_rss_mb'])} MB")
        lines.append("  debug_query  " + "  ".join(
            f"{q}: p50 {_fmt(t['p50_ms'])} / p95 {_fmt(t['p95_ms'])} ms" for q, t in run["query_latency"].items()))
    launch = results.get("launch")
    if launch:
        lines.append(f"debug_launch: {_fmt(launch['warm_median_s'] * 1000)} ms warm (max "
                     f"{_fmt(launch['warm_max_s'] * 1000)}), {_fmt(launch['cold_cache_s'] * 1000)} ms with a cold "
                     "agent cache")
    symbols = results.get("symbols")
    if symbols:
        lines.append("Function index: " + ", ".join(f"{k} {_fmt(v)}" for k, v in symbols.items()))
    lines.append("")
    lines.append(f"{'target':<58} {'value':>14} {'target':>10}  verdict")
    for v in verdicts(results):
        lines.append(f"{v['metric']:<58} {_fmt(v['value']):>14} {_fmt(v['target']):>10}  {v['note']}")
    return "\n".join(lines)
