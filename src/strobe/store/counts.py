"""Read-side summaries kept beside the events table, so `debug_query` needs no scan and ingest no extra index.

Three tables (created by schema.py), all exact, written in the same transactions as the events they
describe:

- `event_counts`: events per (session, kind, function);
- `event_time_counts`: events per (session, ts >> TIME_BUCKET_SHIFT);
- `event_postings`: the ids, timestamps and values of the events with a duration (dim 1) and of the
  function exits (dim 2, their return values), grouped by value class, one row per class per written
  batch: numpy arrays stored as blobs. A selective duration or return-value filter reads only the
  classes it can match, instead of the writer paying a b-tree insert per event for an index (measured
  at 1M events: an index on either cost the writer 20-26% more CPU; all three tables together ~7-10%).

The writer calls:

- `prepare(conn)` once when it opens the store (rebuilds the tables if they are missing or stale, then
  marks them maintained);
- `record(conn, session, columns, rows)` after each insert of event rows, or `record_summary(conn, summary)`
  after a block of trace events whose summary its producer computed with `summarise` (column-wise, numpy);
- `forget_range(conn, lo, hi, known)` before it deletes the events with ids lo..hi (FIFO trimming), with the
  cells of the blocks it wrote there (so those events need not be read back);
- `forget_session(conn, session)` after a session's events were deleted.

Readers trust the tables only once `maintained(conn)` says the writer keeps them.
"""

from __future__ import annotations

import bisect
import functools
import json
import sqlite3
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise, repeat
from operator import itemgetter
from typing import Any

import numpy as np

from strobe.store.schema import EVENT_COLUMNS, TIME_BUCKET_SHIFT

NO_FUNCTION = -1
"""event_counts.func of events that have no function (output lines, crashes...)."""

IDENTIFIED_COLUMNS = ("id", *EVENT_COLUMNS)
"""The columns of the writer's identified rows, (id, *EVENT_COLUMNS)."""

DIM_DURATION = 1
DIM_RETURN = 2
# Value classes. Durations: integer durations by hex digit count (non-decreasing in the duration, so
# `duration >= x` needs the classes from duration_class(x) up); anything else in SQL_CLASS. Return
# values of exits: integers by their low 4 bits; reals, text/blobs and NULL in classes of their own.
_POW16 = np.array([16**k for k in range(1, 16)], dtype=np.int64)
SQL_CLASS = 100
"""Values the planner must compare in SQL (stored durations that are not integers)."""
RETURN_REAL, RETURN_TEXT, RETURN_NULL = 16, 17, 18
_RETURN_SPECIAL = {float: RETURN_REAL, str: RETURN_TEXT, bytes: RETURN_TEXT, type(None): RETURN_NULL}

_META_KEY = "event_counts"
_VERSION = "2"  # bump when what the tables hold changes: stores then rebuild them once

_MAX_BISECTED_BUCKETS = 64
_REBUILD_CHUNK = 50_000
Getter = Callable[[Any], Any]

