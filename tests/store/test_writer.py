"""Writer: the single writer thread, against a real SQLite file."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from strobe.store import sessions as store_sessions
from strobe.store import writer as writer_module
from strobe.store.batches import ColumnGroup
from strobe.store.schema import EVENT_COLUMNS, EventKind, connect
from strobe.store.sessions import SessionStatus
from strobe.store.writer import Writer

TIMEOUT = 10


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "strobe.db"


@pytest.fixture
def writer(db_path: Path) -> Iterator[Writer]:
    w = Writer(db_path)
    w.start()
    try:
        yield w
    finally:
        w.close()


@pytest.fixture
def reader(writer: Writer, db_path: Path) -> Iterator[sqlite3.Connection]:
    conn = connect(db_path, readonly=True)
    try:
        yield conn
    finally:
        conn.close()


def new_session(writer: Writer, base_id: str = "prog", pid: int = 100) -> int:
    record = writer.call(
        lambda c: store_sessions.insert_session(c, base_id, f"/bin/{base_id}", "/proj", pid, 1_000)
    ).result(timeout=TIMEOUT)
    return record.key


def barrier(writer: Writer) -> None:
    """Everything submitted before this is committed once it returns."""
    writer.call(lambda c: None).result(timeout=TIMEOUT)


def row(session: int, ts: int, kind: EventKind = EventKind.FUNCTION_ENTER, **over: Any) -> tuple[Any, ...]:
    values: dict[str, Any] = {
        "session": session,
        "ts": ts,
        "kind": int(kind),
        "pid": 100,
        "tid": 1,
        "func": None,
        "parent": None,
        "duration": None,
        "retval": None,
        "sampled": None,
        "text": None,
        "args": None,
        "extra": None,
    }
    values.update(over)
    return tuple(values[column] for column in EVENT_COLUMNS)


def session_rows(conn: sqlite3.Connection, session: int) -> list[tuple[int, int]]:
    """(id, ts) of a session's events, by id."""
    return [(r[0], r[1]) for r in conn.execute("SELECT id, ts FROM events WHERE session = ? ORDER BY id", (session,))]


def wait_for(predicate: Callable[[], bool], deadline_s: float = 5.0) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def _blocked(writer: Writer) -> threading.Event:
    """Hold the writer thread inside a call until the returned event is set."""
    started = threading.Event()
    release = threading.Event()

    def hold(conn: sqlite3.Connection) -> None:
        started.set()
        release.wait(TIMEOUT)

    writer.call(hold)
    assert started.wait(TIMEOUT)
    return release


# ---- ordering and ids ----------------------------------------------------------------------------


def test_call_sees_rows_submitted_before_it(writer: Writer) -> None:
    s = new_session(writer)
    writer.submit_rows([row(s, i) for i in range(5)])
    writer.submit_rows([row(s, i) for i in range(5, 8)])
    count = writer.call(
        lambda c: c.execute("SELECT count(*) FROM events WHERE session = ?", (s,)).fetchone()[0]
    ).result(timeout=TIMEOUT)
    assert count == 8


def test_rows_are_committed_when_call_resolves(writer: Writer, reader: sqlite3.Connection) -> None:
    s = new_session(writer)
    writer.submit_rows([row(s, 1, text="x")])
    barrier(writer)
    assert reader.execute("SELECT session, ts, kind, text FROM events").fetchall() == [
        (s, 1, int(EventKind.FUNCTION_ENTER), "x")
    ]


def test_empty_submit_is_ignored(writer: Writer, reader: sqlite3.Connection) -> None:
    writer.submit_rows([])
    barrier(writer)
    assert reader.execute("SELECT count(*) FROM events").fetchone()[0] == 0


def test_ids_increase_in_submission_order(writer: Writer, reader: sqlite3.Connection) -> None:
    s = new_session(writer)
    for batch in range(5):
        writer.submit_rows([row(s, batch * 10 + i) for i in range(10)])
        if batch % 2:
            barrier(writer)
    barrier(writer)
    rows = session_rows(reader, s)
    assert [ts for _, ts in rows] == list(range(50))
    ids = [i for i, _ in rows]
    assert ids == sorted(ids) and len(set(ids)) == 50
    assert writer.rows_written == 50


