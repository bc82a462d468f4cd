"""Test helper: the summary tables of a store (store/counts.py), and what a rebuild from its events gives."""

from __future__ import annotations

import sqlite3
from typing import Any

import numpy as np

from strobe.store import counts


def summaries(conn: sqlite3.Connection) -> dict[str, Any]:
    """event_counts and event_time_counts rows, and the postings as sorted (id, ts, value) per (session, dim,
    class): how postings are split into rows is not part of what they say."""
    postings: dict[tuple[int, int, int], list[tuple[int, int, int | None]]] = {}
    for session, dim, cls, ids, ts, vals in conn.execute("SELECT session, dim, cls, ids, ts, vals FROM event_postings"):
        values = [None] * (len(ids) // 8) if vals is None else np.frombuffer(vals, np.int64).tolist()
        postings.setdefault((session, dim, cls), []).extend(
            zip(np.frombuffer(ids, np.int64).tolist(), np.frombuffer(ts, np.int64).tolist(), values, strict=True)
        )
    return {
        "kinds": conn.execute("SELECT session, kind, func, n FROM event_counts ORDER BY 1, 2, 3").fetchall(),
        "buckets": conn.execute("SELECT session, bucket, n FROM event_time_counts ORDER BY 1, 2").fetchall(),
        "postings": {key: sorted(rows) for key, rows in sorted(postings.items())},
    }


def rebuilt(conn: sqlite3.Connection) -> dict[str, Any]:
    """The summaries that counts.prepare rebuilds from a copy of the store's events."""
    copy = sqlite3.connect(":memory:")
    try:
        conn.backup(copy)
        copy.execute("DELETE FROM meta WHERE key = 'event_counts'")
        counts.prepare(copy)
        return summaries(copy)
    finally:
        copy.close()
