"""The last function events of one thread before a moment: what a crash event lists as `lastEvents`."""

from __future__ import annotations

import sqlite3
from typing import Any

from strobe.store.schema import EventKind

SCANNED = 100_000  # events looked at backwards from the moment, at most (a thread may have made no calls)

_SQL = """
SELECT r.id, r.ts, r.kind, f.name FROM (
    SELECT e.id, e.ts, e.kind, e.pid, e.tid, e.func FROM events e INDEXED BY events_by_time
    WHERE e.session = ? AND e.ts <= ? ORDER BY e.ts DESC, e.id DESC LIMIT ?
) AS r
LEFT JOIN functions f ON f.key = r.func
WHERE r.pid = ? AND r.tid = ? AND r.kind IN (?, ?)
ORDER BY r.ts DESC, r.id DESC LIMIT ?
"""


def last_calls(
    conn: sqlite3.Connection, session: int, session_id: str, pid: int, tid: int, before_ns: int, limit: int
) -> list[dict[str, Any]]:
    """Up to `limit` function_enter/function_exit events of thread (pid, tid) at or before `before_ns`, oldest
    first, as {id, eventType, function, timestampNs}. Walks the time index backwards from `before_ns`, through at
    most SCANNED events of the session."""
    rows = conn.execute(_SQL, (session, before_ns, SCANNED, pid, tid, int(EventKind.FUNCTION_ENTER),
                               int(EventKind.FUNCTION_EXIT), limit)).fetchall()
    return [{"id": f"{session_id}-{eid}", "eventType": EventKind(kind).wire_name, "function": name,
             "timestampNs": ts} for eid, ts, kind, name in reversed(rows)]
