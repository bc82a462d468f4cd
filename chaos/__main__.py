"""`python -m chaos` (or `make chaos`): the reliability probes of docs/reliability.md, in full.

Prints the table (probe, procedure, figure) and writes it to chaos/results/latest.md; exits 1 if a probe's checks
did not hold. `--short` runs each probe once in a small form (the test suite does, so the probes cannot rot).
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio

from chaos import probes

RESULTS = Path(__file__).resolve().parent / "results"


async def run_all(short: bool) -> list[probes.Result]:
    build = Path(tempfile.mkdtemp(prefix="strobe-chaos-"))
    steps = [
        ("kill -9 at full ingest", lambda: probes.kill9_at_full_ingest(build, 1 if short else 5)),
        ("proxy killed mid-call", lambda: probes.proxy_killed_mid_call(build, 1 if short else 5)),
        ("full disk", lambda: probes.full_disk(build)),
        ("output flood", lambda: probes.output_flood(build, 200_000 if short else 4_000_000)),
        ("concurrent clients", lambda: probes.concurrent_clients(build, 8 if short else 50)),
        ("fuzz", lambda: probes.fuzz(10 if short else 400)),
    ]
    results = []
    for name, step in steps:
        print(f"· {name}…", file=sys.stderr, flush=True)
        result = await step()
        print(f"  {'ok' if result.ok else 'FAILED'}: {result.figure}", file=sys.stderr, flush=True)
        results.append(result)
    return results


def table(results: list[probes.Result]) -> str:
    rows = ["| probe | procedure | figure | holds |", "|---|---|---|---|"]
    rows += [f"| {r.probe} | {r.procedure} | {r.figure} | {'yes' if r.ok else '**no**'} |" for r in results]
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    parser.add_argument("--short", action="store_true", help="each probe once, small (for the test suite)")
    args = parser.parse_args(argv)
    results = anyio.run(run_all, args.short)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip()
    text = (f"`make chaos` at {commit or 'an unknown commit'}, {datetime.date.today()}"
            f"{' (short form)' if args.short else ''}:\n\n{table(results)}\n")
    print(text)
    if not args.short:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "latest.md").write_text(text)
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
