"""A store query page as the client sees it, for the tests that read the store directly and check the JSON of
its events: store/query.py returns typed rows, mcp/wire.py shapes each one (debug_query does the same)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from strobe.mcp import wire
from strobe.store.query import EventFilter, query_events


@dataclass(frozen=True)
class WirePage:
    events: list[dict[str, Any]]
    total_count: int
    has_more: bool
    pids: list[int]


def query_wire(
    conn: sqlite3.Connection, session: int, session_id: str, flt: EventFilter, *, limit: int, offset: int,
    verbose: bool,
) -> WirePage:
    """query_events, with the page's events rendered by mcp/wire.py."""
    page = query_events(conn, session, flt, limit=limit, offset=offset)
    events = [wire.event(row, session_id, verbose) for row in page.events]
    return WirePage(events, page.total_count, page.has_more, page.pids)