def test_ids_continue_after_restart(db_path: Path) -> None:
    first = Writer(db_path)
    first.start()
    try:
        s = new_session(first)
        first.submit_rows([row(s, i) for i in range(3)])
        barrier(first)
    finally:
        first.close()
    second = Writer(db_path)
    second.start()
    try:
        second.submit_rows([row(s, 10)])
        barrier(second)
    finally:
        second.close()
    conn = connect(db_path, readonly=True)
    try:
        assert session_rows(conn, s) == [(1, 0), (2, 1), (3, 2), (4, 10)]
    finally:
        conn.close()


# ---- FIFO limit ----------------------------------------------------------------------------------


def test_fifo_keeps_newest_rows(writer: Writer, reader: sqlite3.Connection) -> None:
    s = new_session(writer)
    writer.set_limit(s, 100)
    for batch in range(10):
        writer.submit_rows([row(s, batch * 100 + i) for i in range(100)])
        if batch in (2, 5):
            barrier(writer)  # some batches in their own transactions
    barrier(writer)
    rows = session_rows(reader, s)
    assert len(rows) == 100
    assert [ts for _, ts in rows] == list(range(900, 1000))
    record = store_sessions.get_session_by_key(reader, s)
    assert record is not None and record.trimmed == 900


def test_fifo_partial_range_trim(writer: Writer, reader: sqlite3.Connection) -> None:
    s = new_session(writer)
    writer.set_limit(s, 7)
    writer.submit_rows([row(s, i) for i in range(5)])
    barrier(writer)
    writer.submit_rows([row(s, i) for i in range(5, 10)])
    barrier(writer)
    assert [ts for _, ts in session_rows(reader, s)] == [3, 4, 5, 6, 7, 8, 9]
    record = store_sessions.get_session_by_key(reader, s)
    assert record is not None and record.trimmed == 3


def test_lowering_the_limit_trims_on_next_transaction(writer: Writer, reader: sqlite3.Connection) -> None:
    s = new_session(writer)
    writer.submit_rows([row(s, i) for i in range(20)])
    barrier(writer)
    assert len(session_rows(reader, s)) == 20
    writer.set_limit(s, 4)
    barrier(writer)
    assert [ts for _, ts in session_rows(reader, s)] == [16, 17, 18, 19]


def test_fifo_never_deletes_other_sessions_rows(writer: Writer, reader: sqlite3.Connection) -> None:
    a = new_session(writer, "a", pid=1)
    b = new_session(writer, "b", pid=2)
    c = new_session(writer, "c", pid=3)  # default limit, a few rows
    writer.set_limit(a, 50)
    writer.set_limit(b, 300)
    writer.submit_rows([row(c, i) for i in range(7)])
    for batch in range(8):
        mixed = []
        for i in range(50):
            ts = batch * 50 + i
            mixed.append(row(a, ts))
            mixed.append(row(b, ts))
        writer.submit_rows(mixed)
        if batch % 3 == 0:
            barrier(writer)
    barrier(writer)
    assert [ts for _, ts in session_rows(reader, a)] == list(range(350, 400))
    assert [ts for _, ts in session_rows(reader, b)] == list(range(100, 400))
    assert [ts for _, ts in session_rows(reader, c)] == list(range(7))
    trimmed = {r.key: r.trimmed for r in store_sessions.list_sessions(reader)}
    assert trimmed == {a: 350, b: 100, c: 0}


# ---- output --------------------------------------------------------------------------------------


def _output(conn: sqlite3.Connection, session: int) -> list[tuple[Any, ...]]:
    return conn.execute(
        "SELECT kind, ts, pid, tid, func, text FROM events WHERE session = ? ORDER BY kind, ts, id",
        (session,),
    ).fetchall()


