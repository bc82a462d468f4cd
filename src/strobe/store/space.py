"""Disk space for the store's own bookkeeping when the disk is full.

A store on a full disk can still lose nothing silently only if it can write a few pages: the status and exit
code of a session that ends, the count of what was lost, the deletion the user asks for to free space. So the
writer stops writing events before the disk is full, when less than LOW_WATER_BYTES are free (and starts again
at RESUME_BYTES); and for a disk something else fills at once, it keeps a reserve file of RESERVE_BYTES beside the
database that it deletes the first time a write fails for lack of space, and makes again once space is back.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sqlite3
from pathlib import Path

from strobe.paths import private_opener

log = logging.getLogger(__name__)

RESERVE_BYTES = 16 << 20
LOW_WATER_BYTES = 48 << 20
"""Below this much free space the store stops writing events (and counts them as lost): what is left keeps room
for the write-ahead log to be copied back into the database (which may grow the file by up to the log's size),
for sessions to end and be deleted."""
RESUME_BYTES = 64 << 20
"""Free space at which events are written again (above the low-water mark, so the store does not flap)."""

_OUT_OF_SPACE_CODES = {sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR}


def is_out_of_space(exc: BaseException) -> bool:
    """Whether a failed write looks like a full disk (SQLite reports ENOSPC as SQLITE_FULL or, while writing
    the WAL, as an I/O error; `PRAGMA max_page_count` reaching its limit is SQLITE_FULL too)."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _OUT_OF_SPACE_CODES
    return isinstance(exc, sqlite3.Error) and "full" in str(exc)


def free_bytes(path: Path) -> int:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize


class Reserve:
    """The reserve file (see the module's docstring). All methods run on the writer's thread."""

    def __init__(self, path: Path, size: int = RESERVE_BYTES) -> None:
        self.path = path
        self.size = size

    @property
    def held(self) -> bool:
        try:
            return self.path.stat().st_size >= self.size
        except OSError:
            return False

    def ensure(self) -> bool:
        """Make the reserve if it is missing and the disk has room for it and some more. True if it is held."""
        if self.held:
            return True
        try:
            if free_bytes(self.path.parent) < self.size + RESUME_BYTES:
                return False
            fd = private_opener(str(self.path), os.O_WRONLY | os.O_CREAT)
            try:
                os.posix_fallocate(fd, 0, self.size)  # blocks really allocated, not a sparse file
            finally:
                os.close(fd)
        except OSError as exc:
            log.warning("store: cannot make the %d MiB disk reserve %s: %s", self.size >> 20, self.path, exc)
            with contextlib.suppress(OSError):
                self.path.unlink()
            return False
        return True

    def low(self) -> bool:
        """Less than LOW_WATER_BYTES free: time to stop writing events."""
        try:
            return free_bytes(self.path.parent) < LOW_WATER_BYTES
        except OSError:
            return False

    def room_to_resume(self) -> bool:
        """After the disk was (nearly) full: whether there is room again for events."""
        try:
            return free_bytes(self.path.parent) >= RESUME_BYTES
        except OSError:
            return False

    def release(self) -> bool:
        """Give the reserve's space back to the store. True if there was one to give."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            log.warning("store: cannot delete the disk reserve %s: %s", self.path, exc)
            return False
        log.warning("store: the disk is full; the %d MiB reserve was released so sessions can still end and be "
                    "deleted", self.size >> 20)
        return True
