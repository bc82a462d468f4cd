"""Timeline queries: parse_time, every EventFilter field, paging and the wire format."""

from __future__ import annotations

import importlib.util
import json
import random
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from strobe.store import counts
from strobe.store import query as query_module
from strobe.store import sessions as store_sessions
from strobe.store.query import (
    UNSET,
    EventFilter,
    QueryPage,
    TextMatch,
    TimeBound,
    canonical_json,
    install_functions,
    parse_time,
    query_events,
)
from strobe.store.schema import EVENT_COLUMNS, TIME_BUCKET_SHIFT, EventKind, connect
from strobe.store.writer import Writer

TIMEOUT = 10
S = 1_000_000_000  # ns per second
MS = 1_000_000

ENTER, EXIT = EventKind.FUNCTION_ENTER, EventKind.FUNCTION_EXIT
STDOUT, STDERR, CRASH = EventKind.STDOUT, EventKind.STDERR, EventKind.CRASH

# ---- parse_time ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, TimeBound(0, relative=False)),
        (1_500_000_000, TimeBound(1_500_000_000, relative=False)),
        (-5, TimeBound(-5, relative=True)),
        ("2s", TimeBound(2 * S, relative=False)),
        ("1.5s", TimeBound(1_500_000_000, relative=False)),
        ("-5s", TimeBound(-5 * S, relative=True)),
        ("-500ms", TimeBound(-500 * MS, relative=True)),
        ("-1m", TimeBound(-60 * S, relative=True)),
        ("1h", TimeBound(3600 * S, relative=False)),
        ("250us", TimeBound(250_000, relative=False)),
        ("250µs", TimeBound(250_000, relative=False)),
        ("42ns", TimeBound(42, relative=False)),
        ("42", TimeBound(42, relative=False)),
        ("-42", TimeBound(-42, relative=True)),
        (" - 3 s ", TimeBound(-3 * S, relative=True)),
    ],
)
def test_parse_time(value: int | str, expected: TimeBound) -> None:
    assert parse_time(value) == expected


@pytest.mark.parametrize("value", ["", "abc", "5x", "--5s", "5 sec", "1e3s", "s", "+5s", "1.s"])
def test_parse_time_rejects_bad_strings(value: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_time(value)
    message = str(info.value)
    assert f"'{value}' is not a time" in message
    # The message shows the accepted forms.
    assert '"2s"' in message and '"-5s"' in message and "nanoseconds" in message


def test_time_bound_resolve() -> None:
    assert TimeBound(-5 * S, relative=True).resolve(20 * S) == 15 * S
    assert TimeBound(5 * S, relative=False).resolve(20 * S) == 5 * S


def test_parse_time_decimal_is_exact() -> None:
    assert parse_time("1.001s").ns == 1_001_000_000
    assert parse_time("-1.001s").ns == -1_001_000_000


def test_canonical_json_is_key_sorted_and_compact() -> None:
    assert canonical_json({"b": [1, 2], "a": {"y": 1, "x": None}}) == '{"a":{"x":null,"y":1},"b":[1,2]}'


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
) -> QueryPage:
    if other:
        return query_events(
            conn, data.other_key, data.other_id, flt, limit=limit, offset=offset, verbose=verbose
        )
    return query_events(conn, data.main_key, data.main_id, flt, limit=limit, offset=offset, verbose=verbose)


def names(data: Data, page: QueryPage) -> list[str]:
    by_wire = {f"{data.main_id}-{i}": n for n, i in data.ids.items()}
    by_wire.update({f"{data.other_id}-{i}": n for n, i in data.ids.items()})
    return [by_wire[e["id"]] for e in page.events]


def check(conn: sqlite3.Connection, data: Data, flt: EventFilter, expected: list[str]) -> None:
    page = run(conn, data, flt)
    assert names(data, page) == expected
    assert page.total_count == len(expected)
    assert page.has_more is False


ALL_MAIN = [ev.name for ev in MAIN_EVENTS]


