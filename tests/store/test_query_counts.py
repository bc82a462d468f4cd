"""The count tables, indexes and planner never change an answer: checked against the events."""

from __future__ import annotations

import importlib.util
import random
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.mcp.wire_pages import query_wire
from tests.store.query_dataset import (
    FUNCTIONS,
    MS,
    STDOUT,
    TIMEOUT,
    Data,
    check,
)

from strobe.store import counts
from strobe.store import query as query_module
from strobe.store import sessions as store_sessions
from strobe.store.query import (
    UNSET,
    EventFilter,
    TextMatch,
    install_functions,
    parse_time,
)
from strobe.store.schema import EVENT_COLUMNS, TIME_BUCKET_SHIFT, EventKind, connect
from strobe.store.writer import Writer

# ---- count tables, indexes and the planner -------------------------------------------------------
#
# The planner answers totalCount from the count tables and finds pages through the indexes that fit the
# filter; none of that may change an answer. These tests compare it with the events themselves.

_INT64_MAX = (1 << 63) - 1


def _sqlite_value(sql: str, *params: Any) -> Any:
    mem = sqlite3.connect(":memory:")
    try:
        return mem.execute(sql, params).fetchone()[0]
    finally:
        mem.close()


def test_duration_classes_never_decrease() -> None:
    durations = sorted({-5, 0, 1, 15, 16, 17, 255, 256, 3_141_592, _INT64_MAX} | {16**k + d for k in range(1, 16)
                                                                                 for d in (-1, 0, 1)})
    classes = [counts.duration_class(d) for d in durations]
    assert classes == sorted(classes)
    assert counts._duration_classes(durations)[0].tolist() == classes  # the writer's vectorised classes


_STORED = [0, 1, -1, 15, 16, 31, -17, 2**40 + 5, _INT64_MAX, -(2**63), 16.0, 2.5, -1.0, "16", "0x10", "hello",
           '{"a":1}', b"x", None]


@pytest.mark.parametrize("stored", _STORED)
def test_return_classes_hold_every_equal_stored_value(stored: Any) -> None:
    """A stored return value is found by every return_equals filter SQLite says it equals."""
    posted = counts._return_classes([stored])[0].tolist()[0]
    mem = sqlite3.connect(":memory:")
    try:
        for value in [*(v for v in _STORED if not isinstance(v, bytes)), True, False, 2**64]:
            plan = query_module._compile(mem, 1, EventFilter(return_equals=value))
            if value is None:
                continue  # the NULL class, read whole
            alternatives = plan.returns or []
            if any(mem.execute("SELECT ? = ?", (stored, a)).fetchone()[0] for a in alternatives
                   if not (isinstance(a, int) and a >= 2**63)):
                assert posted in query_module._return_classes(plan), (stored, value)
    finally:
        mem.close()


def _writer_store(db: Path, batches: list[list[tuple[Any, ...]]], *, identified: bool) -> sqlite3.Connection:
    """Play the writer: insert batches of rows and count each as it goes in (ids first..)."""
    conn = connect(db)
    counts.prepare(conn)
    next_id = 1
    for batch in batches:
        conn.execute("BEGIN")
        rows = [(next_id + i, *row) for i, row in enumerate(batch)]
        next_id += len(rows)
        if identified:
            conn.executemany(f"INSERT INTO events (id, {', '.join(EVENT_COLUMNS)}) VALUES "
                             f"({', '.join('?' * (len(EVENT_COLUMNS) + 1))})", rows)
            counts.record(conn, rows[0][1], counts.IDENTIFIED_COLUMNS, rows)
        else:  # the ingest's narrow groups: only some columns, no "func" in one of them
            columns = ("id", "session", "ts", "kind", "pid")
            narrow = [row[:5] for row in rows]
            conn.executemany(f"INSERT INTO events ({', '.join(columns)}) VALUES (?, ?, ?, ?, ?)", narrow)
            counts.record(conn, rows[0][1], columns, narrow)
        conn.execute("COMMIT")
    return conn


