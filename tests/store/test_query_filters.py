"""Every EventFilter field, alone and combined, and paging, against the shared data set."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from tests.store.query_dataset import (
    ALL_MAIN,
    CRASH,
    ENTER,
    EXIT,
    MS,
    STDERR,
    STDOUT,
    Data,
    S,
    check,
    names,
    run,
)

from strobe.store.query import (
    UNSET,
    EventFilter,
    TextMatch,
    parse_time,
)
from strobe.store.schema import EventKind, connect


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