def test_output_chunks_become_line_events(writer: Writer, reader: sqlite3.Connection) -> None:
    s = new_session(writer)
    release = _blocked(writer)  # one transaction: no partial can go stale in between
    writer.submit_output(s, 100, EventKind.STDOUT, b"hel", 1)
    writer.submit_output(s, 100, EventKind.STDERR, b"err", 2)
    writer.submit_output(s, 100, EventKind.STDOUT, b"lo\nwor", 3)
    writer.submit_output(s, 100, EventKind.STDERR, b"or!\n", 4)
    writer.submit_output(s, 101, EventKind.STDOUT, b"child\n", 5)
    writer.submit_output(s, 100, EventKind.STDOUT, b"ld\n", 6)
    release.set()
    barrier(writer)
    assert _output(reader, s) == [
        (int(EventKind.STDOUT), 1, 100, None, None, "hello\n"),
        (int(EventKind.STDOUT), 3, 100, None, None, "world\n"),
        (int(EventKind.STDOUT), 5, 101, None, None, "child\n"),
        (int(EventKind.STDERR), 2, 100, None, None, "error!\n"),
    ]


def test_empty_chunk_flushes_partial_line(writer: Writer, reader: sqlite3.Connection) -> None:
    s = new_session(writer)
    writer.submit_output(s, 100, EventKind.STDOUT, b"line\nno newline", 1)
    writer.submit_output(s, 100, EventKind.STDOUT, b"", 2)
    barrier(writer)
    assert [r[-1] for r in _output(reader, s)] == ["line\n", "no newline"]
    # The stream ended: further bytes start a new line with their own timestamp.
    writer.submit_output(s, 100, EventKind.STDOUT, b"again\n", 3)
    barrier(writer)
    assert [(r[1], r[-1]) for r in _output(reader, s)] == [(1, "line\n"), (1, "no newline"), (3, "again\n")]


def test_stale_partial_line_is_flushed_without_more_input(writer: Writer, reader: sqlite3.Connection) -> None:
    s = new_session(writer)
    writer.submit_output(s, 100, EventKind.STDOUT, b"password: ", 9)

    def flushed() -> bool:
        return reader.execute("SELECT text FROM events WHERE session = ?", (s,)).fetchall() == [("password: ",)]

    assert wait_for(flushed)


def test_close_flushes_partial_lines(db_path: Path) -> None:
    w = Writer(db_path)
    w.start()
    s = new_session(w)
    w.submit_output(s, 100, EventKind.STDERR, b"dying words", 4)
    w.close()
    conn = connect(db_path, readonly=True)
    try:
        assert _output(conn, s) == [(int(EventKind.STDERR), 4, 100, None, None, "dying words")]
    finally:
        conn.close()


def test_output_rows_count_against_the_fifo(writer: Writer, reader: sqlite3.Connection) -> None:
    s = new_session(writer)
    writer.set_limit(s, 1000, output_limit=3)
    writer.submit_output(s, 100, EventKind.STDOUT, b"".join(b"%d\n" % i for i in range(10)), 1)
    barrier(writer)
    assert [r[-1] for r in _output(reader, s)] == ["7\n", "8\n", "9\n"]
    record = store_sessions.get_session_by_key(reader, s)
    assert record is not None and (record.output_trimmed, record.trimmed) == (7, 0)


# ---- call() --------------------------------------------------------------------------------------


def test_call_returns_function_result(writer: Writer) -> None:
    assert writer.call(lambda c: c.execute("SELECT 6 * 7").fetchone()[0]).result(timeout=TIMEOUT) == 42


def test_failing_call_propagates_and_keeps_earlier_rows(writer: Writer, reader: sqlite3.Connection) -> None:
    s = new_session(writer)
    writer.submit_rows([row(s, i) for i in range(3)])

    def boom(conn: sqlite3.Connection) -> None:
        conn.execute("INSERT INTO functions (key, name) VALUES (1, 'half-done')")
        raise RuntimeError("boom")

    future = writer.call(boom)
    writer.submit_rows([row(s, 3)])
    with pytest.raises(RuntimeError, match="boom"):
        future.result(timeout=TIMEOUT)
    barrier(writer)
    assert [ts for _, ts in session_rows(reader, s)] == [0, 1, 2, 3]
    # The failed call's own changes are rolled back.
    assert reader.execute("SELECT count(*) FROM functions").fetchone()[0] == 0
    # The writer keeps working.
    writer.submit_rows([row(s, 4)])
    barrier(writer)
    assert [ts for _, ts in session_rows(reader, s)] == [0, 1, 2, 3, 4]


