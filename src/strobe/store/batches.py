"""What producers hand the single writer (store/writer.py), and how it inserts it: rows in EVENT_COLUMNS order, and
column groups — many rows per INSERT statement, absent values never bound, constant columns written as literals."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from strobe.store import counts
from strobe.store.schema import EVENT_COLUMNS

EventRow = tuple[Any, ...]
"""One event in EVENT_COLUMNS order, without its id."""
SummaryRow = tuple[Any, ...]
SUMMARY_COLUMNS = ("id", "ts", "kind", "func", "duration", "retval")
"""What the count tables need of an event submitted in groups (submit_groups)."""


@dataclass(frozen=True)
class ColumnGroup:
    """Event rows that fill the same columns: `values` holds len(columns) values per row, row after row (a flat
    list, so a producer builds it with one numpy `tolist()` and no Python object per row). `constants` are
    columns with the same integer value in every row; they are written into the SQL instead of bound."""

    columns: tuple[str, ...]
    constants: tuple[tuple[str, int], ...]
    values: list[Any]

    @property
    def rows(self) -> int:
        return len(self.values) // len(self.columns)


@dataclass(frozen=True)
class EventBlock:
    """`count` events of one session holding ids first_id.. (from reserve_ids), as column groups, with the
    summary of them that the count tables need (store/counts.py)."""

    session: int
    first_id: int
    count: int
    groups: Sequence[ColumnGroup]
    summary: counts.BlockSummary | None  # None: no event of the block is stored


INSERT_ROW = (
    f"INSERT INTO events (id, {', '.join(EVENT_COLUMNS)}) "
    f"VALUES ({', '.join('?' * (len(EVENT_COLUMNS) + 1))})"
)




_ROWS_PER_STATEMENT = 64
"""Rows per multi-row INSERT: SQLite's per-statement work (and a release of the GIL) is paid once per this many
rows instead of once per row. The tail of a group goes in statements of 32, 16, ... 1 rows."""


def insert_group(conn: sqlite3.Connection, group: ColumnGroup) -> None:
    values, width = group.values, len(group.columns)
    done, rows = 0, group.rows
    size = _ROWS_PER_STATEMENT
    while done < rows:
        while size > rows - done:
            size //= 2
        sql = _multi_insert(group.columns, group.constants, size)
        while rows - done >= size:
            conn.execute(sql, values[done * width:(done + size) * width])
            done += size


@functools.lru_cache(maxsize=256)
def _multi_insert(columns: tuple[str, ...], constants: tuple[tuple[str, int], ...], rows: int) -> str:
    names = [*columns, *(name for name, _ in constants)]
    unknown = set(names) - {"id", *EVENT_COLUMNS}
    if unknown or len(set(names)) != len(names):
        raise ValueError(f"not distinct event columns: {names}")
    row = "(" + ", ".join(["?"] * len(columns) + [str(int(value)) for _, value in constants]) + ")"
    return f"INSERT INTO events ({', '.join(names)}) VALUES {', '.join([row] * rows)}"
