"""A session stored with the real writer, with every kind of event the exporters draw: nested calls on two threads
(Python-rendered and native values), output lines (one with '</script>' in it), a crash, poll snapshots, calls
that never exit. Times are ns since the session started."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from strobe.store import sessions as store_sessions
from strobe.store.functions import set_signatures
from strobe.store.schema import EVENT_COLUMNS, EventKind
from strobe.store.sessions import SessionStatus
from strobe.store.writer import Writer

TIMEOUT = 10
PID, MAIN, WORKER = 100, 100, 101
ENTER, EXIT = EventKind.FUNCTION_ENTER, EventKind.FUNCTION_EXIT
SESSION = "demo-2026-03-01-10h00"
SCRIPT_LINE = "hello </script><script>alert(1)</script> <!-- x\n"

FUNCTIONS = [  # key, name, file, line, runtime
    (1, "app.main", "/proj/app.py", 1, "cpython"),
    (2, "app.compute", "/proj/app.py", 10, "cpython"),
    (3, "app.helper", "/proj/app.py", 20, "cpython"),
    (4, "native_add", "/proj/add.c", 3, None),
    (5, "app.stuck", "/proj/app.py", 30, "cpython"),
]
CRASH_DETAILS = {"signal": "SIGSEGV", "address": "0x401000", "faultAddress": "0x0", "access": "write",
                 "function": "app.stuck", "backtrace": [{"address": "0x401000", "function": "app.stuck"},
                                                        {"address": "0x401100", "function": "app.compute"}],
                 "frameMemory": {"hex": "00" * 64}, "registers": {"pc": "0x401000"}}


def py_args(**values: Any) -> str:
    return json.dumps([[name, value] for name, value in values.items()])


def row(session: int, ts: int, kind: EventKind, **over: Any) -> tuple[Any, ...]:
    values: dict[str, Any] = dict.fromkeys(EVENT_COLUMNS)
    values.update(session=session, ts=ts, kind=int(kind), pid=PID)
    values.update(over)
    return tuple(values[c] for c in EVENT_COLUMNS)


def events(key: int) -> list[tuple[Any, ...]]:
    ms = 1_000_000
    snapshots = [row(key, k * ms, EventKind.VARIABLE_SNAPSHOT, tid=None,
                     args=json.dumps({"counter": 10 * k, "cfg": {"limit": 5, "name": "x"}, "bad": {"error": "no"}}))
                 for k in (1, 3, 5)]
    calls = [
        row(key, 1 * ms, ENTER, tid=MAIN, func=1, args=py_args(argv=["x"])),
        row(key, 1_500_000, EventKind.STDOUT, tid=None, text=SCRIPT_LINE),
        row(key, 2 * ms, ENTER, tid=MAIN, func=2, args=py_args(n=3)),
        row(key, 2_200_000, ENTER, tid=WORKER, func=2, args=py_args(n=5)),
        row(key, 2_300_000, ENTER, tid=WORKER, func=5, args=py_args()),
        row(key, 2_500_000, ENTER, tid=MAIN, func=3, args=py_args(k=1)),
        row(key, 3 * ms, EXIT, tid=MAIN, func=3, duration=500_000, retval="2"),
        row(key, 4 * ms, EXIT, tid=MAIN, func=2, duration=2 * ms, retval="6"),
        row(key, 4_100_000, ENTER, tid=MAIN, func=4, args=struct.pack("<6Q", 6, 7, 0, 0, 0, 0)),
        row(key, 4_200_000, EXIT, tid=MAIN, func=4, duration=100_000, retval=13),
        row(key, 5 * ms, EventKind.STDERR, tid=None, text="oops\n"),
        row(key, 6 * ms, EventKind.CRASH, tid=WORKER, extra=json.dumps(CRASH_DETAILS)),
    ]
    return sorted(snapshots + calls, key=lambda r: r[EVENT_COLUMNS.index("ts")])


@dataclass(frozen=True)
class Stored:
    db: Path
    home: Path
    session_id: str
    key: int


def store(home: Path, *, status: SessionStatus = SessionStatus.CRASHED) -> Stored:
    """The demo session in home/strobe.db, ended as `status` (RUNNING: left running)."""
    return store_session(home, SESSION, "/proj/demo", FUNCTIONS, events,
                         threads=[(MAIN, "demo"), (WORKER, "worker")],
                         status=status, signal="SIGSEGV" if status is SessionStatus.CRASHED else None)


def store_session(
    home: Path, session_id: str, command: str, functions: Sequence[tuple[int, str, str, int, str | None]],
    events: Callable[[int], list[tuple[Any, ...]]], *, threads: Sequence[tuple[int, str]] = (),
    signatures: Sequence[tuple[int, str]] = (), status: SessionStatus, code: int | None = None,
    signal: str | None = None,
) -> Stored:
    """A session of process PID (started at 1000 ms, in /proj) stored with the real writer in home/strobe.db: its
    functions (key, name, file, line, runtime), its threads (tid, name), the register plans of native functions
    (key, plan JSON), events(session key)'s rows, and its end as `status` with `code` and `signal` at 2000 ms
    (RUNNING: left running)."""
    home.mkdir(mode=0o700, exist_ok=True)
    db = home / "strobe.db"
    writer = Writer(db)
    writer.start()
    try:
        def setup(conn: Any) -> int:
            record = store_sessions.insert_session(conn, session_id, command, "/proj", PID, 1_000)
            conn.executemany("INSERT OR IGNORE INTO functions (key, name, file, line, runtime) VALUES (?, ?, ?, ?, ?)",
                             functions)
            conn.executemany("INSERT INTO threads (session, pid, tid, name) VALUES (?, ?, ?, ?)",
                             [(record.key, PID, tid, name) for tid, name in threads])
            set_signatures(conn, signatures)
            return record.key

        key = writer.call(setup).result(timeout=TIMEOUT)
        writer.submit_rows(events(key))
        if status is not SessionStatus.RUNNING:
            writer.call(lambda c: store_sessions.finish_process(c, key, PID, status, code, 2_000, signal))
        writer.call(lambda c: None).result(timeout=TIMEOUT)
    finally:
        writer.close()
    return Stored(db, home, session_id, key)