def test_session_ids_are_distinct(data: Data) -> None:
    assert data.main_id == "prog-2026-01-01-10h00"
    assert data.other_id == "prog-2026-01-01-10h00-2"


def test_no_filter_returns_the_session_in_time_order(conn: sqlite3.Connection, data: Data) -> None:
    check(conn, data, EventFilter(), ALL_MAIN)
    page = run(conn, data, EventFilter(), other=True)
    assert names(data, page) == ["o1", "o2", "o3", "o4", "o5", "o6"]


# ---- kind ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (STDOUT, ["e2"]),
        (STDERR, ["e10"]),
        (CRASH, ["e12"]),
        (ENTER, ["e1", "e3", "e5"]),
        (EXIT, ["e4", "e6", "e7", "e8", "e9", "e11", "e13", "e14"]),
        (EventKind.VARIABLE_SNAPSHOT, []),
    ],
)
def test_kind(conn: sqlite3.Connection, data: Data, kind: EventKind, expected: list[str]) -> None:
    check(conn, data, EventFilter(kind=kind), expected)


# ---- function / source file ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("match", "expected"),
    [
        (TextMatch(equals="parse_args"), ["e3", "e4", "e11"]),
        (TextMatch(equals="parse"), []),
        (TextMatch(contains="config"), ["e5", "e6", "e7", "e13"]),
        (TextMatch(contains="CONFIG"), []),
        (TextMatch(matches=r"^parse_(args|config)$"), ["e3", "e4", "e5", "e6", "e11", "e13"]),
        (TextMatch(matches=r"reload$"), ["e7"]),
        (TextMatch(matches=r"^main"), ["e1", "e9", "e14"]),
        (TextMatch(contains="parse", matches=r"args"), ["e3", "e4", "e11"]),
    ],
)
def test_function(conn: sqlite3.Connection, data: Data, match: TextMatch, expected: list[str]) -> None:
    check(conn, data, EventFilter(function=match), expected)


@pytest.mark.parametrize(
    ("match", "expected"),
    [
        (TextMatch(equals="/proj/src/main.c"), ["e1", "e3", "e4", "e9", "e11", "e14"]),
        (TextMatch(equals="main.c"), []),
        (TextMatch(contains="config.c"), ["e5", "e6", "e7", "e13"]),
        (TextMatch(contains="/proj/src/"), ["e1", "e3", "e4", "e5", "e6", "e7", "e9", "e11", "e13", "e14"]),
    ],
)
def test_source_file(conn: sqlite3.Connection, data: Data, match: TextMatch, expected: list[str]) -> None:
    check(conn, data, EventFilter(source_file=match), expected)


def test_function_and_source_file_apply_to_the_same_function(conn: sqlite3.Connection, data: Data) -> None:
    flt = EventFilter(function=TextMatch(contains="parse"), source_file=TextMatch(contains="config.c"))
    check(conn, data, flt, ["e5", "e6", "e13"])


def test_function_matches_needs_install_functions(data: Data) -> None:
    plain = connect(data.db, readonly=True)
    try:
        with pytest.raises(sqlite3.OperationalError):
            run(plain, data, EventFilter(function=TextMatch(matches="x")))
    finally:
        plain.close()


# ---- return value --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (16, ["e6"]),
        (0, ["e4"]),
        (True, ["e11"]),
        (False, ["e4"]),
        (2.5, ["e14"]),
        ("0x10", ["e6", "e7"]),  # integer 16 and the pointer string "0x10"
        ("0X10", ["e6", "e7"]),
        ("16", ["e6"]),
        ("hello", ["e13"]),
        ({"b": [1, 2], "a": 1}, ["e8"]),  # compared as canonical JSON
        ({"a": 1}, []),
        (None, ["e9"]),  # only exit events: enter events have no return value either
        (17, []),
    ],
)
def test_return_equals(conn: sqlite3.Connection, data: Data, value: Any, expected: list[str]) -> None:
    check(conn, data, EventFilter(return_equals=value), expected)