def _assert_counts_exact(conn: sqlite3.Connection) -> None:
    kinds = conn.execute(
        "SELECT session, kind, coalesce(func, -1), count(*) FROM events GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
    ).fetchall()
    buckets = conn.execute(
        f"SELECT session, ts >> {TIME_BUCKET_SHIFT}, count(*) FROM events GROUP BY 1, 2 ORDER BY 1, 2"
    ).fetchall()
    assert conn.execute("SELECT session, kind, func, n FROM event_counts ORDER BY 1, 2, 3").fetchall() == kinds
    assert conn.execute("SELECT session, bucket, n FROM event_time_counts ORDER BY 1, 2").fetchall() == buckets
    for dim, where, column in ((counts.DIM_DURATION, "duration IS NOT NULL", "duration"),
                               (counts.DIM_RETURN, "kind = 2", "retval")):
        events = {r[0]: r[1:] for r in conn.execute(f"SELECT id, session, ts, {column} FROM events WHERE {where}")}
        posted: dict[int, tuple[Any, ...]] = {}
        for session, cls, first, last, n, ids, ts, vals in conn.execute(
            "SELECT session, cls, first_id, last_id, n, ids, ts, vals FROM event_postings WHERE dim = ?", (dim,)
        ):
            id_list = np.frombuffer(ids, np.int64).tolist()
            assert (first, last, n) == (id_list[0], id_list[-1], len(id_list)) and id_list == sorted(id_list)
            values = [None] * n if vals is None else np.frombuffer(vals, np.int64).tolist()
            for event_id, stamp, value in zip(id_list, np.frombuffer(ts, np.int64).tolist(), values, strict=True):
                stored = events[event_id][2]
                if dim == counts.DIM_DURATION:  # a value the writer did not see as an integer: compared in SQL
                    assert cls in (counts._duration_classes([stored])[0][0], counts.SQL_CLASS)
                else:
                    assert cls == counts._return_classes([stored])[0][0]
                assert value is None or value == stored
                posted[event_id] = (session, stamp, stored)
        assert posted == events


def _row(session: int, ts: Any, kind: int, func: int | None) -> tuple[Any, ...]:
    values: dict[str, Any] = dict.fromkeys(EVENT_COLUMNS)
    values.update(session=session, ts=ts, kind=kind, pid=1, func=func)
    return tuple(values[c] for c in EVENT_COLUMNS)


@pytest.mark.parametrize("identified", [True, False])
def test_count_tables_follow_inserts_trims_and_deletes(tmp_path: Path, identified: bool) -> None:
    rng = random.Random(7)
    batches = []
    for b in range(12):
        session = 1 + b % 3
        kind = rng.choice([1, 2, 3]) if b % 2 else None  # odd batches hold one kind, like the ingest's groups
        batches.append([
            _row(session, rng.randrange(-(1 << 27), 1 << 29), kind or rng.choice([1, 2, 3, 5]),
                 rng.choice([None, 1, 2, 3]))
            for _ in range(rng.randrange(1, 300))
        ])
    batches.append([_row(1, 5 << TIME_BUCKET_SHIFT, 1, 1)] * 3)  # bucket boundaries
    batches.append([_row(1, ts, 2, 2) for ts in ("123", 7.0, (3 << TIME_BUCKET_SHIFT) - 1)])  # not all ints
    conn = _writer_store(tmp_path / "s.db", batches, identified=identified)
    try:
        _assert_counts_exact(conn)
        conn.execute("BEGIN")
        for lo, hi in [(1, 40), (41, 41), (300, 900), (5000, 6000)]:  # trims, one past the last id
            counts.forget_range(conn, lo, hi)
            conn.execute("DELETE FROM events WHERE id BETWEEN ? AND ?", (lo, hi))
        conn.execute("COMMIT")
        _assert_counts_exact(conn)
        assert conn.execute("SELECT count(*) FROM event_counts WHERE n <= 0").fetchone()[0] == 0
        conn.execute("DELETE FROM events WHERE session = 2")
        counts.forget_session(conn, 2)
        _assert_counts_exact(conn)
    finally:
        conn.close()


