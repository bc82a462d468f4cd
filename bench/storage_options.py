"""Where trace events could be stored (issue 20): ingest rate, CPU per million events, disk per event and the
latency of debug_query's filters at 1M, 10M and 50M stored events, for each option:

  a  the current SQLite store through its real path: TraceIngest (daemon/ingest.py) turns the agent's binary
     batches into column groups and count summaries, the Writer (store/writer.py) commits them on its thread,
     query_events (store/query.py) serves the page and totalCount;
  b  append-only columnar segments (bench/storage_segments.py): one file per column per segment of 2**20 events,
     per-segment summaries and sorted value postings, read with numpy through memory maps; function, thread and
     slot names in a small SQLite catalog (as sessions, output and crashes would stay);
  c  DuckDB (if installed: scripts/bench-deps.sh): decoded batches appended from numpy, 65,536 rows per INSERT,
     one thread; queries in SQL (count + ORDER BY ts, id LIMIT 50);
  d  SQLite, lean: the same events columns, no secondary index, no summary tables, a rowid table;
  e  SQLite, lean, WITHOUT ROWID clustered on (session, ts, id): time order without a second b-tree.

Every option is fed the same stream: the agent's 72-byte records (instrument/records.py), 2,048 per batch, from
a seeded generator: ~52 functions with Zipf-skewed calls, 8 threads (skewed), properly nested enter/exit pairs up to
12 deep with parents, timestamps 2-6 µs apart, log-normal durations (median ~3 µs, ~1% >= 100 µs), return values
0 (60%), 1..64, or -1 (0.5%). b-e decode it the way TraceIngest does (numpy, parents through its sequence map).
The CPU figure is the whole process's CPU (every thread: the writer, checkpointer, DuckDB's) while ingesting,
less the generator's own. Each query's first answer is checked (totalCount and the page's timestamps) against
what the generator knows; then it is timed `--runs` times (fewer when one call takes over a second).

    .venv/bin/python -m bench.storage_options [--events N ...] [--options a,b,c,d,e] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import math
import os
import resource
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from bench.query_bench import FUNCTION_NAMES
from bench.storage_segments import Batch, Predicate, Segment, SegmentStore, latest_ts, recover
from bench.storage_segments import query as segment_query
from strobe.daemon.ingest import TraceIngest, _SeqMap
from strobe.instrument.records import FLAG_SAMPLED, FLAG_UNFOLLOWED, KIND_ENTER, KIND_EXIT, NO_PARENT, RECORD_DTYPE
from strobe.instrument.records import decode as decode_records
from strobe.service import GC_THRESHOLDS
from strobe.store import sessions as store_sessions
from strobe.store.batches import ColumnGroup, insert_group
from strobe.store.filters import UNSET, EventFilter, TextMatch, TimeBound
from strobe.store.query import EventRow, install_functions, query_events
from strobe.store.schema import EventKind, connect
from strobe.store.writer import Writer

if TYPE_CHECKING:
    import duckdb

PID = 4242
THREAD_WEIGHTS = (8.0, 4.0, 2.0, 1.0, 1.0, 1.0, 0.5, 0.5)
THREAD_NAMES = ["main", *(f"worker-{t}" for t in range(1, len(THREAD_WEIGHTS)))]
START_NS = 1_000_000_000_000
BATCH = 2048  # records per agent batch
PARAMS = 2  # argument registers kept per enter
MAX_DEPTH = 12
MIN_DURATION_NS = 100_000  # ~1% of exits
SELECTIVE_RETVAL = -1  # ~0.5% of exits
PAGE = 50
SEED = 20
SLOW_QUERY_S = 1.0
"""A filter whose first answer takes longer than this is timed fewer times (within SLOW_QUERY_BUDGET_S, >= 3)."""
SLOW_QUERY_BUDGET_S = 15.0
TIMEOUT_S = 3600.0

RawBatch = tuple[bytes, int, int]
"""An agent batch: (records, count, sequence number of the first)."""


# ---- the synthetic stream ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Template:
    """The call structure of a chunk, repeated chunk after chunk: each thread's calls nest and all close by the
    chunk's end (a shorter chunk is a prefix, and leaves calls open)."""

    thread: np.ndarray  # thread index per record
    kind: np.ndarray  # KIND_ENTER / KIND_EXIT
    match: np.ndarray  # an exit's enter (position); -1 for enters
    parent: np.ndarray  # the enclosing call's enter (position); -1 at depth 0


def make_template(n: int, rng: np.random.Generator) -> Template:
    weights = np.array(THREAD_WEIGHTS) / sum(THREAD_WEIGHTS)
    threads: list[int] = rng.choice(len(THREAD_WEIGHTS), size=n, p=weights).tolist()
    coins: list[bool] = (rng.random(n) < 0.5).tolist()
    kind, match, parent = [KIND_ENTER] * n, [-1] * n, [-1] * n
    stacks: list[list[int]] = [[] for _ in THREAD_WEIGHTS]
    open_calls = 0
    for i in range(n):
        stack = stacks[threads[i]]
        closing = n - i <= open_calls  # every remaining record must close a call
        if closing and not stack:
            threads[i] = next(t for t, s in enumerate(stacks) if s)
            stack = stacks[threads[i]]
        if stack and (closing or len(stack) >= MAX_DEPTH or coins[i]):
            enter = stack.pop()
            kind[i], match[i], parent[i] = KIND_EXIT, enter, parent[enter]
            open_calls -= 1
        else:
            parent[i] = stack[-1] if stack else -1
            stack.append(i)
            open_calls += 1
    return Template(np.array(threads), np.array(kind, np.uint16), np.array(match), np.array(parent))


