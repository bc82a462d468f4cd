"""Timeline queries: parse_time, every EventFilter field, paging and the wire format."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

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
from strobe.store.schema import EVENT_COLUMNS, EventKind, connect
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


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Data:
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