def test_prepare_rebuilds_counts_it_cannot_trust(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    conn = connect(db)
    try:
        conn.executemany(f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) VALUES ({', '.join('?' * 13)})",
                         [_row(1, ts, 1 + ts % 2, ts % 3 or None) for ts in range(0, 1 << 28, 1 << 20)])
        assert not counts.maintained(conn)  # events written by a writer that kept no counts
        counts.prepare(conn)
        assert counts.maintained(conn)
        _assert_counts_exact(conn)
        conn.execute("INSERT INTO sessions (key, id, binary_path, project_root, pid, started_at, status) "
                     "VALUES (1, 's', '/b', '/p', 1, 0, 'exited')")
        conn.execute("INSERT INTO event_counts VALUES (99, 1, 1, 5)")  # a deleted session's leftovers
        counts.prepare(conn)
        assert conn.execute("SELECT count(*) FROM event_counts WHERE session = 99").fetchone()[0] == 0
    finally:
        conn.close()


# A store with ties in time, several time buckets, negative timestamps, rare kinds, missing functions,
# and return values of every type; queried with random filters and compared with a plain Python answer.

_NAMES = {1: "parse_config", 2: "parse_args", 3: "main", 4: "config_reload", 5: "libc_helper"}
_THREADS = {(100, 1): "main", (100, 2): "worker-1", (200, 7): "worker-2"}


def _random_events(rng: random.Random, session: int, n: int) -> list[tuple[Any, ...]]:
    rows = []
    ts = -(1 << 26)
    for _ in range(n):
        ts += rng.choice([0, 0, 1, 1000, 3_000_000, 40_000_000])  # ties, and ~2-3 events a time bucket
        kind = rng.choices([1, 2, 3, 4, 5], [40, 40, 10, 5, 1])[0]
        pid, tid = rng.choice(list(_THREADS))
        values: dict[str, Any] = dict.fromkeys(EVENT_COLUMNS)
        values.update(session=session, ts=ts, kind=kind, pid=pid, tid=tid)
        if kind in (1, 2):
            values["func"] = rng.choice([1, 2, 3, 4, 5, None])
        if kind == 2:
            values["duration"] = rng.choice([0, 5, 99, 100, 12_345, 10**7, rng.randrange(10**9), 2.5, 7.0])
            values["retval"] = rng.choice([0, 0, 1, -1, 16, 64, 2**40, 2.5, 16.0, "0x10", "hello", None])
        if kind in (3, 4):
            values["text"] = "line\n"
        rows.append(tuple(values[c] for c in EVENT_COLUMNS))
    return rows


def _matches(row: dict[str, Any], flt: EventFilter, latest: int) -> bool:
    if flt.kind is not None and row["kind"] != int(flt.kind):
        return False
    if flt.function is not None and (row["func"] is None or str(flt.function.contains) not in _NAMES[row["func"]]):
        return False
    if flt.min_duration_ns is not None and (row["duration"] is None or row["duration"] < flt.min_duration_ns):
        return False
    if flt.time_from is not None and row["ts"] < flt.time_from.resolve(latest):
        return False
    if flt.time_to is not None and row["ts"] > flt.time_to.resolve(latest):
        return False
    if flt.pid is not None and row["pid"] != flt.pid:
        return False
    if flt.thread_name_contains is not None and flt.thread_name_contains not in _THREADS[(row["pid"], row["tid"])]:
        return False
    if flt.return_is_null is not None and (row["kind"] != 2 or (row["retval"] is None) != flt.return_is_null):
        return False
    if flt.return_equals is not UNSET:
        wanted = {16, "0x10"} if flt.return_equals == "0x10" else {flt.return_equals}
        if row["kind"] != 2 or not any(
            row["retval"] == w and isinstance(row["retval"], str) == isinstance(w, str) for w in wanted
        ):
            return False
    return True


