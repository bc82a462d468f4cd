"""Function tables (an index as columns) and their SQLite cache: one row per binary, keyed by build id
(else path+size+mtime), holding numpy arrays and string blobs.

A `FunctionTable` keeps numbers in numpy arrays and names in one list; raw names and signatures are
decoded from their blobs only when first asked for, so a cached index of 400k functions loads in a
fraction of a second. Each call opens its own connection (WAL, busy timeout), so threads and processes
may read and write at the same time; a lost race just means the same index is written twice. A damaged or
foreign database or entry is treated as a miss, never as an error.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

DB_NAME = "symbols.db"
# Bump when the scanner, the naming rules or the payload layout change: old rows are then ignored.
FORMAT = 2
MAGIC = b"STROBE-FUNCTIONS\x02"
NO_LINE = -(2**63)  # a missing DW_AT_decl_line in the line column
_INT64 = (-(2**63) + 1, 2**63 - 1)

# FunctionInfo's fields, in order: name, raw, signature, address, size, file, line, inlined_only, params.
Row = tuple[str, str, str, int, int, str | None, int | None, bool, int]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS function_indexes (
    key TEXT PRIMARY KEY,
    format INTEGER NOT NULL,
    created REAL NOT NULL,
    functions INTEGER NOT NULL,
    payload BLOB NOT NULL
)
"""

_locks_guard = threading.Lock()
_locks: dict[tuple[str, str], threading.Lock] = {}


# --- tables ----------------------------------------------------------------------------------------


def int_column(values: Sequence[int], dtype: type[np.integer[Any]] = np.int64) -> np.ndarray | list[int]:
    """A numpy array, or the list itself when a value does not fit (only malformed DWARF does that)."""
    try:
        return np.array(values, dtype=dtype)
    except (OverflowError, TypeError, ValueError):
        return list(values)


class FunctionTable:
    """The functions of one binary as columns, in index order. `raws` and `signatures` may be given as
    loaders (called once, on first use). `sorted_by_address` lets lookups bisect the address column."""

    def __init__(
        self,
        names: list[str],
        raws: list[str] | Callable[[], list[str]],
        signatures: list[str] | Callable[[], list[str]],
        addresses: np.ndarray | list[int],
        sizes: np.ndarray | list[int],
        files: list[str | None],
        file_ids: np.ndarray,
        lines: np.ndarray | list[int],
        inlined: np.ndarray,
        params: np.ndarray | list[int],
        *,
        sorted_by_address: bool = False,
    ) -> None:
        self.names = names
        self._raws = raws
        self._signatures = signatures
        self.addresses = addresses
        self.sizes = sizes
        self.files = files  # files[0] is None
        self.file_ids = file_ids
        self.lines = lines  # NO_LINE where unknown
        self.inlined = inlined
        self.params = params
        self.sorted_by_address = sorted_by_address
        self._first_at: dict[int, int] | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.names)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_raws"], state["_signatures"] = self.raws, self.signatures
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def raws(self) -> list[str]:
        if callable(self._raws):
            with self._lock:
                if callable(self._raws):
                    self._raws = self._raws()
        return self._raws

    @property
    def signatures(self) -> list[str]:
        if callable(self._signatures):
            with self._lock:
                if callable(self._signatures):
                    self._signatures = self._signatures()
        return self._signatures

    @classmethod
    def from_rows(cls, rows: Sequence[Row], *, sorted_by_address: bool = False) -> FunctionTable:
        files: dict[str | None, int] = {None: 0}
        columns: list[list[Any]] = [[] for _ in range(9)]
        for row in rows:
            for column, value in zip(columns, row, strict=True):
                column.append(value)
        names, raws, signatures, addresses, sizes, file_names, lines, inlined, params = columns
        file_ids = np.array([files.setdefault(file, len(files)) for file in file_names], dtype=np.int32)
        return cls(
            names, raws, signatures, int_column(addresses, np.uint64), int_column(sizes), list(files), file_ids,
            int_column([NO_LINE if line is None else line for line in lines]), np.array(inlined, dtype=bool),
            int_column(params), sorted_by_address=sorted_by_address,
        )

    def columns(self, indices: Sequence[int] | None = None) -> list[list[Any]]:
        """FunctionInfo's fields as nine lists (files and missing lines resolved), of every function or of
        `indices`: `map(FunctionInfo, *table.columns())` builds the functions."""
        picked = None if indices is None else list(indices)

        def column(values: Any) -> list[Any]:
            if isinstance(values, np.ndarray):
                listed: list[Any] = (values if picked is None else values[picked]).tolist()
                return listed
            return values if picked is None else [values[i] for i in picked]

        files = self.files
        file_ids = column(self.file_ids)
        lines = column(self.lines)
        return [
            column(self.names), column(self.raws), column(self.signatures), column(self.addresses),
            column(self.sizes), list(map(files.__getitem__, file_ids)),
            [None if line == NO_LINE else line for line in lines] if NO_LINE in lines else lines,
            column(self.inlined), column(self.params),
        ]

    def rows(self, indices: Sequence[int] | None = None) -> Iterator[Row]:
        """FunctionInfo field tuples, of every function or of `indices`."""
        return zip(*self.columns(indices), strict=True)

    def first_at(self, address: int) -> int | None:
        """Index of the first function at `address` that is not inline-only (table order)."""
        addresses = self.addresses
        if isinstance(addresses, np.ndarray) and self.sorted_by_address:
            if not 0 <= address < 2**64:
                return None
            key = np.array(address, dtype=addresses.dtype)
            low = int(np.searchsorted(addresses, key, side="left"))
            high = int(np.searchsorted(addresses, key, side="right"))
            if low == high:
                return None
            found = np.flatnonzero(~self.inlined[low:high])
            return low + int(found[0]) if len(found) else None
        if self._first_at is None:  # functions in no particular order: a dictionary, built once
            first: dict[int, int] = {}
            for i, (value, inlined) in enumerate(zip(_as_list(addresses), self.inlined.tolist(), strict=True)):
                if not inlined:
                    first.setdefault(value, i)
            self._first_at = first
        return self._first_at.get(address)


