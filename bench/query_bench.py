"""debug_query latency and store ingest throughput on a realistic store.

Builds a store through the real `Writer` (one big session of `events` events plus two smaller ones):
half function_enter / half function_exit over ~50 functions with skewed (Zipf) frequencies, 8 threads,
timestamps ~4 µs apart, log-normal durations and small integer return values on exits, a 16-byte
argument blob on enters, and a few thousand stdout lines (parent ids are plausible, not exact). Then
times `query_events` (the code behind `debug_query`) for each filter on a read-only connection: the
largest page (500 events, offset 0, summary form), repeated, after one warm-up call. Every answer is
checked against the generated rows (totalCount and the page's timestamps).

    python bench/query_bench.py [EVENTS ...]        # default: 200000 1000000

`run(work_dir, events)` returns {name: {metric: value}}: for each filter (the issue's six targets first:
"no filter", "function contains", "eventType", "minDurationNs", "time range", "returnValue", then a few
more) `p50_ms`, `p95_ms` and `total` (its totalCount); under "insert", `events_per_s`: how fast the
whole store was written, all batches queued at once (`submit_rows`, 5,000 rows each), to the commit
of the last.
"""

from __future__ import annotations

import gc
import math
import random
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from strobe.store import sessions as store_sessions
from strobe.store.query import EventFilter, TextMatch, install_functions, parse_time, query_events
from strobe.store.schema import EventKind, connect
from strobe.store.writer import Writer

TIMEOUT_S = 600.0
BATCH = 5_000  # rows per submit_rows call, about one trace batch of a busy target
PAGE = 500  # the largest page debug_query serves
PID = 4242
THREADS = 8
SPACING_NS = 4_000
SELECTIVE_RETVAL = -1  # returned by ~0.5% of exits

_PREFIXES = ("work", "parse", "alloc", "io", "hash")
FUNCTION_NAMES = [f"{p}_{i}" for p in _PREFIXES for i in range(10)] + ["work_3_fast", "work_3_slow"]

Row = tuple[Any, ...]


def _functions() -> list[tuple[int, str, str, str, int, int]]:
    return [
        (key, name, f"_Z{len(name)}{name}v", f"/proj/src/{name.split('_')[0]}.c", 10 + 7 * key, 2)
        for key, name in enumerate(FUNCTION_NAMES, start=1)
    ]


def _weights(rng: random.Random) -> list[float]:
    """Zipf-ish call frequencies, the ranks shuffled so no name pattern lines up with popularity."""
    ranks = list(range(1, len(FUNCTION_NAMES) + 1))
    rng.shuffle(ranks)
    return [1.0 / r**1.1 for r in ranks]