def _random_filter(rng: random.Random) -> EventFilter:
    fields: dict[str, Any] = {}
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        field_name = rng.choice(["kind", "function", "min_duration_ns", "time_from", "time_to", "pid",
                                 "thread_name_contains", "return_equals", "return_is_null"])
        if field_name == "kind":
            fields["kind"] = rng.choice(list(EventKind))
        elif field_name == "function":
            fields["function"] = TextMatch(contains=rng.choice(["parse", "config", "main", "nothing"]))
        elif field_name == "min_duration_ns":
            fields["min_duration_ns"] = rng.choice([0, 1, 99, 100, 101, 12_345, 10**7, 10**9, 10**20])
        elif field_name in ("time_from", "time_to"):
            times: list[int | str] = [-1, -(1 << 26), 0, 1 << 26, 2**26 + 1, 5 * 10**8, "-100ms", "-1s", "1s", "-1h",
                                      "10000h", "-10000000h"]
            fields[field_name] = parse_time(rng.choice(times))
        elif field_name == "pid":
            fields["pid"] = rng.choice([100, 200, 300])
        elif field_name == "thread_name_contains":
            fields["thread_name_contains"] = rng.choice(["worker", "main", "-2"])
        elif field_name == "return_equals":
            fields["return_equals"] = rng.choice([0, 1, -1, 16, 64, 2.5, 2**40, "0x10", "hello", True])
        else:
            fields["return_is_null"] = rng.choice([True, False])
    return EventFilter(**fields)


_PARTS = {  # the ingest's narrow column groups
    1: ("id", "session", "ts", "kind", "pid", "tid", "func", "parent", "sampled", "args"),
    2: ("id", "session", "ts", "kind", "pid", "tid", "func", "parent", "duration", "retval", "sampled"),
}


@pytest.fixture(scope="module", params=["rebuilt", "recorded"])
def random_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[dict[str, Any]]]:
    """The summaries either rebuilt from the events at start-up, or recorded batch by batch the way the
    writer does (full rows, and the ingest's narrow groups of one kind)."""
    db = tmp_path_factory.mktemp("random") / "strobe.db"
    rng = random.Random(2024)
    writer = Writer(db)
    writer.start()
    try:
        def setup(conn: sqlite3.Connection) -> None:
            for n in (1, 2):
                store_sessions.insert_session(conn, f"s{n}", "/b", "/p", 100, 0)
            conn.executemany("INSERT INTO functions (key, name, raw, file, line) VALUES (?, ?, ?, ?, ?)", FUNCTIONS)
            conn.executemany("INSERT INTO threads (session, pid, tid, name) VALUES (?, ?, ?, ?)",
                             [(s, pid, tid, name) for s in (1, 2) for (pid, tid), name in _THREADS.items()])

        writer.call(setup).result(timeout=TIMEOUT)
    finally:
        writer.close()
    rows = _random_events(rng, 1, 3000)
    conn = connect(db)
    try:
        if request.param == "recorded":
            counts.prepare(conn)
        else:  # a store whose events were written before the summaries were kept (the writer marked it)
            conn.execute("DELETE FROM meta WHERE key = 'event_counts'")
        next_id = 1
        for start in range(0, len(rows), 700):
            for batch in (rows[start:start + 700], _random_events(rng, 2, 50)):
                identified = [(next_id + i, *row) for i, row in enumerate(batch)]
                next_id += len(batch)
                conn.execute("BEGIN")
                groups: list[tuple[tuple[str, ...], list[tuple[Any, ...]]]] = [(counts.IDENTIFIED_COLUMNS, identified)]
                if start % 1400:  # every other batch as the ingest writes it
                    full = counts.IDENTIFIED_COLUMNS
                    groups = [(_PARTS.get(k, full), [tuple(r[full.index(c)] for c in _PARTS.get(k, full))
                                                     for r in identified if r[3] == k]) for k in (1, 2, 3, 4, 5)]
                for columns, group in groups:
                    if group:
                        conn.executemany(f"INSERT INTO events ({', '.join(columns)}) VALUES "
                                         f"({', '.join('?' * len(columns))})", group)
                        if request.param == "recorded":
                            counts.record(conn, group[0][1], columns, group)
                conn.execute("COMMIT")
        if request.param == "rebuilt":
            counts.prepare(conn)
        _assert_counts_exact(conn)
        stored = conn.execute(f"SELECT id, {', '.join(EVENT_COLUMNS)} FROM events WHERE session = 1").fetchall()
    finally:
        conn.close()
    return db, [dict(zip(("id", *EVENT_COLUMNS), r, strict=True)) for r in stored]


