"""Objects built from one file, kept for the files most recently asked about.

    tables = PerFile(FrameTable, 8)
    tables.get("/path/to/app")   # the same object while the file is unchanged; None if it does not exist

A file is known by its real path, size and mtime: one changed since gets a new object (the old one is dropped).
Building runs under the cache's lock, so an object's constructor should only do what must not be done twice; the
objects guard their own later work.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

T = TypeVar("T")


class PerFile(Generic[T]):
    def __init__(self, build: Callable[[str], T], keep: int) -> None:
        self._build, self._keep = build, keep
        self._items: OrderedDict[tuple[str, int, int], T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, path: str | Path) -> T | None:
        """The object of `path` (its real path is what `build` receives), None if the file does not exist."""
        resolved = os.path.realpath(path)
        try:
            stat = os.stat(resolved)
        except OSError:
            return None
        key = (resolved, stat.st_size, stat.st_mtime_ns)
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
                return item
            for old in [k for k in self._items if k[0] == resolved]:
                del self._items[old]
            item = self._items[key] = self._build(resolved)
            while len(self._items) > self._keep:
                self._items.popitem(last=False)
            return item