def make_rows(session: int, n: int, seed: int, *, first_id: int = 1) -> list[Row]:
    """`n` events of one session in timestamp order (see the module docstring)."""
    rng = random.Random(seed)
    weights = _weights(rng)
    keys = list(range(1, len(FUNCTION_NAMES) + 1))
    func_pool = rng.choices(keys, weights, k=max(64, n // 2 + 64))
    thread_weights = [8.0, 4.0, 2.0, 1.0, 1.0, 1.0, 0.5, 0.5]
    tids = [PID + t for t in range(THREADS)]
    thread_pool = rng.choices(tids, thread_weights, k=n)
    stacks: dict[int, list[tuple[int, int]]] = {t: [] for t in tids}  # tid -> [(func, enter id)]
    enter, exit_, stdout = int(EventKind.FUNCTION_ENTER), int(EventKind.FUNCTION_EXIT), int(EventKind.STDOUT)
    pack = struct.Struct("<qq").pack
    rows: list[Row] = []
    append = rows.append
    ts = 1_000_000
    calls = 0
    out_lines = 0
    for i in range(n):
        ts += rng.randint(SPACING_NS // 2, SPACING_NS * 3 // 2)
        tid = thread_pool[i]
        r = rng.random()
        if r < 0.003:  # ~3,000 stdout lines per million events
            out_lines += 1
            append((session, ts, stdout, PID, None, None, None, None, None, None,
                    f"[{out_lines}] progress: {i} of {n} items processed\n", None, None))
            continue
        stack = stacks[tid]
        if stack and (len(stack) >= 12 or r < 0.5):
            func, parent_id = stack.pop()
            duration = int(rng.lognormvariate(8.0, 1.5))  # median ~3 µs, long tail
            u = rng.random()
            retval = SELECTIVE_RETVAL if u < 0.005 else (0 if u < 0.6 else rng.randint(1, 64))
            append((session, ts, exit_, PID, tid, func, parent_id, duration, retval, None, None, None, None))
        else:
            func = func_pool[calls % len(func_pool)]
            calls += 1
            parent = stack[-1][1] if stack else None
            stack.append((func, first_id + i))
            append((session, ts, enter, PID, tid, func, parent, None, None, None, None,
                    pack(rng.getrandbits(40), rng.getrandbits(20)), None))
    return rows


def _threads(session: int) -> list[tuple[int, int, int, str]]:
    return [(session, PID, PID + t, "main" if t == 0 else f"worker-{t}") for t in range(THREADS)]


def build(db: Path, events: int) -> tuple[dict[str, Any], float]:
    """Fill a fresh store; returns the main session's (key, id) and the ingest rate in events/s."""
    writer = Writer(db)
    writer.start()
    try:
        def setup(conn: Any) -> list[store_sessions.SessionRecord]:
            conn.executemany(
                "INSERT INTO functions (key, name, raw, file, line, params) VALUES (?, ?, ?, ?, ?, ?)", _functions()
            )
            records = [store_sessions.insert_session(conn, f"bench-{i}", "/proj/bench", "/proj", PID, 1_000 + i)
                       for i in range(3)]
            for record in records:
                conn.executemany("INSERT INTO threads (session, pid, tid, name) VALUES (?, ?, ?, ?)",
                                 _threads(record.key))
            return records

        records = writer.call(setup).result(timeout=TIMEOUT_S)
        sizes = [events, max(1_000, events // 20), max(1_000, events // 50)]
        streams: list[list[Row]] = []
        for record, size, seed in zip(records, sizes, (1, 2, 3), strict=True):
            writer.set_limit(record.key, size + 1)
            streams.append(make_rows(record.key, size, seed))
        # Interleave the sessions' batches the way concurrent targets would arrive.
        batches: list[list[Row]] = []
        positions = [0, 0, 0]
        while any(p < len(s) for p, s in zip(positions, streams, strict=True)):
            for k, stream in enumerate(streams):
                step = BATCH if k == 0 else BATCH // 10
                if positions[k] < len(stream):
                    batches.append(stream[positions[k]:positions[k] + step])
                    positions[k] += step
        total = sum(sizes)
        # The prepared rows are not the daemon's: keep the cyclic GC from walking them while timing.
        gc.collect()
        gc.freeze()
        try:
            start = time.perf_counter()
            for batch in batches:
                writer.submit_rows(batch)
            writer.call(lambda conn: None).result(timeout=TIMEOUT_S)
            elapsed = time.perf_counter() - start
        finally:
            gc.unfreeze()
    finally:
        writer.close(timeout=TIMEOUT_S)
    main = records[0]
    return {"key": main.key, "id": main.id, "rows": streams[0]}, total / elapsed


def _filters(rows: list[Row]) -> dict[str, EventFilter]:
    durations = sorted(r[7] for r in rows if r[7] is not None)
    slowest_1pct = durations[int(len(durations) * 0.99)]
    work_3 = TextMatch(contains="work_3")
    return {
        # The targets.
        "no filter": EventFilter(),
        "function contains": EventFilter(function=work_3),
        "eventType": EventFilter(kind=EventKind.FUNCTION_EXIT),
        "minDurationNs": EventFilter(min_duration_ns=slowest_1pct),
        "time range": EventFilter(time_from=parse_time("-1s")),
        "returnValue": EventFilter(return_equals=SELECTIVE_RETVAL),
        # Tracked so they do not regress unnoticed.
        "time range -100ms": EventFilter(time_from=parse_time("-100ms")),
        "eventType stdout": EventFilter(kind=EventKind.STDOUT),
        "threadName": EventFilter(thread_name_contains="worker-5"),
        "exit + function + minDurationNs": EventFilter(kind=EventKind.FUNCTION_EXIT, function=work_3,
                                                       min_duration_ns=slowest_1pct),
        "function + time range": EventFilter(function=work_3, time_from=parse_time("-1s")),
    }


def _expected(rows: list[Row], flt: EventFilter) -> list[int]:
    """The matching events' timestamps in order, recomputed in Python to check the store's answer."""
    names = dict(enumerate(FUNCTION_NAMES, start=1))
    latest = max(r[1] for r in rows)
    tnames = {PID + t: ("main" if t == 0 else f"worker-{t}") for t in range(THREADS)}

    def keep(r: Row) -> bool:
        if flt.kind is not None and r[2] != int(flt.kind):
            return False
        if flt.function is not None and flt.function.contains is not None and (
            r[5] is None or flt.function.contains not in names[r[5]]
        ):
            return False
        if flt.min_duration_ns is not None and (r[7] is None or r[7] < flt.min_duration_ns):
            return False
        if flt.time_from is not None and r[1] < flt.time_from.resolve(latest):
            return False
        if flt.thread_name_contains is not None and flt.thread_name_contains not in tnames.get(r[4], ""):
            return False
        return not (isinstance(flt.return_equals, int) and (r[2] != int(EventKind.FUNCTION_EXIT)
                                                            or r[8] != flt.return_equals))

    return sorted(r[1] for r in rows if keep(r))


def _timed(fn: Callable[[], Any], repeat: int) -> list[float]:
    fn()  # warm the cache and the statement cache
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def run(work_dir: Path, events: int) -> dict[str, dict[str, float]]:
    """Build a store of `events` events in `work_dir` and time every filter; see the module docstring."""
    db = work_dir / f"query-bench-{events}.db"
    _remove(db)
    main, rate = build(db, events)
    results: dict[str, dict[str, float]] = {"insert": {"events_per_s": rate, "events": float(events)}}
    repeat = 30 if events >= 100_000 else 5
    conn = connect(db, readonly=True)
    install_functions(conn)
    try:
        for name, flt in _filters(main["rows"]).items():
            page = query_events(conn, main["key"], flt, limit=PAGE, offset=0)
            expected = _expected(main["rows"], flt)
            if page.total_count != len(expected):
                raise AssertionError(f"{name}: totalCount {page.total_count}, expected {len(expected)}")
            if [e.ts for e in page.events] != expected[:PAGE]:
                raise AssertionError(f"{name}: the first page is not the first {PAGE} matching events")

            def once(flt: EventFilter = flt) -> None:
                query_events(conn, main["key"], flt, limit=PAGE, offset=0)

            samples = _timed(once, repeat)
            results[name] = {
                "p50_ms": statistics.median(samples),
                "p95_ms": sorted(samples)[max(0, math.ceil(len(samples) * 0.95) - 1)],
                "total": float(page.total_count),
            }
    finally:
        conn.close()
    _remove(db)
    return results


def _remove(db: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)


def main(argv: list[str]) -> None:
    sizes = [int(a) for a in argv] or [200_000, 1_000_000]
    with tempfile.TemporaryDirectory(prefix="strobe-query-bench-") as tmp:
        for events in sizes:
            results = run(Path(tmp), events)
            print(f"== {events:,} events: ingest {results['insert']['events_per_s']:,.0f} events/s")
            for name, metrics in results.items():
                if name != "insert":
                    print(f"  {name:20s} p50 {metrics['p50_ms']:8.2f} ms  p95 {metrics['p95_ms']:8.2f} ms  "
                          f"total {int(metrics['total']):>9,}")


if __name__ == "__main__":
    main(sys.argv[1:])