def _as_list(column: np.ndarray | list[int]) -> list[Any]:
    return column.tolist() if isinstance(column, np.ndarray) else column


# --- payload -----------------------------------------------------------------------------------------


def encode(table: FunctionTable) -> bytes:
    """The payload of a table: a JSON header, then segments (string blobs compressed, arrays raw)."""
    segments: list[tuple[str, bytes]] = [
        ("names", _strings(table.names)),
        ("raws", _strings(table.raws)),
        ("signatures", _strings(table.signatures)),
        ("file_ids", table.file_ids.astype("<i4").tobytes()),
        ("inlined", table.inlined.astype(bool).tobytes()),
    ]
    header: dict[str, Any] = {
        "count": len(table), "files": table.files[1:], "lists": {}, "segments": [],
        "sorted": table.sorted_by_address,
    }
    for column, dtype in (("addresses", "<u8"), ("sizes", "<i8"), ("lines", "<i8"), ("params", "<i8")):
        values = getattr(table, column)
        if isinstance(values, np.ndarray):
            segments.append((column, values.astype(dtype).tobytes()))
        else:
            header["lists"][column] = values
    # The text columns are repetitive: zlib level 1 is fast and enough, and it runs in threads (it lets go
    # of the GIL), one per column.
    with ThreadPoolExecutor(max_workers=len(_COMPRESSED)) as pool:
        data_of = dict(segments)
        packed = dict(zip(_COMPRESSED, pool.map(lambda name: zlib.compress(data_of[name], 1), _COMPRESSED),
                          strict=True))
    blob = bytearray()
    for name, data in segments:
        data = packed.get(name, data)
        header["segments"].append([name, len(blob), len(data), name in packed])
        blob += data
    header["crc32"] = zlib.crc32(blob)
    head = json.dumps(header, separators=(",", ":")).encode()
    return MAGIC + struct.pack("<I", len(head)) + head + bytes(blob)


_COMPRESSED = ("names", "raws", "signatures")


def _strings(values: list[str]) -> bytes:
    return "\0".join(values).encode("utf-8", "surrogatepass")


def _split(data: bytes, count: int) -> list[str]:
    if count == 0:
        return []
    values = data.decode("utf-8", "surrogatepass").split("\0")
    if len(values) != count:
        raise ValueError(f"expected {count} strings, found {len(values)}")
    return values


