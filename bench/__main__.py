"""`python -m bench` (or `make bench`): every performance figure of Strobe and its peers, from one run.

Prints a table against the targets of the performance issue and writes the figures as JSON to
bench/results/ so runs can be compared across commits. `--quick` runs a tiny workload (the test suite
uses it so the benchmark cannot rot); its figures mean nothing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio

from bench import curves, ingest, launch, node_bench, overhead, python_bench, report
from bench.harness import BENCH


async def collect(args: argparse.Namespace, build: Path) -> dict[str, Any]:
    quick = args.quick
    results: dict[str, Any] = {}
    sections = set(args.only.split(",")) if args.only else None

    def wanted(name: str) -> bool:
        return sections is None or name in sections

    if wanted("overhead"):
        print("· per-call overhead (untraced, Strobe, frida-trace, uftrace)…", file=sys.stderr)
        results["overhead"] = await overhead.run(build, 2_000 if quick else 100_000, 2 if quick else 5)
    if wanted("ingest"):
        print("· sustained ingest and query latency…", file=sys.stderr)
        sizes = (20_000,) if quick else (1_000_000, 200_000)
        results["ingest"] = await ingest.run(build, 20_000 if quick else 125_000, 1.0 if quick else 10.0, sizes,
                                             3 if quick else 25)
    if wanted("launch"):
        print("· debug_launch response time…", file=sys.stderr)
        results["launch"] = await launch.run(build, 2 if quick else 5)
    if wanted("symbols"):
        print("· function index and first hook on a large generated binary (compiled once, then cached)…",
              file=sys.stderr)
        from bench import first_hook, symbols_bench

        functions = 2_000 if quick else 400_000
        results["symbols"] = symbols_bench.run(build / "symbols", functions)
        results["symbols"].update(await first_hook.run(build, functions))
    if wanted("python"):
        print("· Python tracing: per-call cost (untraced, Strobe, sys.setprofile, viztracer) and sustained events/s…",
              file=sys.stderr)
        results["python"] = await python_bench.run(quick)
    if wanted("node"):
        print("· Node tracing: untraced loop under Strobe, per-call cost (Strobe, console.log wrapper) and events/s…",
              file=sys.stderr)
        results["node"] = await node_bench.run(quick)
    if wanted("curves"):
        print("· scaling curves: per traced call vs hooked functions, debug_query vs stored events, ingest vs "
              "traced threads…", file=sys.stderr)
        results["curves"] = await curves.run(build, quick)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny workload, for the test suite")
    parser.add_argument("--only", help="comma-separated sections: overhead,ingest,launch,symbols,python,node,curves")
    parser.add_argument("--build", type=Path, default=BENCH / ".build", help="where targets are built and kept")
    parser.add_argument("--out", type=Path, default=BENCH / "results", help="directory for the JSON results")
    args = parser.parse_args(argv)
    args.build.mkdir(parents=True, exist_ok=True)
    results = anyio.run(collect, args, args.build)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=BENCH, check=False).stdout.strip() or "unknown"
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    document = {"commit": commit, "when": stamp, "quick": args.quick, "results": results,
                "verdicts": report.verdicts(results)}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{stamp}-{commit}{'-quick' if args.quick else ''}.json"
    path.write_text(json.dumps(document, indent=2))
    print(report.table(results))
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
