"""Summaries of trace blocks computed column-wise (counts.summarise) and trimmed from the writer's memory
(forget_range with known blocks): always exactly what the row-wise path and a rebuild from the events give."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.store.summaries import rebuilt, summaries

from strobe.store import counts
from strobe.store import sessions as store_sessions
from strobe.store.batches import ColumnGroup, EventBlock
from strobe.store.schema import TIME_BUCKET_SHIFT, EventKind, connect
from strobe.store.writer import Writer

TIMEOUT = 10
ENTER, EXIT = int(EventKind.FUNCTION_ENTER), int(EventKind.FUNCTION_EXIT)


def events(rng: np.random.Generator, n: int, first_id: int, spread_ns: int, funcs: list[int]) -> dict[str, np.ndarray]:
    kinds = rng.choice([ENTER, EXIT], n)
    return {
        "id": np.arange(first_id, first_id + n, dtype=np.int64),
        "ts": rng.integers(0, spread_ns, n).astype(np.int64),
        "kind": kinds.astype(np.int64),
        "func": rng.choice(funcs, n).astype(np.int64),
        "duration": rng.integers(-5, 1 << 40, n) >> rng.integers(0, 40, n),
        "retval": rng.integers(-(1 << 62), 1 << 62, n) >> rng.integers(0, 62, n),
    }


def as_rows(ev: dict[str, np.ndarray]) -> list[tuple[int, ...]]:
    return list(zip(*(ev[c].tolist() for c in ("id", "ts", "kind", "func", "duration", "retval")), strict=True))


def insert(conn: sqlite3.Connection, session: int, ev: dict[str, np.ndarray], *, columnwise: bool) -> None:
    exits = ev["kind"] == EXIT
    rows = [
        (i, session, ts, kind, 7, 1, None if func == counts.NO_FUNCTION else func,
         d if kind == EXIT else None, r if kind == EXIT else None)
        for i, ts, kind, func, d, r in as_rows(ev)
    ]
    columns = ("id", "session", "ts", "kind", "pid", "tid", "func", "duration", "retval")
    conn.executemany(f"INSERT INTO events ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", rows)
    if columnwise:
        counts.record_summary(conn, counts.summarise(session, ev["id"], ev["ts"], ev["kind"], ev["func"], exits,
                                                     ev["duration"][exits], ev["retval"][exits]))
    else:
        counts.record(conn, session, columns, rows)


@pytest.mark.parametrize(
    ("spread_ns", "funcs"),
    [
        (1 << TIME_BUCKET_SHIFT, [3, 4]),  # a bucket or two: every (function, bucket) a cell
        (1000 << TIME_BUCKET_SHIFT, [3, 4, counts.NO_FUNCTION]),  # many buckets: cells found by sorting
        (5 << TIME_BUCKET_SHIFT, [1 << 60, 2]),  # keys too big to pack with the kind
    ],
)
def test_summarise_stores_what_row_by_row_summaries_store(tmp_path: Path, spread_ns: int, funcs: list[int]) -> None:
    rng = np.random.default_rng(spread_ns)
    blocks = [events(rng, 300, 1 + 300 * i, spread_ns, funcs) for i in range(4)]
    stores = []
    for columnwise in (False, True):
        c = connect(tmp_path / f"{columnwise}.db")
        counts.prepare(c)
        for i, ev in enumerate(blocks):
            insert(c, 1 + i % 2, ev, columnwise=columnwise)
        stores.append(summaries(c))
        assert stores[-1] == rebuilt(c)
        c.close()
    assert stores[0] == stores[1]


def test_forgetting_known_blocks_matches_reading_the_events_back(tmp_path: Path) -> None:
    layout = [(1, 200), (201, 5), (206, 300), (600, 250)]  # ids 506..599: rows outside any block
    stores = []
    for use_known in (False, True):
        c = connect(tmp_path / f"{use_known}.db")
        counts.prepare(c)
        rng = np.random.default_rng(7)  # the same events in both stores
        known = []
        for first, n in layout:
            ev = events(rng, n, first, 3 << TIME_BUCKET_SHIFT, [5, 6, counts.NO_FUNCTION])
            exits = ev["kind"] == EXIT
            summary = counts.summarise(1, ev["id"], ev["ts"], ev["kind"], ev["func"], exits, ev["duration"][exits],
                                       ev["retval"][exits])
            insert(c, 1, ev, columnwise=True)
            known.append(summary.cells)
        loose = [(i, 1, i * 1000, int(EventKind.STDOUT), 7, f"line {i}") for i in range(506, 600)]
        c.executemany("INSERT INTO events (id, session, ts, kind, pid, text) VALUES (?, ?, ?, ?, ?, ?)", loose)
        counts.record(c, 1, ("id", "session", "ts", "kind", "pid", "text"), loose)
        for lo, hi in [(1, 50), (51, 51), (52, 230), (231, 520), (521, 700)]:
            counts.forget_range(c, lo, hi, known if use_known else ())
            c.execute("DELETE FROM events WHERE id BETWEEN ? AND ?", (lo, hi))
            stores.append(summaries(c))
            assert stores[-1] == rebuilt(c)
        c.close()
    half = len(stores) // 2
    assert stores[:half] == stores[half:]


# ---- through the writer ----------------------------------------------------------------------------


def block(session: int, first_id: int, ev: dict[str, np.ndarray], pid: int = 7) -> EventBlock:
    """Enters and exits as two column groups, the way the ingest builds them."""
    groups = []
    for kind, columns in ((ENTER, ("id", "ts", "func")), (EXIT, ("id", "ts", "func", "duration", "retval"))):
        rows = np.flatnonzero(ev["kind"] == kind)
        if len(rows):
            matrix = np.stack([ev[c][rows] for c in columns], axis=1)
            groups.append(ColumnGroup(columns, (("session", session), ("kind", kind), ("pid", pid), ("tid", 1)),
                                      matrix.ravel().tolist()))
    exits = ev["kind"] == EXIT
    summary = counts.summarise(session, ev["id"], ev["ts"], ev["kind"], ev["func"], exits, ev["duration"][exits],
                               ev["retval"][exits])
    return EventBlock(session, first_id, len(ev["id"]), groups, summary)


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[Writer]:
    w = Writer(tmp_path / "strobe.db")
    w.start()
    try:
        yield w
    finally:
        w.close()


def new_session(writer: Writer, name: str) -> int:
    return writer.call(lambda c: store_sessions.insert_session(c, name, f"/bin/{name}", "/", 7, 0)).result(TIMEOUT).key


def stored(writer: Writer, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return writer.call(lambda c: c.execute(sql, params).fetchall()).result(TIMEOUT)


@pytest.mark.parametrize("n", [1, 63, 64, 65, 130, 255])
def test_a_block_of_any_size_is_stored_whole(writer: Writer, n: int) -> None:
    session = new_session(writer, "s")
    ev = events(np.random.default_rng(n), n, writer.reserve_ids(n), 1 << 30, [3, 4])
    writer.submit_block(block(session, int(ev["id"][0]), ev))
    rows = stored(writer, "SELECT id, session, ts, kind, pid, tid, func, duration, retval FROM events ORDER BY id")
    expected = [
        (i, session, ts, kind, 7, 1, func, d if kind == EXIT else None, r if kind == EXIT else None)
        for i, ts, kind, func, d, r in as_rows(ev)
    ]
    assert rows == expected


def test_summaries_stay_exact_while_the_fifo_trims_blocks(writer: Writer, tmp_path: Path) -> None:
    first, second = new_session(writer, "a"), new_session(writer, "b")
    writer.set_limit(first, 700)
    rng = np.random.default_rng(3)
    late = []
    for i in range(12):
        session = first if i % 3 else second
        n = int(rng.integers(1, 300))
        ids = writer.reserve_ids(n)
        ev = events(rng, n, ids, 2 << TIME_BUCKET_SHIFT, [11, 12])
        if i == 4:
            late.append(block(session, ids, ev))  # written after blocks with higher ids
            continue
        writer.submit_block(block(session, ids, ev))
        writer.submit_output(first, 7, EventKind.STDOUT, b"line %d\n" % i, i)
    writer.submit_block(late[0])
    writer.submit_output(first, 7, EventKind.STDOUT, b"", 99)
    writer.call(lambda c: None).result(TIMEOUT)
    reader = connect(tmp_path / "strobe.db", readonly=True)
    try:
        # the trace events are trimmed to the limit; the output lines have a cap of their own
        assert reader.execute("SELECT count(*) FROM events WHERE session = ? AND kind <= 2", (first,)).fetchone()[0] \
            == 700
        assert reader.execute("SELECT count(*) FROM events WHERE session = ? AND kind = 3", (first,)).fetchone()[0] \
            == 11
        assert summaries(reader) == rebuilt(reader)
    finally:
        reader.close()


def test_closing_the_writer_leaves_no_write_ahead_log(tmp_path: Path) -> None:
    w = Writer(tmp_path / "strobe.db")
    w.start()
    session = new_session(w, "s")
    for _ in range(5):
        ev = events(np.random.default_rng(1), 100, w.reserve_ids(100), 1 << 30, [3])
        w.submit_block(block(session, int(ev["id"][0]), ev))
        w.call(lambda c: None).result(TIMEOUT)
    w.close()
    assert not (tmp_path / "strobe.db-wal").exists()  # the checkpointer's connection closed first