def decode(payload: bytes) -> FunctionTable:
    """The table of a payload written by `encode`; raises ValueError (or zlib.error) if it is damaged."""
    if not payload.startswith(MAGIC):
        raise ValueError("not a function table payload")
    at = len(MAGIC)
    (head_size,) = struct.unpack_from("<I", payload, at)
    at += 4
    header: dict[str, Any] = json.loads(payload[at : at + head_size])
    at += head_size
    view = memoryview(payload)
    if zlib.crc32(view[at:]) != header["crc32"]:
        raise ValueError("checksum mismatch")
    count = int(header["count"])
    segments: dict[str, tuple[int, int, bool]] = {}
    for name, offset, length, compressed in header["segments"]:
        if at + offset + length > len(payload):
            raise ValueError(f"segment {name} runs past the payload")
        segments[name] = (at + offset, length, bool(compressed))

    def raw(name: str) -> bytes | memoryview:
        start, length, compressed = segments[name]
        data = view[start : start + length]
        return zlib.decompress(data) if compressed else data

    def array(name: str, dtype: str) -> np.ndarray:
        values = np.frombuffer(raw(name), dtype=dtype)
        if len(values) != count:
            raise ValueError(f"column {name} has {len(values)} values, expected {count}")
        return values

    names = _split(bytes(raw("names")), count)

    def load_raws() -> list[str]:
        return _split(bytes(raw("raws")), count)

    def load_signatures() -> list[str]:
        return _split(bytes(raw("signatures")), count)

    lists: dict[str, list[int]] = header["lists"]

    def numbers(name: str, dtype: str) -> np.ndarray | list[int]:
        if name in lists:
            values = [int(value) for value in lists[name]]
            if len(values) != count:
                raise ValueError(f"column {name} has {len(values)} values, expected {count}")
            return values
        return array(name, dtype)

    files: list[str | None] = [None, *header["files"]]
    file_ids = array("file_ids", "<i4")
    if count and (int(file_ids.min()) < 0 or int(file_ids.max()) >= len(files)):
        raise ValueError("file index out of range")
    addresses = numbers("addresses", "<u8")
    return FunctionTable(
        names, load_raws, load_signatures, addresses, numbers("sizes", "<i8"), files, file_ids,
        numbers("lines", "<i8"), array("inlined", "?"), numbers("params", "<i8"),
        sorted_by_address=bool(header["sorted"]),
    )


# --- SQLite ------------------------------------------------------------------------------------------


def cache_key(build_id: str | None, path: str | Path) -> str:
    """Build id plus file size (`strip` keeps the build id, so a stripped copy must not share the entry);
    without a build id, the resolved path, size and modification time."""
    resolved = Path(path).resolve()
    stat = resolved.stat()
    if build_id:
        return f"build-id:{build_id}:{stat.st_size}"
    return f"file:{resolved}:{stat.st_size}:{stat.st_mtime_ns}"


@contextlib.contextmanager
def key_lock(cache_dir: Path, key: str) -> Iterator[None]:
    """Serialise building the same index within this process (other processes may still race)."""
    with _locks_guard:
        lock = _locks.setdefault((str(cache_dir), key), threading.Lock())
    with lock:
        yield


@contextlib.contextmanager
def _connect(cache_dir: Path) -> Iterator[sqlite3.Connection]:
    cache_dir.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(cache_dir / DB_NAME, timeout=30.0, isolation_level=None)
    try:
        connection.execute("PRAGMA busy_timeout = 30000")
        with contextlib.suppress(sqlite3.OperationalError):  # another connection may hold the lock right now
            connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.execute(_SCHEMA)
        yield connection
    finally:
        connection.close()


def fetch(cache_dir: Path, key: str) -> FunctionTable | None:
    try:
        with _connect(cache_dir) as connection:
            found = connection.execute(
                "SELECT format, payload FROM function_indexes WHERE key = ?", (key,)
            ).fetchone()
    except (sqlite3.DatabaseError, OSError) as exc:
        log.warning("symbol cache %s unreadable (%s); rebuilding the index", cache_dir / DB_NAME, exc)
        return None
    if found is None or found[0] != FORMAT:
        return None
    try:
        return decode(found[1])
    except (ValueError, KeyError, TypeError, IndexError, struct.error, zlib.error, UnicodeError) as exc:
        log.warning("symbol cache entry %s is damaged (%s); rebuilding the index", key, exc)
        return None


def store(cache_dir: Path, key: str, table: FunctionTable) -> None:
    payload = encode(table)
    try:
        with _connect(cache_dir) as connection:
            connection.execute(
                "INSERT OR REPLACE INTO function_indexes (key, format, created, functions, payload) "
                "VALUES (?, ?, ?, ?, ?)",
                (key, FORMAT, time.time(), len(table), payload),
            )
    except (sqlite3.DatabaseError, OSError) as exc:
        log.warning("could not write symbol cache %s: %s", cache_dir / DB_NAME, exc)