def test_call_changes_are_committed(writer: Writer, reader: sqlite3.Connection) -> None:
    writer.call(lambda c: c.execute("INSERT INTO functions (key, name) VALUES (5, 'f')")).result(timeout=TIMEOUT)
    assert reader.execute("SELECT key, name FROM functions").fetchall() == [(5, "f")]


# ---- forget_session ------------------------------------------------------------------------------


def test_forget_session_drops_fifo_state(writer: Writer, reader: sqlite3.Connection) -> None:
    s = new_session(writer)
    writer.set_limit(s, 10)
    writer.submit_rows([row(s, i) for i in range(20)])
    barrier(writer)
    assert len(session_rows(reader, s)) == 10
    deleted = writer.call(lambda c: store_sessions.delete_session(c, s)).result(timeout=TIMEOUT)
    assert deleted == 10
    writer.forget_session(s)
    # Rows arriving for the same key later start from a fresh FIFO (default limit, no old ranges).
    writer.submit_rows([row(s, 100 + i) for i in range(20)])
    barrier(writer)
    assert [ts for _, ts in session_rows(reader, s)] == list(range(100, 120))


def test_forget_session_drops_partial_output(db_path: Path) -> None:
    w = Writer(db_path)
    w.start()
    try:
        gone = new_session(w, "gone")
        kept = new_session(w, "kept", pid=200)
        release = _blocked(w)
        # Both land in the same transaction, so the partial cannot go stale in between.
        w.submit_output(gone, 100, EventKind.STDOUT, b"partial of deleted session", 1)
        w.submit_output(kept, 200, EventKind.STDOUT, b"partial of kept session", 1)
        w.forget_session(gone)
        release.set()
    finally:
        w.close()  # flushes every remaining partial line
    conn = connect(db_path, readonly=True)
    try:
        assert conn.execute("SELECT session, text FROM events ORDER BY id").fetchall() == [
            (kept, "partial of kept session")
        ]
    finally:
        conn.close()


# ---- failed transactions -------------------------------------------------------------------------


def test_failed_transaction_does_not_corrupt_fifo(writer: Writer, reader: sqlite3.Connection) -> None:
    s = new_session(writer)
    writer.set_limit(s, 5)
    writer.submit_rows([row(s, i) for i in range(5)])
    barrier(writer)
    release = _blocked(writer)
    # One transaction: three good rows (inserted before the call), then a malformed row makes it fail.
    writer.submit_rows([row(s, 100 + i) for i in range(3)])
    doomed = writer.call(lambda c: None)
    writer.submit_rows([(s, 1)])
    release.set()
    doomed.result(timeout=TIMEOUT)  # the call does not depend on the lost rows: it is run again on its own
    assert [ts for _, ts in session_rows(reader, s)] == [0, 1, 2, 3, 4]  # the failed batch is gone
    record = store_sessions.get_session_by_key(reader, s)
    assert record is not None and record.lost == 4  # and counted
    writer.submit_rows([row(s, 9)])
    barrier(writer)
    assert [ts for _, ts in session_rows(reader, s)] == [1, 2, 3, 4, 9]
    record = store_sessions.get_session_by_key(reader, s)
    assert record is not None and record.trimmed == 1


def test_reserved_ids_written_out_of_order_are_trimmed_oldest_first(writer: Writer, reader: sqlite3.Connection) -> None:
    s = new_session(writer)
    writer.set_limit(s, 3)
    early = writer.reserve_ids(2)
    late = writer.reserve_ids(2)
    # The later block is stored first (a producer finished sooner); FIFO still drops the lowest ids.
    for first, ts in ((late, 10), (early, 0)):
        group = ColumnGroup(("id", "ts"), (("session", s), ("kind", 1)), [first, ts, first + 1, ts + 1])
        writer.submit_groups(s, first, [group], [(first, ts, 1, None, None, None), (first + 1, ts + 1, 1, None, None,
                                                                                     None)])
    barrier(writer)
    assert [event_id for event_id, _ in session_rows(reader, s)] == [early + 1, late, late + 1]