_ADD_KIND = (
    "INSERT INTO event_counts (session, kind, func, n) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (session, kind, func) DO UPDATE SET n = n + excluded.n"
)
_ADD_BUCKET = (
    "INSERT INTO event_time_counts (session, bucket, n) VALUES (?, ?, ?) "
    "ON CONFLICT (session, bucket) DO UPDATE SET n = n + excluded.n"
)
_ADD_POSTING = (
    "INSERT INTO event_postings (session, dim, cls, first_id, last_id, n, ids, ts, vals) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def duration_class(ns: int) -> int:
    """The class of an integer duration (negative durations are class 0)."""
    return int(np.searchsorted(_POW16, np.int64(ns), "right"))


def return_class(value: int) -> int:
    """The class of an integer return value."""
    return value & 15


def maintained(conn: sqlite3.Connection) -> bool:
    """Whether a writer keeps the summary tables exact (readers fall back to scanning events otherwise)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (_META_KEY,)).fetchall()
    return bool(row) and row[0][0] == _VERSION


def prepare(conn: sqlite3.Connection) -> None:
    """Writer start-up: rebuild the summary tables from the events if they are not known to be exact, then
    mark them maintained. Summaries of sessions that no longer exist are dropped."""
    conn.execute("SAVEPOINT counts_prepare")
    try:
        if maintained(conn):
            for table in ("event_counts", "event_time_counts", "event_postings"):
                conn.execute(f"DELETE FROM {table} WHERE session NOT IN (SELECT key FROM sessions)")
        else:
            _rebuild(conn)
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (_META_KEY, _VERSION))
    except BaseException:
        conn.execute("ROLLBACK TO counts_prepare")
        conn.execute("RELEASE counts_prepare")
        raise
    conn.execute("RELEASE counts_prepare")


def _rebuild(conn: sqlite3.Connection) -> None:
    for table in ("event_counts", "event_time_counts", "event_postings"):
        conn.execute(f"DELETE FROM {table}")
    conn.execute(
        "INSERT INTO event_counts (session, kind, func, n) "
        "SELECT session, kind, coalesce(func, ?), count(*) FROM events GROUP BY 1, 2, 3",
        (NO_FUNCTION,),
    )
    conn.execute(
        "INSERT INTO event_time_counts (session, bucket, n) "
        "SELECT session, ts >> ?, count(*) FROM events GROUP BY 1, 2",
        (TIME_BUCKET_SHIFT,),
    )
    columns = ("id", "ts", "kind", "duration", "retval")
    last = None
    while True:
        chunk = conn.execute(
            f"SELECT session, {', '.join(columns)} FROM events "
            "WHERE (duration IS NOT NULL OR kind = 2) AND id > ? ORDER BY id LIMIT ?",
            (-(1 << 63) if last is None else last, _REBUILD_CHUNK),
        ).fetchall()
        if not chunk:
            return
        last = chunk[-1][1]
        by_session: dict[int, list[tuple[Any, ...]]] = {}
        for row in chunk:
            by_session.setdefault(row[0], []).append(row[1:])
        for session, rows in by_session.items():
            _post(conn, session, columns, rows, None)


@functools.lru_cache(maxsize=64)
def _getters(columns: tuple[str, ...]) -> tuple[Getter | None, Getter, Getter | None, Getter]:
    """Item getters for session, kind, func and ts of rows with these columns (None: no such column)."""
    session = itemgetter(columns.index("session")) if "session" in columns else None
    func = itemgetter(columns.index("func")) if "func" in columns else None
    return session, itemgetter(columns.index("kind")), func, itemgetter(columns.index("ts"))


def record(conn: sqlite3.Connection, session: int, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Summarise event rows of `session` just inserted; `columns` names the positions of each row (it
    must include "id", "kind" and "ts"; absent "func", "duration", "retval" are NULL). C-speed passes
    over the rows only: this runs on the writer thread for every event."""
    if not rows:
        return
    columns = tuple(columns)
    session_of, kind_of, func_of, ts_of = _getters(columns)
    if session_of is not None:
        sessions = set(map(session_of, rows))
        if sessions != {session}:  # rows of other sessions too: summarise each session's own
            for other in sessions:
                record(conn, other, tuple(c for c in columns if c != "session"),
                       [tuple(v for v, c in zip(r, columns, strict=True) if c != "session")
                        for r in rows if session_of(r) == other])
            return
    kinds = list(map(kind_of, rows))
    if func_of is None:
        by_kind = [(session, kind, NO_FUNCTION, n) for kind, n in Counter(kinds).items()]
    elif kinds.count(kinds[0]) == len(kinds):  # the ingest writes enters and exits as separate groups
        kind = kinds[0]
        by_kind = [(session, kind, NO_FUNCTION if func is None else func, n)
                   for func, n in Counter(map(func_of, rows)).items()]
    else:
        by_kind = [(session, kind, NO_FUNCTION if func is None else func, n)
                   for (kind, func), n in Counter(zip(kinds, map(func_of, rows), strict=True)).items()]
    conn.executemany(_ADD_KIND, by_kind)
    conn.executemany(_ADD_BUCKET, [(session, bucket, n) for bucket, n in _buckets(conn, list(map(ts_of, rows)))])
    _post(conn, session, columns, rows, kinds)


def _buckets(conn: sqlite3.Connection, stamps: list[Any]) -> list[tuple[int, int]]:
    """(bucket, events) for these timestamps, bucketed as SQLite computes `ts >> TIME_BUCKET_SHIFT`."""
    shift = TIME_BUCKET_SHIFT
    try:
        stamps.sort()  # nearly sorted already: a linear pass
        first, last = stamps[0] >> shift, stamps[-1] >> shift
        if last - first <= _MAX_BISECTED_BUCKETS:
            out: list[tuple[int, int]] = []
            start = 0
            for bucket in range(first, last + 1):
                end = bisect.bisect_left(stamps, (bucket + 1) << shift, start)
                if end > start:
                    out.append((bucket, end - start))
                start = end
            return out
        return list(Counter([ts >> shift for ts in stamps]).items())
    except TypeError:  # not all integers: let SQLite convert and shift them as it stores them
        return list(Counter(_sql_value(conn, "? >> ?", ts, shift) for ts in stamps).items())


def _sql_value(conn: sqlite3.Connection, expression: str, *params: Any) -> Any:
    return conn.execute(f"SELECT {expression}", params).fetchall()[0][0]


_INTEGERS = {int, bool}
_EXIT = 2  # EventKind.FUNCTION_EXIT
Classifier = Callable[[list[Any]], tuple[np.ndarray, np.ndarray | None]]


def _post(conn: sqlite3.Connection, session: int, columns: tuple[str, ...], rows: Sequence[Sequence[Any]],
          kinds: list[Any] | None) -> None:
    """Add the rows' durations and (for exits) return values to event_postings."""
    index = {c: i for i, c in enumerate(columns)}
    if kinds is None:
        kinds = list(map(itemgetter(index["kind"]), rows))
    ids_of, ts_of = itemgetter(index["id"]), itemgetter(index["ts"])
    out: list[tuple[Any, ...]] = []
    if "duration" in index:
        durations = list(map(itemgetter(index["duration"]), rows))
        nones = durations.count(None)
        if nones == 0:
            _group(conn, out, session, DIM_DURATION, rows, ids_of, ts_of, durations, _duration_classes)
        elif nones < len(durations):
            chosen = [i for i, d in enumerate(durations) if d is not None]
            _group(conn, out, session, DIM_DURATION, [rows[i] for i in chosen], ids_of, ts_of,
                   [durations[i] for i in chosen], _duration_classes)
    exits = kinds.count(_EXIT)
    if exits:  # their return values, NULL included
        selected = rows if exits == len(kinds) else [r for r, k in zip(rows, kinds, strict=True) if k == _EXIT]
        retval = index.get("retval")
        values = [None] * len(selected) if retval is None else list(map(itemgetter(retval), selected))
        _group(conn, out, session, DIM_RETURN, selected, ids_of, ts_of, values, _return_classes)
    conn.executemany(_ADD_POSTING, out)


def _duration_classes(values: list[Any]) -> tuple[np.ndarray, np.ndarray | None]:
    if set(map(type, values)) <= _INTEGERS:
        array = np.array(values, dtype=np.int64)
        return np.searchsorted(_POW16, array, "right"), array
    return np.array([duration_class(v) if type(v) in _INTEGERS else SQL_CLASS for v in values]), None


def _return_classes(values: list[Any]) -> tuple[np.ndarray, np.ndarray | None]:
    if set(map(type, values)) <= _INTEGERS:
        array = np.array(values, dtype=np.int64)
        return array & 15, array
    classes = [return_class(v) if type(v) in _INTEGERS else RETURN_NULL if v != v  # NaN is stored as NULL
               else _RETURN_SPECIAL.get(type(v), RETURN_TEXT) for v in values]
    return np.array(classes), None


def _group(
    conn: sqlite3.Connection, out: list[tuple[Any, ...]], session: int, dim: int, rows: Sequence[Sequence[Any]],
    ids_of: Getter, ts_of: Getter, values: list[Any], classify: Classifier,
) -> None:
    """Append to `out` one event_postings row per value class of these rows."""
    n = len(rows)
    ids = np.fromiter(map(ids_of, rows), np.int64, n)
    stamps = list(map(ts_of, rows))
    if not set(map(type, stamps)) <= _INTEGERS:  # as stored (a timestamp that is not a number sorts as 0)
        stamps = [ts if type(ts) in _INTEGERS else _sql_value(conn, "CAST(? AS INTEGER)", ts) for ts in stamps]
    ts = np.array(stamps, dtype=np.int64)
    classes, numbers = classify(values)
    if numbers is None:  # mixed types: keep the integers' values, the other classes have none
        numbers = np.array([v if type(v) in _INTEGERS else 0 for v in values], dtype=np.int64)
    if n > 1 and not bool(np.all(ids[1:] > ids[:-1])):
        order = np.argsort(ids, kind="stable")
        ids, ts, classes, numbers = ids[order], ts[order], classes[order], numbers[order]
    _posting_rows(out, session, dim, ids, ts, classes, numbers)


def _posting_rows(out: list[tuple[Any, ...]], session: int, dim: int, ids: np.ndarray, ts: np.ndarray,
                  classes: np.ndarray, numbers: np.ndarray) -> None:
    """Append to `out` one event_postings row per value class; `ids` ascending."""
    order = np.argsort(classes.astype(np.uint8), kind="stable")  # classes are < 256: a radix sort
    classes, ids, ts, numbers = classes[order], ids[order], ts[order], numbers[order]
    bounds = [0, *(np.flatnonzero(classes[1:] != classes[:-1]) + 1).tolist(), len(ids)]
    for start, end in pairwise(bounds):
        cls = int(classes[start])
        valued = cls < RETURN_REAL if dim == DIM_RETURN else cls != SQL_CLASS
        out.append((session, dim, cls, int(ids[start]), int(ids[end - 1]), end - start, ids[start:end].tobytes(),
                    ts[start:end].tobytes(), numbers[start:end].tobytes() if valued else None))


# ---- blocks of trace events, summarised column-wise by their producer ----------------------------


@dataclass(frozen=True)
class BlockCells:
    """Where the events of a block fall in event_counts and event_time_counts: `cells` rows are distinct
    (kind, func, bucket) (some may hold no event), and `cell_of[id - first_id]` is the cell of each id of the
    block (len(cells) for an id that holds no event). The writer keeps this (1-2 bytes per event) while the
    events exist, so trimming them needs no read-back (reading deleted events back cost more than deleting
    them)."""

    session: int
    first_id: int
    cells: np.ndarray  # (k, 3) int64
    cell_of: np.ndarray  # unsigned, the smallest type that holds k

    @property
    def last_id(self) -> int:
        return self.first_id + len(self.cell_of) - 1

    def counted(self, lo: int, hi: int) -> list[tuple[int, int, int, int]]:
        """(kind, func, bucket, events) of the block's ids lo..hi."""
        part = self.cell_of[max(lo - self.first_id, 0):max(hi - self.first_id + 1, 0)]
        per_cell = np.bincount(part, minlength=len(self.cells) + 1)[:-1]
        present = np.flatnonzero(per_cell)
        return [(*cell, n) for cell, n in zip(self.cells[present].tolist(), per_cell[present].tolist(), strict=True)]


@dataclass(frozen=True)
class BlockSummary:
    """What a block of trace events adds to the three tables, as rows ready to store, and its cells. The
    ingest computes it with numpy from the record columns, so the writer thread only runs three small
    inserts per block."""

    kinds: list[tuple[int, int, int, int]]  # (session, kind, func, n)
    buckets: list[tuple[int, int, int]]  # (session, bucket, n)
    postings: list[tuple[Any, ...]]  # event_postings rows
    cells: BlockCells


_KEY_LIMIT = 1 << 58


def summarise(session: int, ids: np.ndarray, ts: np.ndarray, kinds: np.ndarray, funcs: np.ndarray,
              exits: np.ndarray, durations: np.ndarray, retvals: np.ndarray) -> BlockSummary:
    """The summary of integer events (at least one): `ids` ascending, `funcs` functions.key or NO_FUNCTION,
    `exits` a mask of the function exits, whose integer durations and return values are `durations` and
    `retvals` (in order). Only the exits have a duration."""
    kinds = kinds.astype(np.int64)
    funcs = funcs.astype(np.int64)
    if int(kinds.min()) >= 0 and int(kinds.max()) < 8 and int(funcs.min()) >= -1 and int(funcs.max()) < _KEY_LIMIT:
        packed, kind_of = np.unique(((funcs + 1) << 3) | kinds, return_inverse=True)  # (function, kind) in one
        pairs = np.stack([packed & 7, (packed >> 3) - 1], axis=1)
    else:
        pairs, kind_of = np.unique(np.stack([kinds, funcs], axis=1), axis=0, return_inverse=True)
    kind_of = kind_of.ravel()
    bucket_of = ts >> TIME_BUCKET_SHIFT
    first_bucket = int(bucket_of.min())
    span = int(bucket_of.max()) - first_bucket + 1
    if span * len(pairs) <= max(len(ids), 64):  # every (pair, bucket) a cell: no sorting
        buckets = np.arange(first_bucket, first_bucket + span, dtype=np.int64)
        bucket_of = bucket_of - first_bucket
        cell_of = kind_of * span + bucket_of
        codes = np.arange(span * len(pairs))
    else:
        buckets, bucket_of = np.unique(bucket_of, return_inverse=True)
        bucket_of = bucket_of.ravel()
        codes, cell_of = np.unique(kind_of * len(buckets) + bucket_of, return_inverse=True)
    cells = np.concatenate([pairs[codes // len(buckets)], buckets[codes % len(buckets), None]], axis=1)
    per_id = np.full(int(ids[-1] - ids[0]) + 1, len(cells), np.min_scalar_type(len(cells)))
    per_id[ids - ids[0]] = cell_of.ravel()
    by_kind = [(session, kind, func, n) for (kind, func), n
               in zip(pairs.tolist(), np.bincount(kind_of, minlength=len(pairs)).tolist(), strict=True)]
    per_bucket = np.bincount(bucket_of, minlength=len(buckets))
    present = np.flatnonzero(per_bucket)
    by_bucket = list(zip(repeat(session), buckets[present].tolist(), per_bucket[present].tolist(), strict=False))
    postings: list[tuple[Any, ...]] = []
    if exits.any():
        exit_ids, exit_ts = ids[exits], ts[exits]
        _posting_rows(postings, session, DIM_DURATION, exit_ids, exit_ts,
                      np.searchsorted(_POW16, durations, "right"), durations)
        _posting_rows(postings, session, DIM_RETURN, exit_ids, exit_ts, retvals & 15, retvals)
    return BlockSummary(by_kind, by_bucket, postings, BlockCells(session, int(ids[0]), cells, per_id))


def record_summary(conn: sqlite3.Connection, summary: BlockSummary) -> None:
    """Add a block's summary (from `summarise`) to the tables, after its events were inserted."""
    conn.executemany(_ADD_KIND, summary.kinds)
    conn.executemany(_ADD_BUCKET, summary.buckets)
    conn.executemany(_ADD_POSTING, summary.postings)


def forget_range(conn: sqlite3.Connection, lo: int, hi: int, known: Sequence[BlockCells] = ()) -> None:
    """Unsummarise the events with ids lo..hi, which are about to be deleted. The parts of the range that
    blocks in `known` cover are counted from their cells; the rest is read back from the events."""
    kinds: Counter[tuple[int, int, int]] = Counter()
    buckets: Counter[tuple[int, int]] = Counter()
    covered: list[tuple[int, int]] = []
    for block in sorted(known, key=lambda b: b.first_id):
        a, b = max(lo, block.first_id), min(hi, block.last_id)
        if a <= b:
            covered.append((a, b))
            for kind, func, bucket, n in block.counted(a, b):
                kinds[block.session, kind, func] += n
                buckets[block.session, bucket] += n
    start = lo
    for a, b in [*covered, (hi + 1, hi)]:
        if start < a:
            for n, session, kind, func, bucket in conn.execute(
                "SELECT count(*), session, kind, coalesce(func, ?), ts >> ? FROM events WHERE id BETWEEN ? AND ? "
                "GROUP BY 2, 3, 4, 5", (NO_FUNCTION, TIME_BUCKET_SHIFT, start, a - 1),
            ).fetchall():
                kinds[session, kind, func] += n
                buckets[session, bucket] += n
        start = b + 1
    conn.executemany("UPDATE event_counts SET n = n - ? WHERE session = ? AND kind = ? AND func = ?",
                     [(n, *key) for key, n in kinds.items()])
    conn.executemany("DELETE FROM event_counts WHERE session = ? AND kind = ? AND func = ? AND n <= 0", list(kinds))
    conn.executemany("UPDATE event_time_counts SET n = n - ? WHERE session = ? AND bucket = ?",
                     [(n, *key) for key, n in buckets.items()])
    conn.executemany("DELETE FROM event_time_counts WHERE session = ? AND bucket = ? AND n <= 0", list(buckets))
    for session in {key[0] for key in kinds}:
        postings = conn.execute(
            "SELECT rowid, ids, ts, vals FROM event_postings WHERE session = ? AND first_id <= ? AND last_id >= ?",
            (session, hi, lo),
        ).fetchall()
        for rowid, ids_blob, ts_blob, vals_blob in postings:
            ids = np.frombuffer(ids_blob, np.int64)
            keep = (ids < lo) | (ids > hi)
            if not keep.any():
                conn.execute("DELETE FROM event_postings WHERE rowid = ?", (rowid,))
                continue
            kept = ids[keep]
            conn.execute(
                "UPDATE event_postings SET first_id = ?, last_id = ?, n = ?, ids = ?, ts = ?, vals = ? WHERE rowid = ?",
                (int(kept[0]), int(kept[-1]), len(kept), kept.tobytes(),
                 np.frombuffer(ts_blob, np.int64)[keep].tobytes(),
                 None if vals_blob is None else np.frombuffer(vals_blob, np.int64)[keep].tobytes(), rowid),
            )


def forget_session(conn: sqlite3.Connection, session: int) -> None:
    """Drop the summaries of a session whose events were deleted."""
    for table in ("event_counts", "event_time_counts", "event_postings"):
        conn.execute(f"DELETE FROM {table} WHERE session = ?", (session,))


@dataclass(frozen=True)
class Postings:
    """Events of one session from some classes of one dimension: ids, timestamps and, where `valued`
    (the integer classes), their values."""

    ids: np.ndarray
    ts: np.ndarray
    values: np.ndarray
    valued: np.ndarray  # bool per event


def load(conn: sqlite3.Connection, session: int, dim: int, classes: Sequence[int]) -> Postings:
    """The postings of these classes (any order)."""
    rows = conn.execute(
        f"SELECT ids, ts, vals FROM event_postings WHERE session = ? AND dim = ? "
        f"AND cls IN ({', '.join(str(int(c)) for c in classes)})",
        (session, dim),
    ).fetchall()
    if not rows:
        empty = np.zeros(0, np.int64)
        return Postings(empty, empty, empty, np.zeros(0, bool))
    ids = np.concatenate([np.frombuffer(r[0], np.int64) for r in rows])
    ts = np.concatenate([np.frombuffer(r[1], np.int64) for r in rows])
    values = np.concatenate([np.frombuffer(r[2], np.int64) if r[2] is not None
                             else np.zeros(len(r[0]) // 8, np.int64) for r in rows])
    valued = np.concatenate([np.full(len(r[0]) // 8, r[2] is not None) for r in rows])
    return Postings(ids, ts, values, valued)


def ids_json(ids: np.ndarray) -> str:
    """Ids as a JSON array, for `IN (SELECT value FROM json_each(?))`."""
    return json.dumps(ids.tolist())
