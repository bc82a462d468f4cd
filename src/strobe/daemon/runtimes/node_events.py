"""The Node preload's events as the daemon reads them: one thread tails `events-<pid>.jsonl` in every watched
session directory, a whole line (one batch in the Python tracer's format) at a time, and hands each batch on with
the pid its file names."""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

TAIL_INTERVAL_S = 0.02
MAX_READ_BYTES = 8 << 20  # per file and turn: the preload's lines are at most ~1 MiB
_EVENTS_FILE = re.compile(r"^events-(\d+)\.jsonl$")


Deliver = Callable[[int, bytes], None]
"""Where a process's batch goes (LiveSession.on_py_batch: the ingest thread, bounded)."""


class NodeEvents:
    """One daemon thread that reads the preload's event files of every watched directory, a whole line at a
    time, and delivers each batch with the pid its file names."""

    def __init__(self) -> None:
        self._watched: dict[Path, tuple[Deliver, dict[str, int]]] = {}  # dir -> (deliver, file -> offset read)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, directory: Path, deliver: Deliver) -> None:
        with self._lock:
            self._watched[directory] = (deliver, {})
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="strobe-node-events", daemon=True)
                self._thread.start()

    def forget(self, directory: Path) -> None:
        """Read what is left, then stop watching (the directory is the caller's to delete)."""
        self.drain(directory)
        with self._lock:
            self._watched.pop(directory, None)

    def drain(self, directory: Path) -> None:
        with self._lock:
            watched = self._watched.get(directory)
            if watched is not None:
                self._read(directory, *watched)

    def _run(self) -> None:
        while True:
            time.sleep(TAIL_INTERVAL_S)
            with self._lock:
                if not self._watched:
                    self._thread = None
                    return
                for directory, (deliver, offsets) in list(self._watched.items()):
                    try:
                        self._read(directory, deliver, offsets)
                    except Exception:
                        log.exception("reading the Node tracer's events in %s failed", directory)

    @staticmethod
    def _read(directory: Path, deliver: Deliver, offsets: dict[str, int]) -> None:
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return
        for name in names:
            found = _EVENTS_FILE.match(name)
            if found is None:
                continue
            pid, offset = int(found.group(1)), offsets.get(name, 0)
            try:
                with open(directory / name, "rb") as events:
                    events.seek(offset)
                    data = events.read(MAX_READ_BYTES)
            except FileNotFoundError:
                continue
            end = data.rfind(b"\n")
            if end < 0:
                continue
            offsets[name] = offset + end + 1
            for line in data[:end].split(b"\n"):
                if line:
                    deliver(pid, line)


EVENTS = NodeEvents()
