"""The data set the timeline-query tests share: two sessions of one program with known events, stored
once per module both with and without the count tables ("scanned" / "counted"), and helpers to query it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.mcp.wire_pages import WirePage, query_wire

from strobe.store import counts
from strobe.store import sessions as store_sessions
from strobe.store.query import EventFilter, install_functions
from strobe.store.schema import EVENT_COLUMNS, EventKind, connect
from strobe.store.writer import Writer

TIMEOUT = 10
S = 1_000_000_000  # ns per second
MS = 1_000_000

ENTER, EXIT = EventKind.FUNCTION_ENTER, EventKind.FUNCTION_EXIT
STDOUT, STDERR, CRASH = EventKind.STDOUT, EventKind.STDERR, EventKind.CRASH


# ---- data set ------------------------------------------------------------------------------------

FUNCTIONS = [
    # key, name, raw, file, line
    (1, "parse_config", "_Z12parse_configv", "/proj/src/config.c", 10),
    (2, "parse_args", None, "/proj/src/main.c", 20),
    (3, "main", None, "/proj/src/main.c", 5),
    (4, "config_reload", None, "/proj/src/config.c", 40),
    (5, "libc_helper", None, None, None),
]


@dataclass(frozen=True)
class Ev:
    name: str
    ts: int
    kind: EventKind
    pid: int | None = 100
    tid: int | None = None
    func: int | None = None
    parent: str | None = None
    duration: int | None = None
    retval: Any = None
    sampled: int | None = None
    text: str | None = None
    args: str | None = None
    extra: str | None = None


# Session "main": pids 100 and 200. Threads (100,1) main, (100,2) worker-1, (100,3) io, (200,7) worker-2.
MAIN_EVENTS = [
    Ev("e1", 500 * MS, ENTER, tid=1, func=3),
    Ev("e2", 1 * S, STDOUT, text="starting\n"),
    Ev("e3", 1500 * MS, ENTER, tid=1, func=2, parent="e1"),
    Ev("e4", 2 * S, EXIT, tid=1, func=2, parent="e1", duration=500 * MS, retval=0, sampled=0),
    Ev("e5", 2500 * MS, ENTER, tid=2, func=1, args='{"path":"/etc/x"}'),
    Ev("e6", 3 * S, EXIT, tid=2, func=1, duration=500 * MS, retval=16),
    Ev("e7", 3500 * MS, EXIT, tid=3, func=4, duration=10 * MS, retval="0x10"),
    Ev("e8", 4 * S, EXIT, pid=200, tid=7, func=5, duration=2 * S, retval='{"a":1,"b":[1,2]}'),
    Ev("e9", 4500 * MS, EXIT, tid=1, func=3, duration=4 * S, retval=None),
    Ev("e10", 5 * S, STDERR, pid=200, text="oops\n"),
    Ev("e11", 5500 * MS, EXIT, pid=200, tid=7, func=2, duration=100, retval=1, sampled=1),
    Ev("e12", 6 * S, CRASH, pid=200, tid=7, extra='{"signal":"SIGSEGV","watchValues":{"x":1}}'),
    Ev("e13", 6500 * MS, EXIT, tid=2, func=1, duration=1 * MS, retval="hello"),
    Ev("e14", 7 * S, EXIT, tid=1, func=3, duration=0, retval=2.5),
]

# Session "other": same shapes at later times; none of it may ever show up in a "main" query.
OTHER_EVENTS = [
    Ev("o1", 100 * S, STDOUT, text="starting\n"),
    Ev("o2", 101 * S, EXIT, tid=2, func=1, duration=10 * S, retval=16),
    Ev("o3", 102 * S, EXIT, tid=3, func=2, duration=10 * S, retval=None),
    Ev("o4", 103 * S, EXIT, pid=200, tid=7, func=4, duration=10 * S, retval='{"a":1,"b":[1,2]}'),
    Ev("o5", 104 * S, EXIT, tid=1, func=3, duration=10 * S, retval=1),
    Ev("o6", 105 * S, EXIT, tid=1, func=3, duration=10 * S, retval="0x10"),
]


@dataclass(frozen=True)
class Data:
    db: Path
    main_key: int
    main_id: str
    other_key: int
    other_id: str
    ids: dict[str, int]  # event name -> events.id


def _rows(session: int, events: list[Ev], first_id: int) -> list[tuple[Any, ...]]:
    ids = {ev.name: first_id + i for i, ev in enumerate(events)}
    out = []
    for ev in events:
        values = {
            "session": session,
            "ts": ev.ts,
            "kind": int(ev.kind),
            "pid": ev.pid,
            "tid": ev.tid,
            "func": ev.func,
            "parent": None if ev.parent is None else ids[ev.parent],
            "duration": ev.duration,
            "retval": ev.retval,
            "sampled": ev.sampled,
            "text": ev.text,
            "args": ev.args,
            "extra": ev.extra,
        }
        out.append(tuple(values[c] for c in EVENT_COLUMNS))
    return out


def _setup(conn: sqlite3.Connection) -> tuple[int, str, int, str]:
    main = store_sessions.insert_session(conn, "prog-2026-01-01-10h00", "/proj/prog", "/proj", 100, 1_000)
    other = store_sessions.insert_session(conn, "prog-2026-01-01-10h00", "/proj/prog", "/proj", 300, 2_000)
    conn.executemany("INSERT INTO functions (key, name, raw, file, line) VALUES (?, ?, ?, ?, ?)", FUNCTIONS)
    conn.execute(
        "INSERT INTO processes (session, pid, status, started_at) VALUES (?, 200, 'running', 1500)",
        (main.key,),
    )
    conn.executemany(
        "INSERT INTO threads (session, pid, tid, name) VALUES (?, ?, ?, ?)",
        [
            (main.key, 100, 1, "main"),
            (main.key, 100, 2, "worker-1"),
            (main.key, 100, 3, "io"),
            (main.key, 200, 7, "worker-2"),
            (other.key, 100, 3, "worker-z"),  # same (pid, tid) as main's "io" thread
            (other.key, 100, 2, "worker-1"),
        ],
    )
    return main.key, main.id, other.key, other.id


@pytest.fixture(scope="module", params=["scanned", "counted"])
def data(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Data:
    """Every query test runs twice: with totals counted from the events, and from the count tables a
    writer keeps (counts.prepare here plays the writer's start-up, rebuilding them from the events)."""
    db = tmp_path_factory.mktemp("query") / "strobe.db"
    writer = Writer(db)
    writer.start()
    try:
        main_key, main_id, other_key, other_id = writer.call(_setup).result(timeout=TIMEOUT)
        # A fresh store: ids start at 1, each session's rows get one contiguous range in submission order.
        writer.submit_rows(_rows(main_key, MAIN_EVENTS, 1))
        writer.call(lambda c: None).result(timeout=TIMEOUT)
        writer.submit_rows(_rows(other_key, OTHER_EVENTS, len(MAIN_EVENTS) + 1))
        writer.call(lambda c: None).result(timeout=TIMEOUT)
    finally:
        writer.close()
    ids = {ev.name: i + 1 for i, ev in enumerate(MAIN_EVENTS + OTHER_EVENTS)}
    conn = connect(db, readonly=True)
    try:
        stored = dict(conn.execute("SELECT ts, id FROM events WHERE session = ?", (main_key,)).fetchall())
    finally:
        conn.close()
    assert stored == {ev.ts: ids[ev.name] for ev in MAIN_EVENTS}
    if request.param == "counted":
        writable = connect(db)
        try:
            counts.prepare(writable)
            assert counts.maintained(writable)
        finally:
            writable.close()
    return Data(db, main_key, main_id, other_key, other_id, ids)


@pytest.fixture
def conn(data: Data) -> Iterator[sqlite3.Connection]:
    c = connect(data.db, readonly=True)
    install_functions(c)
    try:
        yield c
    finally:
        c.close()


def run(
    conn: sqlite3.Connection,
    data: Data,
    flt: EventFilter,
    *,
    limit: int = 500,
    offset: int = 0,
    verbose: bool = False,
    other: bool = False,
) -> WirePage:
    if other:
        return query_wire(
            conn, data.other_key, data.other_id, flt, limit=limit, offset=offset, verbose=verbose
        )
    return query_wire(conn, data.main_key, data.main_id, flt, limit=limit, offset=offset, verbose=verbose)


def names(data: Data, page: WirePage) -> list[str]:
    by_wire = {f"{data.main_id}-{i}": n for n, i in data.ids.items()}
    by_wire.update({f"{data.other_id}-{i}": n for n, i in data.ids.items()})
    return [by_wire[e["id"]] for e in page.events]


def check(conn: sqlite3.Connection, data: Data, flt: EventFilter, expected: list[str]) -> None:
    page = run(conn, data, flt)
    assert names(data, page) == expected
    assert page.total_count == len(expected)
    assert page.has_more is False


ALL_MAIN = [ev.name for ev in MAIN_EVENTS]
