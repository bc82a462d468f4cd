"""Read access for the daemon: one read-only connection per worker thread, queries off the event loop."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import anyio.to_thread

from strobe.store.query import install_functions
from strobe.store.schema import connect

T = TypeVar("T")


class Reader:
    def __init__(self, db_path: Path) -> None:
        self._db_path = db_path
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()

    def connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self._db_path, readonly=True)
            install_functions(conn)
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await anyio.to_thread.run_sync(lambda: fn(self.connection()))

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
