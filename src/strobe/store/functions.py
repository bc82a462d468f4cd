"""Rows of the `functions` table: what a traced function id means in query results."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

FunctionRow = tuple[str, str | None, str | None, int | None, int, str | None]
"""(name, raw name, source file, line, parameter count, runtime: None for native code, else a RuntimeKind value)."""


def insert_functions(conn: sqlite3.Connection, rows: Sequence[FunctionRow]) -> list[int]:
    """Insert functions (writer thread) and return their keys, in order."""
    keys: list[int] = []
    for row in rows:
        cursor = conn.execute(
            "INSERT INTO functions (name, raw, file, line, params, runtime) VALUES (?, ?, ?, ?, ?, ?)", row)
        assert cursor.lastrowid is not None
        keys.append(cursor.lastrowid)
    return keys


def set_signatures(conn: sqlite3.Connection, plans: Sequence[tuple[int, str | None]]) -> None:
    """Store the register plans (daemon/signatures.py) of functions already inserted (writer thread): how
    query results show their arguments and return values. None clears a plan."""
    conn.executemany("UPDATE functions SET signature = ? WHERE key = ?", [(plan, key) for key, plan in plans])