@dataclass(frozen=True)
class Filter:
    """One debug_query filter of the study (names as the MCP parameters)."""

    name: str
    function_contains: str | None = None
    function_equals: str | None = None
    exits: bool = False  # eventType function_exit
    min_duration: int | None = None
    return_equals: int | None = None
    last_ns: int | None = None  # timeFrom "-1s"
    thread_contains: str | None = None
    last_page: bool = False  # offset totalCount - 50


@dataclass
class _Seen:
    total: int = 0
    first: list[int] = field(default_factory=list)


class Workload:
    """The seeded stream every option is fed, and what each filter should answer so far."""

    def __init__(self, chunk: int, seed: int = SEED) -> None:
        self.rng = np.random.default_rng(seed)
        self.chunk = chunk
        self.template = make_template(chunk, self.rng)
        ranks = np.arange(1, len(FUNCTION_NAMES) + 1)
        self.rng.shuffle(ranks)
        weights = 1.0 / ranks**1.1
        self.weights = weights / weights.sum()
        self.rarest = FUNCTION_NAMES[int(np.argmin(self.weights))]
        self.produced = 0
        self.last_ts = START_NS
        self.filters = [
            Filter("no filter"),
            Filter("no filter, last page", last_page=True),
            Filter("function contains", function_contains="work_3"),
            Filter("function equals (rarest)", function_equals=self.rarest),
            Filter("eventType exit", exits=True),
            Filter("minDurationNs", min_duration=MIN_DURATION_NS),
            Filter("time range -1s", last_ns=1_000_000_000),
            Filter("returnValue", return_equals=SELECTIVE_RETVAL),
            Filter("threadName", thread_contains="worker-5"),
        ]
        self._seen = {f.name: _Seen() for f in self.filters}
        self._recent: list[np.ndarray] = []  # timestamps of the last chunks (time range, last page)

    def next_chunk(self, n: int) -> list[RawBatch]:
        """The next `n` records as agent batches."""
        t = self.template
        kind, thread, match, parent = t.kind[:n], t.thread[:n], t.match[:n], t.parent[:n]
        rng = self.rng
        enters, exits = kind == KIND_ENTER, kind == KIND_EXIT
        rec = np.zeros(n, RECORD_DTYPE)
        ts = self.last_ts + np.cumsum(rng.integers(2_000, 6_001, n))
        self.last_ts = int(ts[-1])
        rec["ts"] = ts
        rec["tid"] = PID + thread
        slots = np.zeros(n, np.int64)
        slots[enters] = rng.choice(len(FUNCTION_NAMES), size=int(enters.sum()), p=self.weights)
        slots[exits] = slots[match[exits]]
        rec["func"] = slots
        rec["kind"] = kind
        seq0 = self.produced
        rec["parent"] = np.where(parent >= 0, (seq0 + parent) & 0xFFFF_FFFF, NO_PARENT)
        regs = rng.integers(0, 1 << 40, (n, 6))
        n_exits = int(exits.sum())
        durations = rng.lognormal(8.0, 1.5, n_exits).astype(np.int64)
        u = rng.random(n_exits)
        retvals = np.where(u < 0.005, SELECTIVE_RETVAL, np.where(u < 0.6, 0, rng.integers(1, 65, n_exits)))
        regs[exits, 0] = retvals
        regs[exits, 1] = durations
        rec["a"] = regs
        self._account(rec, ts - START_NS, slots, exits, durations, retvals)
        batches = [(rec[i:i + BATCH].tobytes(), min(BATCH, n - i), (seq0 + i) & 0xFFFF_FFFF)
                   for i in range(0, n, BATCH)]
        self.produced += n
        return batches

    def slots_named(self, flt: Filter) -> np.ndarray | None:
        if flt.function_contains is not None:
            return np.array([s for s, name in enumerate(FUNCTION_NAMES) if flt.function_contains in name])
        if flt.function_equals is not None:
            return np.array([FUNCTION_NAMES.index(flt.function_equals)])
        return None

    def _account(self, rec: np.ndarray, ts: np.ndarray, slots: np.ndarray, exits: np.ndarray,
                 durations: np.ndarray, retvals: np.ndarray) -> None:
        for flt in self.filters:
            if flt.last_page or flt.last_ns is not None:
                continue
            mask = np.ones(len(rec), bool)
            named = self.slots_named(flt)
            if named is not None:
                mask &= np.isin(slots, named)
            if flt.exits:
                mask &= exits
            if flt.min_duration is not None:
                mask &= exits
                mask[exits] &= durations >= flt.min_duration
            if flt.return_equals is not None:
                mask &= exits
                mask[exits] &= retvals == flt.return_equals
            if flt.thread_contains is not None:
                tids = [PID + t for t, name in enumerate(THREAD_NAMES) if flt.thread_contains in name]
                mask &= np.isin(rec["tid"], tids)
            seen = self._seen[flt.name]
            seen.total += int(mask.sum())
            if len(seen.first) < PAGE:
                seen.first += ts[mask][:PAGE - len(seen.first)].tolist()
        self._recent.append(ts)
        while len(self._recent) > 1 and sum(map(len, self._recent[1:])) >= 2_000_000:
            self._recent.pop(0)

    def expected(self, flt: Filter) -> tuple[int, list[int]]:
        """(totalCount, the page's timestamps) the filter should give now."""
        if flt.last_page:
            return self.produced, np.concatenate(self._recent)[-PAGE:].tolist()
        if flt.last_ns is not None:
            recent = np.concatenate(self._recent)
            since = int(recent[-1]) - flt.last_ns
            if recent[0] >= since and len(recent) < self.produced:
                raise AssertionError("the generator kept too few timestamps for the time range")
            matched = recent[recent >= since]
            return len(matched), matched[:PAGE].tolist()
        seen = self._seen[flt.name]
        return seen.total, seen.first