# ---- limits: output's own FIFO, output back-pressure, a store that cannot grow ------------------


def _kinds(conn: sqlite3.Connection, session: int) -> dict[int, int]:
    return dict(conn.execute("SELECT kind, count(*) FROM events WHERE session = ? GROUP BY kind", (session,)))


def _record(conn: sqlite3.Connection, session: int) -> store_sessions.SessionRecord:
    record = store_sessions.get_session_by_key(conn, session)
    assert record is not None
    return record


def test_a_trace_flood_never_pushes_output_out(writer: Writer, reader: sqlite3.Connection) -> None:
    s = new_session(writer)
    writer.set_limit(s, 50, output_limit=1000)
    writer.submit_output(s, 100, EventKind.STDOUT, b"".join(b"line %d\n" % i for i in range(31)), 1)
    writer.submit_rows([row(s, 10, EventKind.CRASH, text="crash")])
    for start in range(0, 5000, 500):
        writer.submit_rows([row(s, 100 + i) for i in range(start, start + 500)])
    barrier(writer)
    assert _kinds(reader, s) == {int(EventKind.FUNCTION_ENTER): 50, int(EventKind.STDOUT): 31,
                                 int(EventKind.CRASH): 1}
    record = _record(reader, s)
    assert (record.trimmed, record.output_trimmed) == (4950, 0)


def test_output_over_its_own_cap_evicts_only_output(writer: Writer, reader: sqlite3.Connection) -> None:
    s = new_session(writer)
    writer.set_limit(s, 1000, output_limit=10)
    writer.submit_rows([row(s, i) for i in range(20)])
    writer.submit_output(s, 100, EventKind.STDERR, b"".join(b"%d\n" % i for i in range(25)), 1)
    barrier(writer)
    assert _kinds(reader, s) == {int(EventKind.FUNCTION_ENTER): 20, int(EventKind.STDERR): 10}
    texts = [r[0] for r in reader.execute("SELECT text FROM events WHERE session = ? AND kind = 4 ORDER BY id", (s,))]
    assert texts == [f"{i}\n" for i in range(15, 25)]
    assert (_record(reader, s).trimmed, _record(reader, s).output_trimmed) == (0, 15)


def test_output_waits_for_room_instead_of_queueing_without_bound(writer: Writer, reader: sqlite3.Connection,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "MAX_QUEUED_OUTPUT_BYTES", 1000)
    s = new_session(writer)
    release = _blocked(writer)
    chunk = b"x" * 99 + b"\n"
    done = threading.Event()

    def produce() -> None:
        for _ in range(30):
            writer.submit_output(s, 100, EventKind.STDOUT, chunk, 1)
        done.set()

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        # the producer is held once ~1000 bytes wait: it does not finish while the writer is stuck
        assert not done.wait(0.5)
    finally:
        release.set()
    assert done.wait(TIMEOUT)
    producer.join(TIMEOUT)
    barrier(writer)
    assert _kinds(reader, s) == {int(EventKind.STDOUT): 30}  # nothing dropped: the producer waited
    assert _record(reader, s).lost == 0


def test_output_that_cannot_wait_longer_is_dropped_and_counted(writer: Writer, reader: sqlite3.Connection,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "MAX_QUEUED_OUTPUT_BYTES", 100)
    monkeypatch.setattr(writer_module, "OUTPUT_WAIT_S", 0.05)
    s = new_session(writer)
    release = _blocked(writer)
    try:
        assert writer.submit_output(s, 100, EventKind.STDOUT, b"a" * 150 + b"\n", 1)
        assert not writer.submit_output(s, 100, EventKind.STDOUT, b"b\nc\n", 2)  # no room for 0.05 s
        assert writer.unsaved_losses(s) == 2
    finally:
        release.set()
    barrier(writer)
    assert _record(reader, s).lost == 2
    assert writer.unsaved_losses(s) == 0