@pytest.mark.parametrize("path", ["summaries", "scans"])
def test_random_filters_agree_with_the_events(
    random_store: tuple[Path, list[dict[str, Any]]], monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    db, rows = random_store
    if path == "scans":
        monkeypatch.setattr(counts, "maintained", lambda conn: False)
    latest = max(r["ts"] for r in rows)
    ordered = sorted(rows, key=lambda r: (r["ts"], r["id"]))
    rng = random.Random(path)
    conn = connect(db, readonly=True)
    install_functions(conn)
    try:
        for _ in range(300):
            flt = _random_filter(rng)
            expected = [f"s1-{r['id']}" for r in ordered if _matches(r, flt, latest)]
            limit = rng.choice([1, 7, 50, 500])
            offset = rng.choice([0, 0, 3, 40, len(expected) - 1, len(expected) + 5])
            offset = max(offset, 0)
            page = query_wire(conn, 1, "s1", flt, limit=limit, offset=offset, verbose=False)
            assert page.total_count == len(expected), flt
            assert [e["id"] for e in page.events] == expected[offset:offset + limit], flt
            assert page.has_more is (offset + len(page.events) < len(expected))
    finally:
        conn.close()


def test_query_inside_a_read_transaction_leaves_it_open(conn: sqlite3.Connection, data: Data) -> None:
    conn.execute("BEGIN")
    try:
        check(conn, data, EventFilter(kind=STDOUT), ["e2"])
        assert conn.in_transaction
    finally:
        conn.execute("COMMIT")


def test_time_beyond_the_clock_matches_nothing(conn: sqlite3.Connection, data: Data) -> None:
    check(conn, data, EventFilter(time_from=parse_time("100000000h")), [])
    check(conn, data, EventFilter(time_to=parse_time("-100000000h")), [])
    check(conn, data, EventFilter(time_from=parse_time("3s"), time_to=parse_time("2s")), [])


def test_query_bench_runs_tiny(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("query_bench", Path(__file__).parents[2] / "bench" / "query_bench.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = bench.run(tmp_path, 20_000)
    assert results["insert"]["events_per_s"] > 0
    for name in ("no filter", "function contains", "eventType", "minDurationNs", "time range", "returnValue"):
        assert results[name]["p50_ms"] > 0 and results[name]["p95_ms"] >= results[name]["p50_ms"]
    assert results["no filter"]["total"] == 20_000


def test_count_tables_take_each_rows_session(tmp_path: Path) -> None:
    conn = connect(tmp_path / "s.db")
    try:
        counts.prepare(conn)
        rows = [(i + 1, *_row(1 + i % 2, i << 20, 1, 3)) for i in range(10)]
        conn.executemany(f"INSERT INTO events (id, {', '.join(EVENT_COLUMNS)}) VALUES "
                         f"({', '.join('?' * (len(EVENT_COLUMNS) + 1))})", rows)
        counts.record(conn, 1, counts.IDENTIFIED_COLUMNS, rows)  # told session 1, but half are session 2
        _assert_counts_exact(conn)
    finally:
        conn.close()


def test_a_store_from_before_the_summaries_is_still_answered(tmp_path: Path, data: Data) -> None:
    """A reader can meet a store no current writer has opened yet: no summaries, no new index."""
    db = tmp_path / "old.db"
    source = sqlite3.connect(data.db)
    target = sqlite3.connect(db)
    try:
        source.backup(target)
        for statement in ("DROP INDEX events_by_kind", "DROP TABLE event_counts", "DROP TABLE event_time_counts",
                          "DROP TABLE event_postings", "DELETE FROM meta WHERE key = 'event_counts'"):
            target.execute(statement)
        target.commit()
    finally:
        source.close()
        target.close()
    conn = connect(db, readonly=True)
    install_functions(conn)
    try:
        old = Data(db, data.main_key, data.main_id, data.other_key, data.other_id, data.ids)
        check(conn, old, EventFilter(kind=STDOUT), ["e2"])
        check(conn, old, EventFilter(min_duration_ns=500 * MS), ["e4", "e6", "e8", "e9"])
        check(conn, old, EventFilter(return_equals="0x10"), ["e6", "e7"])
    finally:
        conn.close()
