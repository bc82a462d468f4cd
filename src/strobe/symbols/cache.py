"""Function tables (an index as columns) and their SQLite cache: one row per binary, keyed by build id
(else path+size+mtime), holding numpy arrays and string blocks.

A `FunctionTable` keeps numbers in numpy arrays and each text column (names, raw names, signatures) as a
list or, for raw names and signatures loaded from the cache, as `PackedStrings`: zlib blocks of BLOCK
strings, so that building a few hundred FunctionInfo decodes a few dozen blocks, not 400k strings; the
whole list is decoded the first time it is asked for. The names, which pattern matching reads in full,
are stored plain and split when the table is loaded (a thread that runs while the process is spawned):
reading 12 MB more costs less than inflating them. Integer columns are stored in the narrowest type that
holds them, addresses as differences. A cached index of 400k functions is ~20 MB and loads in ~40 ms,
most of it creating the 400k name strings.

Each call opens its own connection (WAL, busy timeout), so threads and processes may read and write at
the same time; a lost race just means the same index is written twice. A damaged or foreign database or
entry is treated as a miss, never as an error.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import sqlite3
import struct
import threading
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from strobe.paths import private_dir

log = logging.getLogger(__name__)

DB_NAME = "symbols.db"
# Bump when the scanner, the naming rules or the payload layout change: old rows are then ignored.
FORMAT = 3
MAGIC = b"STROBE-FUNCTIONS\x03"
NO_LINE = -(2**63)  # a missing DW_AT_decl_line in the line column
BLOCK = 512  # strings per compressed block: ~20 KB of text, a few tens of µs to decode

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


class PackedStrings:
    """A column of strings as zlib blocks of BLOCK strings joined by NUL (`bounds`: where each block
    starts in `data`, then where the last ends). A block is decoded when one of its strings is first read."""

    def __init__(self, data: bytes | memoryview, bounds: np.ndarray, count: int) -> None:
        blocks = -(-count // BLOCK)
        if len(bounds) != blocks + 1 or int(bounds[0]) != 0 or int(bounds[-1]) != len(data):
            raise ValueError("string blocks do not cover their segment")
        if blocks and bool(np.any(bounds[1:] < bounds[:-1])):
            raise ValueError("string blocks out of order")
        self.data = data
        self.bounds = bounds
        self._count = count
        self._decoded: dict[int, list[str]] = {}

    @classmethod
    def pack(cls, values: Sequence[str]) -> PackedStrings:
        """Compress `values` (strings without NUL, else ValueError)."""
        blocks = [zlib.compress(_joined(values[i : i + BLOCK]), 1) for i in range(0, len(values), BLOCK)]
        bounds = np.cumsum([0, *map(len, blocks)], dtype=np.uint64)
        return cls(b"".join(blocks), bounds, len(values))

    def __len__(self) -> int:
        return self._count

    def __reduce__(self) -> tuple[type[PackedStrings], tuple[bytes, np.ndarray, int]]:
        return PackedStrings, (bytes(self.data), self.bounds, self._count)

    def _block(self, block: int) -> list[str]:
        strings = self._decoded.get(block)
        if strings is None:  # two threads may both decode a block: the same strings, harmless
            data = zlib.decompress(self.data[int(self.bounds[block]) : int(self.bounds[block + 1])])
            strings = _split(data, min(BLOCK, self._count - block * BLOCK))
            self._decoded[block] = strings
        return strings

    def pick(self, indices: Iterable[int]) -> list[str]:
        """The strings at `indices` (negative ones count from the end), decoding only their blocks."""
        count, block = self._count, self._block
        picked: list[str] = []
        for i in indices:
            if i < 0:
                i += count
            if not 0 <= i < count:
                raise IndexError("string index out of range")
            picked.append(block(i // BLOCK)[i % BLOCK])
        return picked

    def strings(self) -> list[str]:
        """Every string, in order."""
        data = self.data
        blocks = (zlib.decompress(data[start:end]) for start, end in itertools.pairwise(self.bounds.tolist()))
        return _split(b"\0".join(blocks), self._count)


Strings = list[str] | PackedStrings


class FunctionTable:
    """The functions of one binary as columns, in index order. The text columns may be given packed
    (decoded in full on first use of the attribute, a few rows at a time by `columns(indices)`).
    `sorted_by_address` lets lookups bisect the address column."""

    def __init__(
        self,
        names: Strings,
        raws: Strings,
        signatures: Strings,
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
        self._names = names
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
        return len(self._names)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)  # packed columns stay packed
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    @property
    def names(self) -> list[str]:
        return self._text("_names")

    @property
    def raws(self) -> list[str]:
        return self._text("_raws")

    @property
    def signatures(self) -> list[str]:
        return self._text("_signatures")

    def _text(self, attribute: str) -> list[str]:
        """A text column as a list, decoded (once) if it is still packed."""
        column: Strings = getattr(self, attribute)
        if isinstance(column, PackedStrings):
            with self._lock:
                column = getattr(self, attribute)
                if isinstance(column, PackedStrings):
                    column = column.strings()
                    setattr(self, attribute, column)
        return column

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
        `indices`: `map(FunctionInfo, *table.columns())` builds the functions. Reading a few rows decodes
        only their blocks of a packed text column."""
        picked = None if indices is None else list(indices)

        def column(values: Any) -> list[Any]:
            if isinstance(values, np.ndarray):
                listed: list[Any] = (values if picked is None else values[picked]).tolist()
                return listed
            return values if picked is None else [values[i] for i in picked]

        def text(attribute: str) -> list[str]:
            values: Strings = getattr(self, attribute)
            if picked is None:
                return self._text(attribute)
            return values.pick(picked) if isinstance(values, PackedStrings) else [values[i] for i in picked]

        files = self.files
        file_ids = column(self.file_ids)
        lines = column(self.lines)
        return [
            text("_names"), text("_raws"), text("_signatures"), column(self.addresses),
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


def _joined(values: Sequence[str]) -> bytes:
    data = "\0".join(values).encode("utf-8", "surrogatepass")
    if data.count(b"\0") != max(len(values) - 1, 0):
        raise ValueError("a name contains a NUL character")
    return data


def _split(data: bytes | memoryview, count: int) -> list[str]:
    if count == 0:
        return []
    values = str(data, "utf-8", "surrogatepass").split("\0")
    if len(values) != count:
        raise ValueError(f"expected {count} strings, found {len(values)}")
    return values


# --- payload -----------------------------------------------------------------------------------------

_PACKED = ("raws", "signatures")
# Integer columns: (name, type in memory, value standing for "unknown"). Addresses are stored as differences.
_INTEGERS: tuple[tuple[str, type[np.integer[Any]], int | None], ...] = (
    ("addresses", np.uint64, None), ("sizes", np.int64, None), ("lines", np.int64, NO_LINE),
    ("params", np.int64, None), ("file_ids", np.int32, None),
)
_WIDTHS = tuple(np.dtype(f"<{kind}{size}") for size in (1, 2, 4, 8) for kind in "ui")


def encode(table: FunctionTable) -> bytes:
    """The payload of a table: a JSON header, then segments (text blocks compressed, integers narrowed)."""
    texts: list[Strings] = [table._raws, table._signatures]
    # Compressing takes most of the time; zlib lets go of the GIL: one thread per column.
    with ThreadPoolExecutor(max_workers=len(texts)) as pool:
        packed = list(pool.map(lambda v: v if isinstance(v, PackedStrings) else PackedStrings.pack(v), texts))
    # The names are read in full on loading: kept plain, they cost less to read than to decompress.
    segments: list[tuple[str, bytes | memoryview]] = [("names", _joined(table.names))]
    for name, strings in zip(_PACKED, packed, strict=True):
        segments += [(name, strings.data), (f"{name}.bounds", strings.bounds.astype("<u8").tobytes())]
    header: dict[str, Any] = {
        "count": len(table), "files": table.files[1:], "lists": {}, "integers": {}, "segments": [],
        "sorted": table.sorted_by_address,
    }
    for name, _, missing in _INTEGERS:
        values = getattr(table, name)
        if not isinstance(values, np.ndarray):
            header["lists"][name] = values
            continue
        if name == "addresses":  # sorted: small differences (modulo 2**64, so any order comes back intact)
            values = np.diff(values.astype(np.uint64), prepend=np.uint64(0))
        stored, marker = _narrow(values, missing)
        header["integers"][name] = [stored.dtype.str, marker]
        segments.append((name, stored.tobytes()))
    segments.append(("inlined", np.packbits(table.inlined.astype(bool)).tobytes()))
    blob = bytearray()
    for name, data in segments:
        header["segments"].append([name, len(blob), len(data)])
        blob += data
    header["crc32"] = zlib.crc32(blob)
    head = json.dumps(header, separators=(",", ":")).encode()
    return MAGIC + struct.pack("<I", len(head)) + head + bytes(blob)


def _narrow(values: np.ndarray, missing: int | None) -> tuple[np.ndarray, int | None]:
    """`values` in the narrowest integer type that holds them, and the value standing there for
    `missing` (that type's largest, if any value is missing)."""
    absent = values == missing if missing is not None else None
    some_absent = absent is not None and bool(absent.any())
    known = values[~absent] if absent is not None and some_absent else values
    low, high = (int(known.min()), int(known.max())) if len(known) else (0, 0)
    for dtype in _WIDTHS:
        limits = np.iinfo(dtype)
        if limits.min <= low and high + some_absent <= limits.max:
            stored = values.astype(dtype)
            if not some_absent:
                return stored, None
            stored[absent] = limits.max
            return stored, int(limits.max)
    wide = values.astype(values.dtype.newbyteorder("<"))  # as wide as it gets: `missing` stands for itself
    return wide, missing if some_absent else None


def decode(payload: bytes) -> FunctionTable:
    """The table of a payload written by `encode`; raises ValueError (or zlib.error) if it is damaged.
    The names are decoded now (pattern matching reads them all), raw names and signatures when read."""
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
    segments: dict[str, memoryview] = {}
    for name, offset, length in header["segments"]:
        if offset < 0 or length < 0 or at + offset + length > len(payload):
            raise ValueError(f"segment {name} runs past the payload")
        segments[name] = view[at + offset : at + offset + length]

    def text(name: str) -> PackedStrings:  # copied out, so that the payload can be freed
        return PackedStrings(bytes(segments[name]), np.frombuffer(segments[f"{name}.bounds"], dtype="<u8").copy(),
                             count)

    lists: dict[str, list[int]] = header["lists"]

    def integers(name: str, dtype: type[np.integer[Any]], missing: int | None) -> np.ndarray | list[int]:
        if name in lists:
            listed = [int(value) for value in lists[name]]
            if len(listed) != count:
                raise ValueError(f"column {name} has {len(listed)} values, expected {count}")
            return listed
        spec, marker = header["integers"][name]
        stored_type = np.dtype(spec)
        if stored_type not in _WIDTHS:
            raise ValueError(f"column {name} has unexpected type {spec}")
        stored = np.frombuffer(segments[name], dtype=stored_type)
        if len(stored) != count:
            raise ValueError(f"column {name} has {len(stored)} values, expected {count}")
        values = np.cumsum(stored, dtype=np.uint64) if name == "addresses" else stored.astype(dtype)
        if marker is not None and missing is not None:
            values[stored == marker] = missing
        return values

    files: list[str | None] = [None, *header["files"]]
    numbers = {name: integers(name, dtype, missing) for name, dtype, missing in _INTEGERS}
    file_ids = numbers.pop("file_ids")
    if not isinstance(file_ids, np.ndarray):
        raise ValueError("file index column is not an array")
    if count and (int(file_ids.min()) < 0 or int(file_ids.max()) >= len(files)):
        raise ValueError("file index out of range")
    inlined = segments["inlined"]
    if len(inlined) != (count + 7) // 8:
        raise ValueError("column inlined has the wrong length")
    return FunctionTable(
        _split(segments["names"], count), text("raws"), text("signatures"), numbers["addresses"], numbers["sizes"],
        files, file_ids, numbers["lines"], np.unpackbits(np.frombuffer(inlined, np.uint8), count=count).astype(bool),
        numbers["params"], sorted_by_address=bool(header["sorted"]),
    )


# --- SQLite ------------------------------------------------------------------------------------------


def cache_key(build_id: str | None, path: str | Path, debug_file: str | None = None) -> str:
    """Build id plus file size (`strip` keeps the build id, so a stripped copy must not share the entry);
    without a build id, the resolved path, size and modification time. `debug_file`: the identity of the
    separate debug file the DWARF comes from (path, size, mtime), so finding one later makes a new entry."""
    resolved = Path(path).resolve()
    stat = resolved.stat()
    key = (f"build-id:{build_id}:{stat.st_size}" if build_id
           else f"file:{resolved}:{stat.st_size}:{stat.st_mtime_ns}")
    return f"{key}:debug:{debug_file}" if debug_file else key


@contextlib.contextmanager
def key_lock(cache_dir: Path, key: str) -> Iterator[None]:
    """Serialise building the same index within this process (other processes may still race)."""
    with _locks_guard:
        lock = _locks.setdefault((str(cache_dir), key), threading.Lock())
    with lock:
        yield


@contextlib.contextmanager
def _connect(cache_dir: Path) -> Iterator[sqlite3.Connection]:
    private_dir(cache_dir)
    connection = sqlite3.connect(cache_dir / DB_NAME, timeout=30.0, isolation_level=None)
    try:
        connection.execute("PRAGMA busy_timeout = 30000")
        connection.execute("PRAGMA page_size = 65536")  # a new database only: big blobs read faster
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
    except (ValueError, KeyError, TypeError, IndexError, OverflowError, struct.error, zlib.error, UnicodeError) as exc:
        log.warning("symbol cache entry %s is damaged (%s); rebuilding the index", key, exc)
        return None


def store(cache_dir: Path, key: str, table: FunctionTable) -> None:
    try:
        payload = encode(table)
    except ValueError as exc:
        log.warning("symbol index %s not cached: %s", key, exc)
        return
    try:
        with _connect(cache_dir) as connection:
            connection.execute(
                "INSERT OR REPLACE INTO function_indexes (key, format, created, functions, payload) "
                "VALUES (?, ?, ?, ?, ?)",
                (key, FORMAT, time.time(), len(table), payload),
            )
    except (sqlite3.DatabaseError, OSError) as exc:
        log.warning("could not write symbol cache %s: %s", cache_dir / DB_NAME, exc)
