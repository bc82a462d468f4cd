"""Events lost to writes that failed, per session, until the store counts them (`sessions.lost`).

The writer counts a loss here (`add`), writes the counts into the next transaction (`save`), and tells whether it
committed (`committed`) or failed (`failed`: the counts wait for the next one). Readers add `unsaved(session)` to
what the store says, so a loss shows at once, even while the disk is too full to store its count.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Any


class Losses:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._unsaved: dict[int, int] = {}  # events per session lost since the last commit that counted them
        self._in_flight: dict[int, int] = {}  # counted by the transaction being written

    def add(self, session: int, events: int) -> None:
        if session and events:
            with self._lock:
                self._unsaved[session] = self._unsaved.get(session, 0) + events

    def add_item(self, item: tuple[Any, ...]) -> None:
        """What a writer queue item carried, lost with its transaction (output chunks by their lines)."""
        tag = item[0]
        if tag == "rows":
            self.add(item[1], len(item[3]))
        elif tag == "groups":
            self.add(item[1], len(item[4]))
        elif tag == "block":
            self.add(item[1].session, item[1].count)
        elif tag == "out" and item[4]:
            self.add(item[1], max(1, item[4].count(b"\n")))

    def unsaved(self, session: int) -> int:
        with self._lock:
            return self._unsaved.get(session, 0) + self._in_flight.get(session, 0)

    def save(self, conn: sqlite3.Connection) -> None:
        """Write the counts into the transaction about to commit (writer thread)."""
        with self._lock:
            if not self._unsaved:
                return
            losses, self._unsaved = self._unsaved, {}
            self._in_flight = losses
        conn.executemany("UPDATE sessions SET lost = lost + ? WHERE key = ?",
                         [(n, session) for session, n in losses.items()])

    def committed(self) -> None:
        with self._lock:
            self._in_flight = {}

    def failed(self) -> None:
        """The transaction that carried the counts was rolled back: they wait for the next one."""
        with self._lock:
            for session, n in self._in_flight.items():
                self._unsaved[session] = self._unsaved.get(session, 0) + n
            self._in_flight = {}
