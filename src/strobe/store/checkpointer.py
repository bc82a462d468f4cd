"""Copies the write-ahead log back into the database on a thread and connection of its own (see Checkpointer)."""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

from strobe.store.schema import WAL_LIMIT_BYTES

log = logging.getLogger(__name__)

CHECKPOINT_INTERVAL_S = 0.2


class Checkpointer:
    """Copies the write-ahead log back into the database on a thread and connection of its own, so the writer's
    commits never wait for it (done inside COMMIT it took ~6% of the writer's time under a flood). The writer
    pokes it after each commit; it checkpoints at most every CHECKPOINT_INTERVAL_S. SQLite's own automatic
    checkpoint stays on in the writer, at a higher threshold, in case this thread falls behind."""

    def __init__(self, db_path: Path) -> None:
        self._db_path = db_path
        self._poked = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="strobe-checkpoint", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        self._poked.set()

    def close(self, timeout: float) -> None:
        self._stopping.set()
        self._poked.set()
        self._thread.join(timeout)

    def _run(self) -> None:
        try:
            conn = sqlite3.connect(self._db_path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT_BYTES}")
        except sqlite3.Error:
            log.exception("store checkpointer: cannot open the store; the writer checkpoints instead")
            return
        try:
            while not self._stopping.is_set():
                self._poked.wait()
                self._poked.clear()
                if self._stopping.is_set():
                    break
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error:
                    log.exception("store checkpointer: checkpoint failed")
                self._stopping.wait(CHECKPOINT_INTERVAL_S)  # pacing: each checkpoint ends with an fsync
        finally:
            conn.close()