def _fill_store(writer: Writer) -> None:
    """From now on the store cannot take a new page: what SQLite says on a full disk (SQLITE_FULL)."""
    writer.call(lambda c: c.execute("PRAGMA max_page_count = " + str(
        c.execute("PRAGMA page_count").fetchone()[0]))).result(TIMEOUT)


def test_a_full_store_counts_what_it_loses_and_still_ends_sessions(writer: Writer, reader: sqlite3.Connection) -> None:
    s = new_session(writer)
    writer.submit_rows([row(s, i) for i in range(10)])
    barrier(writer)
    _fill_store(writer)
    big = "x" * 2000
    writer.submit_rows([row(s, 100 + i, text=big) for i in range(500)])
    ended = writer.call(lambda c: store_sessions.finish_process(c, s, 100, SessionStatus.EXITED, 3, 5_000))
    ended.result(TIMEOUT)  # the status change is kept though the events before it could not be
    assert writer.out_of_space
    record = _record(reader, s)
    assert (record.status, record.exit_code) == (SessionStatus.EXITED, 3)
    assert record.lost + writer.unsaved_losses(s) == 500  # stored with the status change when that fits
    assert len(reader.execute("SELECT id FROM events WHERE session = ?", (s,)).fetchall()) == 10
    # deleting works on a full store, and once there is room again, writes and the loss count go through
    other = new_session(writer, "other")
    writer.call(lambda c: store_sessions.delete_session(c, other)).result(TIMEOUT)
    writer.call(lambda c: c.execute("PRAGMA max_page_count = 1000000")).result(TIMEOUT)
    writer.submit_rows([row(s, 9000)])
    barrier(writer)
    assert not writer.out_of_space
    assert _record(reader, s).lost == 500
    assert writer.unsaved_losses(s) == 0
    assert len(reader.execute("SELECT id FROM events WHERE session = ?", (s,)).fetchall()) == 11


def test_a_reserve_file_is_kept_beside_the_store_and_released_when_full(writer: Writer, db_path: Path) -> None:
    reserve = Path(f"{db_path}-reserve")
    deadline = time.monotonic() + TIMEOUT
    while not reserve.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert reserve.stat().st_size == writer_module.Reserve(reserve).size
    assert reserve.stat().st_mode & 0o777 == 0o600
    s = new_session(writer)
    _fill_store(writer)
    writer.submit_rows([row(s, i, text="y" * 3000) for i in range(200)])
    barrier(writer)
    assert not reserve.exists()
    writer.call(lambda c: c.execute("PRAGMA max_page_count = 1000000")).result(TIMEOUT)
    writer.submit_rows([row(s, 1)])
    barrier(writer)
    assert reserve.exists()  # made again once writes succeed


def test_deleting_a_big_session_keeps_the_write_ahead_log_small(writer: Writer, reader: sqlite3.Connection,
                                                               db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writer_module, "DELETE_CHUNK", 1000)
    big, other = new_session(writer, "big"), new_session(writer, "other")
    writer.set_limit(big, 1_000_000)
    for start in range(0, 20_000, 2000):
        writer.submit_rows([row(big, start + i, text="z" * 200) for i in range(2000)])
    writer.submit_rows([row(other, 1)])
    barrier(writer)
    writer.call(lambda c: c.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()).result(TIMEOUT)
    assert writer.delete_session(big).result(TIMEOUT) == 20_000
    assert Path(f"{db_path}-wal").stat().st_size < 1_000_000  # ~5 MB of rows; one 1000-row chunk at a time
    assert store_sessions.get_session_by_key(reader, big) is None
    assert [ts for _, ts in session_rows(reader, other)] == [1]
    assert reader.execute("SELECT count(*) FROM event_counts WHERE session = ?", (big,)).fetchone()[0] == 0
    writer.submit_rows([row(other, 2)])  # the writer carries on
    barrier(writer)
    assert [ts for _, ts in session_rows(reader, other)] == [1, 2]