def test_return_equals_unset_is_no_filter(conn: sqlite3.Connection, data: Data) -> None:
    check(conn, data, EventFilter(return_equals=UNSET), ALL_MAIN)


def test_return_is_null(conn: sqlite3.Connection, data: Data) -> None:
    check(conn, data, EventFilter(return_is_null=True), ["e9"])
    check(conn, data, EventFilter(return_is_null=False), ["e4", "e6", "e7", "e8", "e11", "e13", "e14"])


# ---- thread name ---------------------------------------------------------------------------------


def test_thread_name_contains(conn: sqlite3.Connection, data: Data) -> None:
    # (100,3) is "io" here; the other session calls its (100,3) "worker-z", which must not count.
    check(conn, data, EventFilter(thread_name_contains="worker"), ["e5", "e6", "e8", "e11", "e12", "e13"])
    check(conn, data, EventFilter(thread_name_contains="worker-2"), ["e8", "e11", "e12"])
    check(conn, data, EventFilter(thread_name_contains="main"), ["e1", "e3", "e4", "e9", "e14"])
    check(conn, data, EventFilter(thread_name_contains="nope"), [])


# ---- time ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("time_from", "time_to", "expected"),
    [
        ("2s", None, ["e4", "e5", "e6", "e7", "e8", "e9", "e10", "e11", "e12", "e13", "e14"]),
        (None, "3s", ["e1", "e2", "e3", "e4", "e5", "e6"]),
        ("2s", "3s", ["e4", "e5", "e6"]),
        (2 * S + 1, 3 * S - 1, ["e5"]),
        (0, 500 * MS, ["e1"]),
        # Relative to the latest event of this session (7 s), not of the whole store (105 s).
        ("-1s", None, ["e12", "e13", "e14"]),
        (-1 * S, None, ["e12", "e13", "e14"]),
        ("-500ms", None, ["e13", "e14"]),
        (None, "-5s", ["e1", "e2", "e3", "e4"]),
        ("-2s", "-1s", ["e10", "e11", "e12"]),
        ("-1m", None, ALL_MAIN),
        ("5s", "-1s", ["e10", "e11", "e12"]),
    ],
)
def test_time_range(
    conn: sqlite3.Connection,
    data: Data,
    time_from: int | str | None,
    time_to: int | str | None,
    expected: list[str],
) -> None:
    flt = EventFilter(
        time_from=None if time_from is None else parse_time(time_from),
        time_to=None if time_to is None else parse_time(time_to),
    )
    check(conn, data, flt, expected)


def test_relative_time_in_other_session_uses_its_latest_event(conn: sqlite3.Connection, data: Data) -> None:
    page = run(conn, data, EventFilter(time_from=parse_time("-1s")), other=True)
    assert names(data, page) == ["o5", "o6"]


# ---- duration / pid ------------------------------------------------------------------------------


def test_min_duration(conn: sqlite3.Connection, data: Data) -> None:
    check(conn, data, EventFilter(min_duration_ns=500 * MS), ["e4", "e6", "e8", "e9"])
    check(conn, data, EventFilter(min_duration_ns=0), ["e4", "e6", "e7", "e8", "e9", "e11", "e13", "e14"])
    check(conn, data, EventFilter(min_duration_ns=4 * S + 1), [])


def test_pid(conn: sqlite3.Connection, data: Data) -> None:
    check(conn, data, EventFilter(pid=200), ["e8", "e10", "e11", "e12"])
    check(conn, data, EventFilter(pid=300), [])


def test_filters_combine_with_and(conn: sqlite3.Connection, data: Data) -> None:
    flt = EventFilter(
        kind=EXIT, function=TextMatch(contains="parse"), pid=100, min_duration_ns=1, time_to=parse_time("6s")
    )
    check(conn, data, flt, ["e4", "e6"])