# ---- the options -------------------------------------------------------------------------------------------


class Store(Protocol):
    label: str

    def ingest(self, batches: list[RawBatch]) -> None: ...

    def settle(self) -> None:
        """Return once everything ingested is stored and queryable."""

    def stored(self) -> int: ...

    def query(self, flt: Filter, offset: int) -> tuple[int, list[EventRow]]: ...

    def extra(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


def _functions() -> list[tuple[int, str, str, str, int, int]]:
    return [(slot + 1, name, f"_Z{len(name)}{name}v", f"/proj/src/{name.split('_')[0]}.c", 10 + 7 * slot, PARAMS)
            for slot, name in enumerate(FUNCTION_NAMES)]


def _threads(session: int) -> list[tuple[int, int, int, str]]:
    return [(session, PID, PID + t, name) for t, name in enumerate(THREAD_NAMES)]


def _event_filter(flt: Filter) -> EventFilter:
    function = None
    if flt.function_contains is not None:
        function = TextMatch(contains=flt.function_contains)
    elif flt.function_equals is not None:
        function = TextMatch(equals=flt.function_equals)
    return EventFilter(
        kind=EventKind.FUNCTION_EXIT if flt.exits else None, function=function,
        return_equals=UNSET if flt.return_equals is None else flt.return_equals,
        thread_name_contains=flt.thread_contains, min_duration_ns=flt.min_duration,
        time_from=None if flt.last_ns is None else TimeBound(-flt.last_ns, relative=True),
    )


class CurrentStore:
    """a: the store as the daemon runs it."""

    label = "a  SQLite, current store (TraceIngest + Writer + query_events)"

    def __init__(self, directory: Path) -> None:
        self.db = directory / "strobe.db"
        self.writer = Writer(self.db)
        self.writer.start()

        def setup(conn: sqlite3.Connection) -> store_sessions.SessionRecord:
            conn.executemany("INSERT INTO functions (key, name, raw, file, line, params) VALUES (?, ?, ?, ?, ?, ?)",
                             _functions())
            return store_sessions.insert_session(conn, "bench", "/proj/bench", "/proj", PID, 1_000)

        self.session = self.writer.call(setup).result(timeout=TIMEOUT_S).key
        self.writer.set_limit(self.session, 1 << 40)
        self.trace = TraceIngest(self.writer, self.session, PID, START_NS)
        for slot in range(len(FUNCTION_NAMES)):
            self.trace.hook(slot, slot + 1, PARAMS)
        self._named = False
        self._conn: sqlite3.Connection | None = None

    def ingest(self, batches: list[RawBatch]) -> None:
        for data, count, seq in batches:
            threads = None if self._named else [(PID + t, name) for t, name in enumerate(THREAD_NAMES)]
            self._named = True
            self.trace.on_batch(data, count, 0, 0, threads=threads, first_seq=seq)

    def settle(self) -> None:
        self.writer.call(lambda conn: None).result(timeout=TIMEOUT_S)

    def _reader(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = connect(self.db, readonly=True)
            install_functions(self._conn)
        return self._conn

    def stored(self) -> int:
        conn = self._reader()
        lost = conn.execute("SELECT lost + dropped FROM sessions WHERE key = ?", (self.session,)).fetchone()[0]
        if lost:
            raise AssertionError(f"the store reports {lost} events lost")
        return int(conn.execute("SELECT count(*) FROM events WHERE session = ?", (self.session,)).fetchone()[0])

    def query(self, flt: Filter, offset: int) -> tuple[int, list[EventRow]]:
        page = query_events(self._reader(), self.session, _event_filter(flt), limit=PAGE, offset=offset)
        return page.total_count, page.events

    def extra(self) -> dict[str, Any]:
        return {"rows_written": self.writer.rows_written}

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self.writer.close(timeout=TIMEOUT_S)


class Decoder:
    """The agent's batches to event columns, the way TraceIngest decodes them (parents through its sequence map,
    function slots, the exits' duration and return value, each enter's argument words)."""

    def __init__(self) -> None:
        self.seqs = _SeqMap()
        self.next_id = 1
        self.params = np.full(len(FUNCTION_NAMES), PARAMS, np.int64)

    def decode(self, data: bytes, count: int, first_seq: int) -> Batch:
        rec = decode_records(data, count)
        first_id = self.next_id
        self.next_id += count
        start = self.seqs.add(first_seq, count, first_id)
        parents = self.seqs.resolve(rec["parent"], start + count - 1)
        ids = np.arange(first_id, first_id + count, dtype=np.int64)
        kinds = rec["kind"]
        enters, exits = kinds == KIND_ENTER, kinds == KIND_EXIT
        stored = enters | exits
        if not stored.all():  # capture and watch records belong to their call (not in this stream)
            rec, ids, parents, enters, exits = rec[stored], ids[stored], parents[stored], enters[stored], exits[stored]
        slots = rec["func"].astype(np.int64)
        regs = rec["a"]
        flags = rec["flags"]
        nwords = np.where(enters, self.params[slots], 0)
        columns = {
            "ts": rec["ts"].astype(np.int64) - START_NS, "tid": rec["tid"], "slot": slots, "kind": rec["kind"],
            "flags": ((flags & FLAG_SAMPLED) != 0) | (((flags & FLAG_UNFOLLOWED) != 0) << 1),
            "pid": np.full(len(ids), PID, np.int32), "parent": parents,
            "duration": np.where(exits, regs[:, 1], -1), "retval": np.where(exits, regs[:, 0], 0),
        }
        return Batch(ids, columns, nwords, regs[np.arange(6) < nwords[:, None]])


class Catalog:
    """What stays in SQLite beside a columnar event store: functions, the session's slots, thread names."""

    SESSION = 1

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.executescript("""
            CREATE TABLE functions (key INTEGER PRIMARY KEY, name TEXT NOT NULL, raw TEXT, file TEXT, line INTEGER,
                                    params INTEGER, signature TEXT, runtime TEXT);
            CREATE TABLE slots (session INTEGER, slot INTEGER, key INTEGER, PRIMARY KEY (session, slot)) WITHOUT ROWID;
            CREATE TABLE threads (session INTEGER, pid INTEGER, tid INTEGER, name TEXT,
                                  PRIMARY KEY (session, pid, tid)) WITHOUT ROWID;
        """)
        self.conn.executemany("INSERT INTO functions (key, name, raw, file, line, params) VALUES (?, ?, ?, ?, ?, ?)",
                              _functions())
        self.conn.executemany("INSERT INTO slots VALUES (?, ?, ?)",
                              [(self.SESSION, slot, slot + 1) for slot in range(len(FUNCTION_NAMES))])
        self.conn.executemany("INSERT INTO threads VALUES (?, ?, ?, ?)", _threads(self.SESSION))

    def slots(self, flt: Filter) -> np.ndarray | None:
        """The session's slots of the functions the filter names (None: no function filter)."""
        sql = "SELECT s.slot FROM slots s JOIN functions f ON f.key = s.key WHERE s.session = ? AND "
        if flt.function_contains is not None:
            rows = self.conn.execute(sql + "instr(f.name, ?) > 0", (self.SESSION, flt.function_contains))
        elif flt.function_equals is not None:
            rows = self.conn.execute(sql + "f.name = ?", (self.SESSION, flt.function_equals))
        else:
            return None
        return np.array([r[0] for r in rows], np.int64)

    def keys(self, flt: Filter) -> list[int] | None:
        slots = self.slots(flt)
        return None if slots is None else [int(s) + 1 for s in slots.tolist()]

    def tids(self, flt: Filter) -> np.ndarray | None:
        if flt.thread_contains is None:
            return None
        rows = self.conn.execute("SELECT tid FROM threads WHERE session = ? AND instr(name, ?) > 0",
                                 (self.SESSION, flt.thread_contains))
        return np.array([r[0] for r in rows], np.int64)

    def names(self, slots: list[int], tids: list[int]) -> tuple[dict[int, tuple[Any, ...]], dict[int, str]]:
        """Functions by slot (name, raw, file, line, signature, runtime) and thread names by tid, for one page."""
        marks = ", ".join("?" * len(set(slots)))
        functions = {row[0]: row[1:] for row in self.conn.execute(
            "SELECT s.slot, f.name, f.raw, f.file, f.line, f.signature, f.runtime FROM slots s "
            f"JOIN functions f ON f.key = s.key WHERE s.session = ? AND s.slot IN ({marks})",
            (self.SESSION, *set(slots)))}
        marks = ", ".join("?" * len(set(tids)))
        threads = {row[0]: row[1] for row in self.conn.execute(
            f"SELECT tid, name FROM threads WHERE session = ? AND pid = ? AND tid IN ({marks})",
            (self.SESSION, PID, *set(tids)))}
        return functions, threads

    def close(self) -> None:
        self.conn.close()


def _event_row(eid: int, ts: int, kind: int, pid: int, tid: int, parent: int, duration: int | None,
               retval: int | None, flags: int, args: bytes | None, function: tuple[Any, ...] | None,
               thread: str | None) -> EventRow:
    name, raw, file, line, _signature, runtime = function or (None,) * 6
    return EventRow(id=eid, ts=ts, kind=EventKind(kind), pid=pid, tid=tid, parent=None if parent < 0 else parent,
                    duration=duration, retval=retval, sampled=bool(flags & 1), text=None, args=args, extra=None,
                    function=name, function_raw=raw, source_file=file, line=line, thread_name=thread, plan=None,
                    runtime=runtime or "native", unfollowed=bool(flags & 2))


class SegmentsOption:
    """b: append-only columnar segments, numpy reads."""

    label = "b  columnar segments + numpy (memory-mapped)"

    def __init__(self, directory: Path, rows: int, fsync: bool) -> None:
        self.directory = directory
        self.catalog = Catalog(directory / "catalog.db")
        self.decoder = Decoder()
        self.segments = SegmentStore(directory / "segments", rows, fsync=fsync)
        if not fsync:
            self.label += ", sealed without fsync"
        (directory / "segments").mkdir()

    def ingest(self, batches: list[RawBatch]) -> None:
        for data, count, seq in batches:
            self.segments.append(self.decoder.decode(data, count, seq))

    def settle(self) -> None:
        pass

    def stored(self) -> int:
        return sum(seg.n for seg in self.segments.views())

    def predicate(self, flt: Filter, segments: list[Segment]) -> Predicate:
        exits = flt.exits or flt.return_equals is not None
        return Predicate(
            kind=KIND_EXIT if exits else None, slots=self.catalog.slots(flt), tids=self.catalog.tids(flt),
            min_duration=flt.min_duration, return_equals=flt.return_equals,
            ts_from=None if flt.last_ns is None else latest_ts(segments) - flt.last_ns,
        )

    def query(self, flt: Filter, offset: int) -> tuple[int, list[EventRow]]:
        segments = self.segments.views()
        total, page = segment_query(segments, self.predicate(flt, segments), offset=offset, limit=PAGE)
        return total, self.rows(page)

    def rows(self, page: list[tuple[Segment, np.ndarray]]) -> list[EventRow]:
        gathered = [(seg, rows, {name: seg.cols[name][rows].tolist() for name in (
            "ts", "idoff", "tid", "slot", "kind", "flags", "pid", "parent", "duration", "retval")})
            for seg, rows in page]
        functions, threads = self.catalog.names([s for _, _, c in gathered for s in c["slot"]],
                                                [t for _, _, c in gathered for t in c["tid"]])
        out: list[EventRow] = []
        for seg, rows, c in gathered:
            for i, row in enumerate(rows.tolist()):
                exit_ = c["kind"][i] == KIND_EXIT
                args = None if exit_ else seg.event_words(row).tobytes()
                out.append(_event_row(seg.first_id + c["idoff"][i], c["ts"][i], c["kind"][i], c["pid"][i],
                                      c["tid"][i], c["parent"][i], c["duration"][i] if exit_ else None,
                                      c["retval"][i] if exit_ else None, c["flags"][i], args,
                                      functions.get(c["slot"][i]), threads.get(c["tid"][i])))
        return out

    def extra(self) -> dict[str, Any]:
        """What a restarted daemon would find (the files alone), and the CPU spent sealing segments."""
        began = time.perf_counter()
        found = recover(self.directory / "segments")
        return {"seal_cpu_s": self.segments.seal_s, "segments": len(found),
                "recovered_events": sum(s.n for s in found), "recover_s": time.perf_counter() - began}

    def close(self) -> None:
        self.segments.close()
        self.catalog.close()


_SQL_COLUMNS = ("id", "ts", "kind", "pid", "tid", "func", "parent", "duration", "retval")


def _sql_where(flt: Filter, keys: list[int] | None, tids: np.ndarray | None, latest: Callable[[], int]) -> str:
    """The filter as SQL over an events table (literal integers only)."""
    clauses = ["session = 1"]
    if flt.exits or flt.min_duration is not None or flt.return_equals is not None:
        clauses.append(f"kind = {KIND_EXIT}")
    if keys is not None:
        clauses.append(f"func IN ({', '.join(map(str, keys)) or 'NULL'})")
    if tids is not None:
        clauses.append(f"pid = {PID} AND tid IN ({', '.join(map(str, tids.tolist())) or 'NULL'})")
    if flt.min_duration is not None:
        clauses.append(f"duration >= {int(flt.min_duration)}")
    if flt.return_equals is not None:
        clauses.append(f"retval = {int(flt.return_equals)}")
    if flt.last_ns is not None:
        clauses.append(f"ts >= {latest() - flt.last_ns}")
    return " AND ".join(clauses)


class DuckOption:
    """c: DuckDB, one events table; numpy batches appended `append_rows` at a time."""

    label = "c  DuckDB (numpy appends, SQL queries)"

    def __init__(self, directory: Path, append_rows: int, threads: int) -> None:
        import duckdb

        self.label = f"c  DuckDB {duckdb.__version__} (numpy appends of {append_rows:,} rows, {threads} thread)"
        self.con: duckdb.DuckDBPyConnection = duckdb.connect(str(directory / "events.duckdb"))
        self.con.execute(f"SET threads = {threads}")
        self.con.execute("""
            CREATE TABLE events (id BIGINT, session INTEGER, ts BIGINT, kind UTINYINT, pid INTEGER, tid UINTEGER,
                                 func INTEGER, parent BIGINT, duration BIGINT, retval BIGINT, flags UTINYINT,
                                 nwords UTINYINT, a0 BIGINT, a1 BIGINT, a2 BIGINT, a3 BIGINT, a4 BIGINT, a5 BIGINT)
        """)
        self.catalog = Catalog(directory / "catalog.db")
        self.decoder = Decoder()
        self.append_rows = append_rows
        self.pending: list[Batch] = []
        self.pending_rows = 0

    def ingest(self, batches: list[RawBatch]) -> None:
        for data, count, seq in batches:
            batch = self.decoder.decode(data, count, seq)
            self.pending.append(batch)
            self.pending_rows += len(batch)
            if self.pending_rows >= self.append_rows:
                self._flush()

    def _flush(self) -> None:
        if not self.pending:
            return
        parts = self.pending
        self.pending, self.pending_rows = [], 0

        def column(name: str) -> np.ndarray:
            return np.concatenate([p.columns[name] for p in parts])

        nwords = np.concatenate([p.nwords for p in parts])
        regs = np.zeros((len(nwords), 6), np.int64)
        regs[np.arange(6) < nwords[:, None]] = np.concatenate([p.words for p in parts])
        incoming: dict[str, np.ndarray] = {
            "id": np.concatenate([p.ids for p in parts]), "session": np.ones(len(nwords), np.int32),
            "ts": column("ts"), "kind": column("kind").astype(np.uint8), "pid": column("pid"), "tid": column("tid"),
            "func": column("slot").astype(np.int32) + 1, "parent": column("parent"), "duration": column("duration"),
            "retval": column("retval"), "flags": column("flags").astype(np.uint8), "nwords": nwords.astype(np.uint8),
            **{f"a{j}": np.ascontiguousarray(regs[:, j]) for j in range(6)},
        }
        self.con.register("incoming", incoming)
        self.con.execute("INSERT INTO events SELECT * FROM incoming")
        self.con.unregister("incoming")

    def settle(self) -> None:
        self._flush()

    def stored(self) -> int:
        row = self.con.execute("SELECT count(*) FROM events WHERE session = 1").fetchone()
        assert row is not None
        return int(row[0])

    def query(self, flt: Filter, offset: int) -> tuple[int, list[EventRow]]:
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            def latest() -> int:
                row = con.execute("SELECT max(ts) FROM events WHERE session = 1").fetchone()
                return int(row[0]) if row is not None and row[0] is not None else 0

            where = _sql_where(flt, self.catalog.keys(flt), self.catalog.tids(flt), latest)
            count = con.execute(f"SELECT count(*) FROM events WHERE {where}").fetchone()
            rows = con.execute(
                f"SELECT {', '.join(_SQL_COLUMNS)}, flags, nwords, a0, a1, a2, a3, a4, a5 FROM events "
                f"WHERE {where} ORDER BY ts, id LIMIT {PAGE} OFFSET {offset}"
            ).fetchall()
        finally:
            con.execute("COMMIT")
        functions, threads = self.catalog.names([r[5] - 1 for r in rows], [r[4] for r in rows])
        out = []
        for r in rows:
            exit_ = r[2] == KIND_EXIT
            args = None if exit_ else np.array(r[11:11 + r[10]], np.int64).tobytes()
            out.append(_event_row(r[0], r[1], r[2], r[3], r[4], r[6], r[7] if exit_ else None,
                                  r[8] if exit_ else None, r[9], args, functions.get(r[5] - 1), threads.get(r[4])))
        assert count is not None
        return int(count[0]), out

    def extra(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        self.con.close()
        self.catalog.close()


class LeanSqlite:
    """d / e: SQLite with the events columns and nothing else: no secondary index, no summary tables, one
    transaction per agent batch, rows inserted with the store's own multi-row statements (store/batches.py)."""

    def __init__(self, directory: Path, *, clustered: bool) -> None:
        self.label = ("e  SQLite lean, WITHOUT ROWID (session, ts, id)" if clustered
                      else "d  SQLite lean, rowid table, no secondary index")
        self.conn = sqlite3.connect(directory / "lean.db", isolation_level=None, check_same_thread=False)
        for pragma in ("journal_mode = WAL", "synchronous = NORMAL", "cache_size = -8192"):
            self.conn.execute(f"PRAGMA {pragma}")
        key = ("id INTEGER NOT NULL, session INTEGER NOT NULL, ts INTEGER NOT NULL" if clustered
               else "id INTEGER PRIMARY KEY, session INTEGER NOT NULL, ts INTEGER NOT NULL")
        tail = ", PRIMARY KEY (session, ts, id)) WITHOUT ROWID" if clustered else ")"
        self.conn.executescript(f"""
            CREATE TABLE events ({key}, kind INTEGER NOT NULL, pid INTEGER, tid INTEGER, func INTEGER,
                                 parent INTEGER, duration INTEGER, retval, sampled INTEGER, text TEXT, args,
                                 extra TEXT{tail};
            CREATE TABLE functions (key INTEGER PRIMARY KEY, name TEXT NOT NULL, raw TEXT, file TEXT, line INTEGER,
                                    params INTEGER, signature TEXT, runtime TEXT);
            CREATE TABLE threads (session INTEGER, pid INTEGER, tid INTEGER, name TEXT,
                                  PRIMARY KEY (session, pid, tid)) WITHOUT ROWID;
        """)
        self.conn.executemany("INSERT INTO functions (key, name, raw, file, line, params) VALUES (?, ?, ?, ?, ?, ?)",
                              _functions())
        self.conn.executemany("INSERT INTO threads VALUES (?, ?, ?, ?)", _threads(1))
        self.decoder = Decoder()

    def ingest(self, batches: list[RawBatch]) -> None:
        conn = self.conn
        for data, count, seq in batches:
            batch = self.decoder.decode(data, count, seq)
            c = batch.columns
            kinds = c["kind"]
            conn.execute("BEGIN")
            for kind in (KIND_ENTER, KIND_EXIT):
                rows = np.flatnonzero(kinds == kind)
                if not len(rows):
                    continue
                names = ["id", "ts", "tid", "func", "parent"]
                arrays = [batch.ids[rows], c["ts"][rows], c["tid"][rows], c["slot"][rows] + 1, c["parent"][rows]]
                if kind == KIND_EXIT:
                    names += ["duration", "retval"]
                    arrays += [c["duration"][rows], c["retval"][rows]]
                else:
                    names.append("args")
                    arrays.append(np.zeros(len(rows), np.int64))
                matrix = np.stack(arrays, axis=1)
                values: list[Any] = matrix.ravel().tolist()
                if kind == KIND_ENTER:  # every enter keeps PARAMS words here
                    blobs = batch.words.reshape(-1, PARAMS).view(np.dtype((np.void, 8 * PARAMS))).ravel()
                    values[len(names) - 1::len(names)] = blobs.tolist()
                insert_group(conn, ColumnGroup(tuple(names), (("session", 1), ("kind", kind), ("pid", PID)), values))
            conn.execute("COMMIT")

    def settle(self) -> None:
        pass

    def stored(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM events WHERE session = 1").fetchone()[0])

    def query(self, flt: Filter, offset: int) -> tuple[int, list[EventRow]]:
        conn = self.conn
        conn.execute("BEGIN")
        try:
            def latest() -> int:
                return int(conn.execute("SELECT max(ts) FROM events WHERE session = 1").fetchone()[0] or 0)

            keys = None
            if flt.function_contains is not None or flt.function_equals is not None:
                sql, arg = (("instr(name, ?) > 0", flt.function_contains) if flt.function_contains is not None
                            else ("name = ?", flt.function_equals))
                keys = [r[0] for r in conn.execute(f"SELECT key FROM functions WHERE {sql}", (arg,))]
            tids = None
            if flt.thread_contains is not None:
                tids = np.array([r[0] for r in conn.execute(
                    "SELECT tid FROM threads WHERE session = 1 AND instr(name, ?) > 0", (flt.thread_contains,))])
            where = _sql_where(flt, keys, tids, latest)
            total = int(conn.execute(f"SELECT count(*) FROM events WHERE {where}").fetchone()[0])
            rows = conn.execute(
                "SELECT e.id, e.ts, e.kind, e.pid, e.tid, e.parent, e.duration, e.retval, e.sampled, e.args, "
                "f.name, f.raw, f.file, f.line, f.signature, f.runtime, t.name FROM "
                f"(SELECT * FROM events WHERE {where} ORDER BY ts, id LIMIT {PAGE} OFFSET {offset}) AS e "
                "LEFT JOIN functions f ON f.key = e.func "
                "LEFT JOIN threads t ON t.session = e.session AND t.pid = e.pid AND t.tid = e.tid ORDER BY e.ts, e.id"
            ).fetchall()
        finally:
            conn.execute("COMMIT")
        out = [_event_row(r[0], r[1], r[2], r[3], r[4], -1 if r[5] is None else r[5], r[6] if r[2] == KIND_EXIT
                          else None, r[7] if r[2] == KIND_EXIT else None, r[8] or 0, r[9], r[10:16], r[16])
               for r in rows]
        return total, out

    def extra(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        self.conn.close()


# ---- the harness ------------------------------------------------------------------------------------------


@dataclass
class Settings:
    sizes: list[int]
    options: list[str]
    runs: int
    chunk: int
    segment_rows: int
    duckdb_append_rows: int
    duckdb_threads: int
    lean_max: int
    fsync: bool
    base: Path


def make_store(option: str, directory: Path, settings: Settings) -> Store:
    if option == "a":
        return CurrentStore(directory)
    if option == "b":
        return SegmentsOption(directory, settings.segment_rows, settings.fsync)
    if option == "c":
        return DuckOption(directory, settings.duckdb_append_rows, settings.duckdb_threads)
    if option in ("d", "e"):
        return LeanSqlite(directory, clustered=option == "e")
    raise ValueError(f"unknown option {option!r}: use a, b, c, d or e")


def disk_bytes(directory: Path) -> int:
    """Bytes allocated under `directory` (the current store's fixed disk-full reserve file left out)."""
    total = 0
    for root, _dirs, files in os.walk(directory):
        for name in files:
            if not name.endswith("-reserve"):
                total += os.stat(os.path.join(root, name)).st_blocks * 512
    return total


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[max(0, math.ceil(len(ordered) * q) - 1)]


def time_query(store: Store, workload: Workload, flt: Filter, runs: int) -> dict[str, float]:
    total, page = workload.expected(flt)
    offset = max(0, total - PAGE) if flt.last_page else 0
    began = time.perf_counter()
    got, rows = store.query(flt, offset)
    first = time.perf_counter() - began
    if got != total:
        raise AssertionError(f"{store.label}, {flt.name}: totalCount {got}, expected {total}")
    if [r.ts for r in rows] != page:
        raise AssertionError(f"{store.label}, {flt.name}: the page is not the expected {len(page)} events")
    if first > SLOW_QUERY_S:
        runs = max(3, min(runs, int(SLOW_QUERY_BUDGET_S / first)))
    samples = []
    for _ in range(runs):
        began = time.perf_counter()
        store.query(flt, offset)
        samples.append((time.perf_counter() - began) * 1000)
    return {"p50_ms": statistics.median(samples), "p95_ms": percentile(samples, 0.95), "runs": runs,
            "first_ms": first * 1000, "total": total}


def run_option(option: str, settings: Settings) -> dict[str, Any]:
    directory = Path(tempfile.mkdtemp(prefix=f"option-{option}-", dir=settings.base))
    sizes = [s for s in settings.sizes if option not in ("d", "e") or s <= settings.lean_max]
    workload = Workload(min(settings.chunk, max(sizes)))
    store = make_store(option, directory, settings)
    stages: list[dict[str, Any]] = []
    try:
        for size in sizes:
            began, cpu_began, main_began = time.perf_counter(), time.process_time(), time.thread_time()
            gen_wall = gen_cpu = 0.0
            start = workload.produced
            while workload.produced < size:
                g0, c0 = time.perf_counter(), time.thread_time()
                batches = workload.next_chunk(min(workload.chunk, size - workload.produced))
                gen_wall += time.perf_counter() - g0
                gen_cpu += time.thread_time() - c0
                store.ingest(batches)
                del batches
                store.settle()
            wall = time.perf_counter() - began - gen_wall
            cpu = time.process_time() - cpu_began - gen_cpu
            main_cpu = time.thread_time() - main_began - gen_cpu
            stored = store.stored()
            if stored != workload.produced:
                raise AssertionError(f"{store.label}: {stored} events stored of {workload.produced} (unaccounted)")
            added = size - start
            disk = disk_bytes(directory)
            stage: dict[str, Any] = {
                "events": size, "added": added, "ingest_wall_s": wall, "ingest_cpu_s": cpu,
                "events_per_s": added / wall, "events_per_cpu_s": added / cpu, "cpu_s_per_million": cpu / added * 1e6,
                "main_thread_cpu_s_per_million": main_cpu / added * 1e6,
                "unaccounted": workload.produced - stored, "disk_bytes": disk, "bytes_per_event": disk / size,
                "load_average": os.getloadavg()[0], "queries": {},
            }
            print(f"  {size:>12,} events: ingest {added / wall:>11,.0f} ev/s wall, {added / cpu:>11,.0f} ev/s per "
                  f"CPU-second ({cpu / added * 1e6:.2f} CPU-s per M, {main_cpu / added * 1e6:.2f} on the feeding "
                  f"thread), {disk / size:.1f} B/event, load {stage['load_average']:.1f}", file=sys.stderr)
            for flt in workload.filters:
                stats = time_query(store, workload, flt, settings.runs)
                stage["queries"][flt.name] = stats
                print(f"      {flt.name:28s} p50 {stats['p50_ms']:9.2f} ms  p95 {stats['p95_ms']:9.2f} ms  "
                      f"({int(stats['runs'])} runs)  total {int(stats['total']):>11,}", file=sys.stderr)
            stages.append(stage)
        extra = store.extra()
    finally:
        store.close()
        shutil.rmtree(directory, ignore_errors=True)
    if option == "b" and extra["recovered_events"] != workload.produced:
        raise AssertionError(f"recovered {extra['recovered_events']} events of {workload.produced} from the files")
    return {"label": store.label, "stages": stages, "extra": extra,
            "max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def print_tables(results: dict[str, Any]) -> None:
    for result in results.values():
        print(f"\n### {result['label']}")
        stages = result["stages"]
        print("| | " + " | ".join(f"{s['events']:,}" for s in stages) + " |")
        print("|---|" + "---:|" * len(stages))
        for name, fmt in (("events_per_s", "{:,.0f}"), ("events_per_cpu_s", "{:,.0f}"),
                          ("cpu_s_per_million", "{:.2f}"), ("bytes_per_event", "{:.1f}")):
            print(f"| {name} | " + " | ".join(fmt.format(s[name]) for s in stages) + " |")
        for flt in stages[0]["queries"]:
            cells = []
            for s in stages:
                q = s["queries"][flt]
                cells.append(f"{q['p50_ms']:.2f} / {q['p95_ms']:.2f}" + ("" if q["runs"] >= 15 else
                                                                         f" ({int(q['runs'])} runs)"))
            print(f"| {flt} p50 / p95 ms | " + " | ".join(cells) + " |")
        if result["extra"]:
            print(f"extra: {json.dumps(result['extra'])}")
        print(f"max RSS: {result['max_rss_mib']:.0f} MiB")


def parse(argv: list[str]) -> tuple[Settings, Path | None]:
    parser = argparse.ArgumentParser(prog="python -m bench.storage_options", description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, nargs="+", default=[1_000_000, 10_000_000, 50_000_000],
                        help="stored-event counts at which to measure (ascending; one stream grows through them)")
    parser.add_argument("--options", default="a,b,c,d,e", help="which options, comma-separated (a b c d e)")
    parser.add_argument("--runs", type=int, default=15, help="timed runs per query (after one checked run)")
    parser.add_argument("--segment-rows", type=int, default=1 << 20)
    parser.add_argument("--no-fsync", action="store_true", help="b: seal segments without fsync")
    parser.add_argument("--duckdb-append-rows", type=int, default=65_536)
    parser.add_argument("--duckdb-threads", type=int, default=1)
    parser.add_argument("--lean-max", type=int, default=10_000_000, help="largest size for d and e")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, a few seconds: checks the code, not figures")
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()), help="where the stores go")
    args = parser.parse_args(argv)
    sizes = sorted(args.events)
    chunk, rows, runs = 1_000_000, args.segment_rows, args.runs
    if args.quick:
        sizes, chunk, rows, runs = [20_000, 60_000], 20_000, 16_384, 5
    options = [o.strip() for o in args.options.split(",") if o.strip()]
    if "c" in options and importlib.util.find_spec("duckdb") is None:
        print("duckdb is not installed (scripts/bench-deps.sh installs it): option c skipped", file=sys.stderr)
        options.remove("c")
    return Settings(sizes, options, runs, chunk, rows, args.duckdb_append_rows, args.duckdb_threads,
                    args.lean_max, not args.no_fsync, args.dir), args.json


def main(argv: list[str]) -> None:
    settings, json_path = parse(argv)
    gc.set_threshold(*GC_THRESHOLDS)  # as the daemon runs (service.py)
    base = Path(tempfile.mkdtemp(prefix="strobe-storage-options-", dir=settings.base))
    settings.base = base
    results: dict[str, Any] = {}
    try:
        for option in settings.options:
            print(f"· option {option}", file=sys.stderr)
            gc.collect()
            results[option] = run_option(option, settings)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print_tables(results)
    if json_path is not None:
        json_path.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
