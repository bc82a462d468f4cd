"""Writer limits: output keeps a FIFO of its own, output back-pressure, a store that cannot grow."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from strobe.store import sessions as store_sessions
from strobe.store import writer as writer_module
from strobe.store.schema import EventKind
from strobe.store.sessions import SessionStatus
from strobe.store.writer import Writer
from tests.store.test_writer import (  # noqa: F401  (fixtures)
    TIMEOUT,
    _blocked,
    barrier,
    db_path,
    new_session,
    reader,
    row,
    writer,
)


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