# ---- paging --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "offset", "expected", "has_more"),
    [
        (3, 0, ["e1", "e2", "e3"], True),
        (3, 3, ["e4", "e5", "e6"], True),
        (3, 10, ["e11", "e12", "e13"], True),
        (3, 11, ["e12", "e13", "e14"], False),
        (3, 12, ["e13", "e14"], False),
        (3, 14, [], False),
        (3, 50, [], False),
        (14, 0, ALL_MAIN, False),
        (13, 0, ALL_MAIN[:13], True),
    ],
)
def test_paging(
    conn: sqlite3.Connection, data: Data, limit: int, offset: int, expected: list[str], has_more: bool
) -> None:
    page = run(conn, data, EventFilter(), limit=limit, offset=offset)
    assert names(data, page) == expected
    assert page.total_count == 14
    assert page.has_more is has_more


def test_total_count_counts_filtered_events(conn: sqlite3.Connection, data: Data) -> None:
    page = run(conn, data, EventFilter(kind=EXIT), limit=2, offset=1)
    assert names(data, page) == ["e6", "e7"]
    assert page.total_count == 8
    assert page.has_more is True


def test_pids_listed_only_for_multi_process_sessions(conn: sqlite3.Connection, data: Data) -> None:
    assert run(conn, data, EventFilter(), limit=1).pids == [100, 200]
    assert run(conn, data, EventFilter(), limit=1, other=True).pids == []


# ---- wire format ---------------------------------------------------------------------------------


def wire(conn: sqlite3.Connection, data: Data, name: str, *, verbose: bool) -> dict[str, Any]:
    ts = next(ev.ts for ev in MAIN_EVENTS if ev.name == name)
    page = run(conn, data, EventFilter(time_from=parse_time(ts), time_to=parse_time(ts)), verbose=verbose)
    assert len(page.events) == 1
    return page.events[0]


def eid(data: Data, name: str) -> str:
    return f"{data.main_id}-{data.ids[name]}"


def test_summary_function_exit(conn: sqlite3.Connection, data: Data) -> None:
    assert wire(conn, data, "e4", verbose=False) == {
        "id": eid(data, "e4"),
        "eventType": "function_exit",
        "timestampNs": 2 * S,
        "function": "parse_args",
        "sourceFile": "/proj/src/main.c",
        "line": 20,
        "durationNs": 500 * MS,
        "returnType": "int",
    }


def test_summary_function_enter(conn: sqlite3.Connection, data: Data) -> None:
    assert wire(conn, data, "e5", verbose=False) == {
        "id": eid(data, "e5"),
        "eventType": "function_enter",
        "timestampNs": 2500 * MS,
        "function": "parse_config",
        "sourceFile": "/proj/src/config.c",
        "line": 10,
    }


def test_summary_output_event(conn: sqlite3.Connection, data: Data) -> None:
    assert wire(conn, data, "e2", verbose=False) == {
        "id": eid(data, "e2"),
        "eventType": "stdout",
        "timestampNs": 1 * S,
        "text": "starting\n",
    }


def test_summary_omits_missing_function_fields(conn: sqlite3.Connection, data: Data) -> None:
    assert wire(conn, data, "e8", verbose=False) == {
        "id": eid(data, "e8"),
        "eventType": "function_exit",
        "timestampNs": 4 * S,
        "function": "libc_helper",
        "durationNs": 2 * S,
        "returnType": "object",
    }


@pytest.mark.parametrize(
    ("name", "return_type"),
    [("e6", "int"), ("e7", "pointer"), ("e8", "object"), ("e9", "null"), ("e13", "string"), ("e14", "float")],
)
def test_return_type(conn: sqlite3.Connection, data: Data, name: str, return_type: str) -> None:
    assert wire(conn, data, name, verbose=False)["returnType"] == return_type


