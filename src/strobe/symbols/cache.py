"""SQLite cache of function indexes: one compressed row per binary, keyed by build id (else path+size+mtime).

Each call opens its own connection (WAL, busy timeout), so threads and processes may read and write at
the same time; a lost race just means the same index is written twice. A damaged or foreign database
is treated as a miss, never as an error.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

DB_NAME = "symbols.db"
# Bump when the scanner or the naming rules change what an index contains: old rows are then ignored.
FORMAT = 1

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


def fetch(cache_dir: Path, key: str) -> list[Row] | None:
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
        return _decode(found[1])
    except (ValueError, zlib.error, TypeError, IndexError) as exc:
        log.warning("symbol cache entry %s is damaged (%s); rebuilding the index", key, exc)
        return None


def store(cache_dir: Path, key: str, rows: Sequence[Row]) -> None:
    payload = _encode(rows)
    try:
        with _connect(cache_dir) as connection:
            connection.execute(
                "INSERT OR REPLACE INTO function_indexes (key, format, created, functions, payload) "
                "VALUES (?, ?, ?, ?, ?)",
                (key, FORMAT, time.time(), len(rows), payload),
            )
    except (sqlite3.DatabaseError, OSError) as exc:
        log.warning("could not write symbol cache %s: %s", cache_dir / DB_NAME, exc)


def _encode(rows: Sequence[Row]) -> bytes:
    """Columns, with repeated values folded: file paths in a table, raw/signature null when == name."""
    files: dict[str | None, int] = {None: 0}
    names, raws, signatures, addresses, sizes, file_ids, lines, inlined, params = ([] for _ in range(9))
    for name, raw, signature, address, size, file, line, inline_only, nparams in rows:
        names.append(name)
        raws.append(None if raw == name else raw)
        signatures.append(None if signature == name else signature)
        addresses.append(address)
        sizes.append(size)
        file_ids.append(files.setdefault(file, len(files)))
        lines.append(line)
        inlined.append(1 if inline_only else 0)
        params.append(nparams)
    document = {
        "files": list(files)[1:],
        "columns": [names, raws, signatures, addresses, sizes, file_ids, lines, inlined, params],
    }
    return zlib.compress(json.dumps(document, separators=(",", ":")).encode(), 1)


def _decode(payload: bytes) -> list[Row]:
    document: dict[str, Any] = json.loads(zlib.decompress(payload))
    files: list[str | None] = [None, *document["files"]]
    names, raws, signatures, addresses, sizes, file_ids, lines, inlined, params = document["columns"]
    return [
        (
            name,
            name if raw is None else raw,
            name if signature is None else signature,
            address,
            size,
            files[file_id],
            line,
            bool(inline_only),
            nparams,
        )
        for name, raw, signature, address, size, file_id, line, inline_only, nparams in zip(
            names, raws, signatures, addresses, sizes, file_ids, lines, inlined, params, strict=True
        )
    ]
