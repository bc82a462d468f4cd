"""TraceIngest: binary records to rows with parents, durations, thread names and loss counters."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import numpy as np
import pytest
from tests.mcp.wire_pages import query_wire
from tests.store.summaries import rebuilt, summaries

from strobe.daemon.ingest import MAX_NOTE_CHARS, MAX_NOTES, SlotTable, TraceIngest
from strobe.instrument.records import (
    FLAG_JS_WATCH,
    FLAG_NATIVE_WATCH,
    FLAG_SAMPLED,
    KIND_ENTER,
    KIND_EXIT,
    KIND_WATCH,
    NO_PARENT,
    RECORD_DTYPE,
)
from strobe.store import sessions as store_sessions
from strobe.store.query import EventFilter, install_functions
from strobe.store.schema import connect
from strobe.store.writer import Writer

START = 1_000_000_000


def records(*rows: tuple[int, int, int, int, int, int, list[int]]) -> bytes:
    """(ts, tid, func slot, kind, flags, parent sequence number, registers)"""
    out = np.zeros(len(rows), dtype=RECORD_DTYPE)
    for i, (ts, tid, func, kind, flags, parent, regs) in enumerate(rows):
        out[i] = (START + ts, tid, func, kind, flags, parent, (regs + [0] * 6)[:6])
    return out.tobytes()


N = NO_PARENT


def make_ingest(writer: Writer) -> tuple[TraceIngest, int]:
    record = writer.call(lambda c: store_sessions.insert_session(c, "s", "/bin/x", "/", os.getpid(), 0)).result(10)
    keys = writer.call(
        lambda c: [
            c.execute("INSERT INTO functions (name, file, line, params) VALUES (?, 'a.c', ?, ?)", (n, i, p)).lastrowid
            for i, (n, p) in enumerate([("outer", 2), ("inner", 1)])
        ]
    ).result(10)
    ingest = TraceIngest(writer, record.key, os.getpid(), START)
    ingest.hook(0, keys[0], 2)
    ingest.hook(1, keys[1], 1)
    return ingest, record.key


def read(writer: Writer, tmp_path: Path, session: int, verbose: bool = True) -> list[dict[str, object]]:
    writer.call(lambda c: None).result(10)  # everything before is committed
    conn = connect(tmp_path / "strobe.db", readonly=True)
    install_functions(conn)
    try:
        return query_wire(conn, session, "s", EventFilter(), limit=500, offset=0, verbose=verbose).events
    finally:
        conn.close()


def test_parents_durations_and_arguments(writer: Writer, tmp_path: Path) -> None:
    ingest, session = make_ingest(writer)
    main = threading.get_native_id()
    data = records(  # sequence numbers 100..103; the agent gives each record its caller's enter
        (10, main, 0, KIND_ENTER, 0, N, [1, 2, 3]),
        (20, main, 1, KIND_ENTER, 0, 100, [-5]),
        (30, main, 1, KIND_EXIT, 0, 100, [7, 10]),
        (40, main, 0, KIND_EXIT, 0, N, [1 << 40, 30]),
    )
    ingest.on_batch(data, 4, dropped=0, sampled_out=0, threads=[(main, "main-thread")], first_seq=100)
    events = read(writer, tmp_path, session)
    outer_enter, inner_enter, inner_exit, outer_exit = events
    assert outer_enter["arguments"] == [1, 2]  # trimmed to the function's two parameters
    assert inner_enter["arguments"] == [-5]
    assert "parentEventId" not in outer_enter
    assert inner_enter["parentEventId"] == outer_enter["id"]
    assert inner_exit["parentEventId"] == outer_enter["id"]
    assert inner_exit["returnValue"] == 7 and inner_exit["durationNs"] == 10
    assert outer_exit["returnValue"] == hex(1 << 40) and outer_exit["returnType"] == "pointer"
    assert [e["timestampNs"] for e in events] == [10, 20, 30, 40]
    assert outer_enter["threadName"] == "main-thread"


def test_parents_in_earlier_batches_and_across_sequence_wrap(writer: Writer, tmp_path: Path) -> None:
    ingest, session = make_ingest(writer)
    top = 0xFFFF_FFFD  # the agent's 32-bit sequence numbers wrap: ...fffd, ...fffe, ...ffff, then 0, 1
    ingest.on_batch(records((1, 501, 0, KIND_ENTER, 0, N, []), (2, 502, 0, KIND_ENTER, 0, N, []),
                            (3, 503, 0, KIND_ENTER, 0, N, [])), 3, 0, 0, first_seq=top)
    writer.reserve_ids(5)  # another producer's ids in between: parents must still map to the right rows
    ingest.on_batch(records((4, 502, 1, KIND_ENTER, 0, top + 1, []), (5, 501, 1, KIND_ENTER, 0, top, [])), 2, 0, 0,
                    first_seq=0)
    events = read(writer, tmp_path, session)
    assert events[3]["parentEventId"] == events[1]["id"]  # tid 502's inner under tid 502's outer
    assert events[4]["parentEventId"] == events[0]["id"]


def test_sampled_flag_and_loss_counters(writer: Writer, tmp_path: Path) -> None:
    ingest, session = make_ingest(writer)
    ingest.on_batch(records((1, 9, 1, KIND_ENTER, FLAG_SAMPLED, N, [3])), 1, dropped=4, sampled_out=99)
    events = read(writer, tmp_path, session)
    assert events[0]["sampled"] is True
    conn = sqlite3.connect(tmp_path / "strobe.db")
    assert conn.execute("SELECT dropped, sampled_out FROM sessions WHERE key = ?", (session,)).fetchone() == (4, 99)
    conn.close()


def test_a_batch_with_the_wrong_size_is_refused(writer: Writer) -> None:
    ingest, _ = make_ingest(writer)
    with pytest.raises(ValueError):
        ingest.on_batch(b"\0" * 10, 1, 0, 0)


def test_records_of_every_shape_are_stored_and_summarised(writer: Writer, tmp_path: Path) -> None:
    ingest, session = make_ingest(writer)
    none_key = writer.call(
        lambda c: c.execute("INSERT INTO functions (name, params) VALUES ('noargs', 0)").lastrowid
    ).result(10)
    ingest.hook(2, none_key, 0)
    main = threading.get_native_id()
    data = records(
        (10, main, 0, KIND_ENTER, 0, N, [1, 2, 3]),  # seq 0
        (20, main, 2, KIND_ENTER, 0, 0, [9, 9]),  # no parameters: no arguments stored
        (30, main, 9, KIND_ENTER, FLAG_SAMPLED, 0, [1, 2, 3, 4, 5, 6]),  # a slot never hooked: all six registers
        (35, main, 1, 3, 0, N, [1]),  # a kind this version does not store
        (40, main, 9, KIND_EXIT, FLAG_SAMPLED, 0, [5, 10]),
        (50, main, 2, KIND_EXIT, 0, 0, [0, 30]),
        (60, main, 0, KIND_EXIT, 0, N, [-1, 50]),
    )
    ingest.on_batch(data, 7, 0, 0, first_seq=0)
    events = read(writer, tmp_path, session)
    assert [e.get("function") for e in events] == ["outer", "noargs", None, None, "noargs", "outer"]
    assert [e.get("arguments") for e in events[:3]] == [[1, 2], None, [1, 2, 3, 4, 5, 6]]
    assert [e.get("sampled") for e in events] == [None, None, True, True, None, None]
    assert [e.get("parentEventId") for e in events] == [None] + [events[0]["id"]] * 4 + [None]
    assert [e.get("returnValue") for e in events[3:]] == [5, 0, -1]
    writer.call(lambda c: None).result(10)
    conn = sqlite3.connect(tmp_path / "strobe.db")
    try:
        assert summaries(conn) == rebuilt(conn)
        assert conn.execute("SELECT count(*) FROM events WHERE kind = 3").fetchone()[0] == 0
    finally:
        conn.close()


def test_parents_across_batches_that_follow_each_other(writer: Writer, tmp_path: Path) -> None:
    ingest, session = make_ingest(writer)
    for i in range(3):  # consecutive batches: sequence numbers and ids both continue, so they share one range
        ingest.on_batch(records((10 * i + 1, 7, 0, KIND_ENTER, 0, N if i == 0 else 50, []),
                                (10 * i + 2, 7, 1, KIND_ENTER, 0, 50 + 2 * i, [])), 2, 0, 0, first_seq=50 + 2 * i)
    events = read(writer, tmp_path, session)
    assert [e.get("parentEventId") for e in events] == [
        None, events[0]["id"], events[0]["id"], events[2]["id"], events[0]["id"], events[4]["id"]
    ]
    assert len(ingest._seqs.starts) == 1


class FakeWatches:
    def native(self, mask: int, words: list[int]) -> dict[str, object]:
        return {f"n{slot}": words[slot] for slot in range(4) if mask & (1 << slot)}

    def js(self, values: dict[str, dict[str, object]]) -> dict[str, object]:
        return {f"j{k}": v.get("v") for k, v in values.items()}


def test_watch_values_join_the_call_they_were_read_for(writer: Writer, tmp_path: Path) -> None:
    ingest, session = make_ingest(writer)
    version = ingest.watches.add(FakeWatches())
    both = FLAG_NATIVE_WATCH | FLAG_JS_WATCH
    ingest.on_batch(records(
        (10, 5, 0, KIND_WATCH, 0b101, N, [7, 0, -9]),
        (10, 5, 0, KIND_ENTER, FLAG_NATIVE_WATCH, N, [1, 2]),
        (20, 5, 1, KIND_ENTER, FLAG_JS_WATCH, 101, [3]),
        (30, 5, 1, KIND_WATCH, 0b1, N, [8]),
    ), 4, 0, 0, first_seq=100, watch_values=[(102, {"4": {"v": "a"}}), (999, {})], watch_version=version)
    # The exit's native values ended the first batch: they belong to the next batch's first record.
    ingest.on_batch(records(
        (30, 5, 1, KIND_EXIT, both, 101, [0, 10]),
        (40, 5, 0, KIND_EXIT, 0, N, [0, 30]),
    ), 2, 0, 0, first_seq=104, watch_values=[(104, {"4": {"v": "b"}})], watch_version=version)
    events = read(writer, tmp_path, session)
    assert [e["eventType"] for e in events] == ["function_enter", "function_enter", "function_exit", "function_exit"]
    assert [e.get("watchValues") for e in events] == [{"n0": 7, "n2": -9}, {"j4": "a"}, {"j4": "b", "n0": 8}, None]
    assert events[1]["arguments"] == [3] and events[2]["durationNs"] == 10
    assert events[1]["parentEventId"] == events[0]["id"]


class LabelledWatches(FakeWatches):
    def __init__(self, label: str) -> None:
        self.label = label

    def native(self, mask: int, words: list[int]) -> dict[str, object]:
        return {self.label: words[0]}

    def js(self, values: dict[str, dict[str, object]]) -> dict[str, object]:
        return {}


def test_each_batch_decodes_with_the_watches_it_was_recorded_under(writer: Writer, tmp_path: Path) -> None:
    """The agent's batches and its reply to a watch change race to the host: the version stamped on each batch,
    not the order they arrive in, says which watches its values belong to."""
    ingest, session = make_ingest(writer)
    first = ingest.watches.add(LabelledWatches("first"))
    second = ingest.watches.add(LabelledWatches("second"))  # registered before any batch under it arrives
    ingest.on_batch(records((1, 5, 0, KIND_WATCH, 0b1, N, [11])), 1, 0, 0, first_seq=0, watch_version=first)
    ingest.on_batch(records((1, 5, 0, KIND_ENTER, FLAG_NATIVE_WATCH, N, []),
                            (2, 5, 0, KIND_WATCH, 0b1, N, [22]), (2, 5, 1, KIND_ENTER, FLAG_NATIVE_WATCH, 1, [])),
                    3, 0, 0, first_seq=1, watch_version=first)
    ingest.on_batch(records((3, 5, 0, KIND_WATCH, 0b1, N, [33]), (3, 5, 1, KIND_ENTER, FLAG_NATIVE_WATCH, 1, [])),
                    2, 0, 0, first_seq=4, watch_version=second)
    ingest.on_batch(records((4, 5, 0, KIND_WATCH, 0b1, N, [44]), (4, 5, 1, KIND_ENTER, FLAG_NATIVE_WATCH, 1, [])),
                    2, 0, 0, first_seq=6, watch_version=0)  # e.g. an exec()ed process's new agent
    events = read(writer, tmp_path, session)
    assert [e.get("watchValues") for e in events] == [{"first": 11}, {"first": 22}, {"second": 33}, None]


def test_a_followed_child_shares_slots_and_loss_counters_but_numbers_its_own_records(
    writer: Writer, tmp_path: Path
) -> None:
    ingest, session = make_ingest(writer)
    child = ingest.sibling(ingest.pid + 1)
    assert ingest.peers[child.pid] is child and child.table is ingest.table
    ingest.hook(2, ingest.slots[0].db_key, 2)  # hooked after the child was made: the child knows it too
    # Both processes start their sequence numbers at 0: each call's parent is found in its own process.
    ingest.on_batch(records((1, 7, 0, KIND_ENTER, 0, N, []), (2, 7, 1, KIND_ENTER, 0, 0, [])), 2, 3, 0, first_seq=0)
    child.on_batch(records((3, 8, 2, KIND_ENTER, 0, N, []), (4, 8, 1, KIND_ENTER, 0, 0, [])), 2, 4, 0, first_seq=0)
    events = read(writer, tmp_path, session)
    by_ts = {e["timestampNs"]: e for e in events}
    assert by_ts[2]["parentEventId"] == by_ts[1]["id"] and by_ts[4]["parentEventId"] == by_ts[3]["id"]
    assert (by_ts[3]["pid"], by_ts[3]["function"]) == (child.pid, "outer")
    dropped = writer.call(lambda c: c.execute("SELECT dropped FROM sessions WHERE key = ?", (session,)).fetchone()[0])
    assert dropped.result(10) == 7  # the session's losses: both processes' together


def test_tracer_notes_are_kept_once_and_bounded() -> None:
    table = SlotTable()
    table.note("a.js: file changed since it was indexed: running it untraced")
    table.note("a.js: file changed since it was indexed: running it untraced (×3)")  # the same report, repeated
    assert table.notes == ["a.js: file changed since it was indexed: running it untraced"]
    table.note("x" * 10_000)
    assert len(table.notes[1]) == MAX_NOTE_CHARS
    for n in range(2 * MAX_NOTES):
        table.note(f"f{n}.js: runs untraced")
    assert len(table.notes) == MAX_NOTES and table.notes[2] == "f0.js: runs untraced"