def test_verbose_function_exit(conn: sqlite3.Connection, data: Data) -> None:
    assert wire(conn, data, "e4", verbose=True) == {
        "id": eid(data, "e4"),
        "eventType": "function_exit",
        "timestampNs": 2 * S,
        "function": "parse_args",
        "sourceFile": "/proj/src/main.c",
        "line": 20,
        "durationNs": 500 * MS,
        "returnType": "int",
        "threadId": 1,
        "threadName": "main",
        "pid": 100,
        "parentEventId": eid(data, "e1"),
        "returnValue": 0,
        "sampled": False,
    }


def test_verbose_function_enter(conn: sqlite3.Connection, data: Data) -> None:
    assert wire(conn, data, "e5", verbose=True) == {
        "id": eid(data, "e5"),
        "eventType": "function_enter",
        "timestampNs": 2500 * MS,
        "function": "parse_config",
        "functionRaw": "_Z12parse_configv",
        "sourceFile": "/proj/src/config.c",
        "line": 10,
        "threadId": 2,
        "threadName": "worker-1",
        "pid": 100,
        "arguments": {"path": "/etc/x"},
    }


def test_verbose_decodes_json_return_value(conn: sqlite3.Connection, data: Data) -> None:
    event = wire(conn, data, "e8", verbose=True)
    assert event["returnValue"] == {"a": 1, "b": [1, 2]}
    assert event["threadName"] == "worker-2"
    assert event["pid"] == 200
    assert "parentEventId" not in event and "sampled" not in event and "arguments" not in event


def test_verbose_sampled_true_and_pointer_value(conn: sqlite3.Connection, data: Data) -> None:
    assert wire(conn, data, "e11", verbose=True)["sampled"] is True
    assert wire(conn, data, "e7", verbose=True)["returnValue"] == "0x10"


def test_verbose_null_return_value_is_omitted(conn: sqlite3.Connection, data: Data) -> None:
    event = wire(conn, data, "e9", verbose=True)
    assert "returnValue" not in event
    assert event["returnType"] == "null"


def test_verbose_crash_merges_extra(conn: sqlite3.Connection, data: Data) -> None:
    assert wire(conn, data, "e12", verbose=True) == {
        "id": eid(data, "e12"),
        "eventType": "crash",
        "timestampNs": 6 * S,
        "threadId": 7,
        "threadName": "worker-2",
        "pid": 200,
        "watchValues": {"x": 1},
        "signal": "SIGSEGV",
    }


def test_verbose_output_event(conn: sqlite3.Connection, data: Data) -> None:
    assert wire(conn, data, "e10", verbose=True) == {
        "id": eid(data, "e10"),
        "eventType": "stderr",
        "timestampNs": 5 * S,
        "text": "oops\n",
        "pid": 200,
    }


def test_wire_events_are_json_serialisable(conn: sqlite3.Connection, data: Data) -> None:
    page = run(conn, data, EventFilter(), verbose=True)
    assert len(json.loads(json.dumps(page.events))) == 14


# ---- a text return value that looks like JSON ---------------------------------------------------


def test_text_return_value_that_is_not_json(tmp_path: Path) -> None:
    db = tmp_path / "strobe.db"
    writer = Writer(db)
    writer.start()
    try:
        record = writer.call(lambda c: store_sessions.insert_session(c, "p", "/p", "/proj", 1, 0)).result(
            timeout=TIMEOUT
        )
        values: dict[str, Any] = dict.fromkeys(EVENT_COLUMNS)
        values.update(session=record.key, ts=1, kind=int(EXIT), pid=1, retval="[INFO] ready")
        writer.submit_rows([tuple(values[c] for c in EVENT_COLUMNS)])
        writer.call(lambda c: None).result(timeout=TIMEOUT)
    finally:
        writer.close()
    conn = connect(db, readonly=True)
    install_functions(conn)
    try:
        page = query_events(conn, record.key, record.id, EventFilter(), limit=10, offset=0, verbose=True)
    finally:
        conn.close()
    assert page.events[0]["returnType"] == "string"
    assert page.events[0]["returnValue"] == "[INFO] ready"


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
            page = query_events(conn, 1, "s1", flt, limit=limit, offset=offset, verbose=False)
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
