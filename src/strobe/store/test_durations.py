"""How long each test took in its last runs (debug_test_status's currentTestBaselineMs). Write functions take
the writer's connection; reads take any."""

from __future__ import annotations

import sqlite3

KEPT_PER_TEST = 10


def record(conn: sqlite3.Connection, framework: str, durations: list[tuple[str, float]], at: int) -> None:
    """Add one run's durations, keeping the last KEPT_PER_TEST of each test."""
    conn.executemany("INSERT INTO test_durations (framework, name, duration_ms, at) VALUES (?, ?, ?, ?)",
                     [(framework, name, ms, at) for name, ms in durations])
    conn.executemany(
        "DELETE FROM test_durations WHERE framework = ? AND name = ? AND rowid NOT IN (SELECT rowid FROM "
        "test_durations WHERE framework = ? AND name = ? ORDER BY at DESC, rowid DESC LIMIT ?)",
        [(framework, name, framework, name, KEPT_PER_TEST) for name, _ in durations],
    )


def load_all(conn: sqlite3.Connection) -> dict[tuple[str, str], list[float]]:
    """Every test's kept durations, newest first."""
    out: dict[tuple[str, str], list[float]] = {}
    for framework, name, ms in conn.execute(
        "SELECT framework, name, duration_ms FROM test_durations ORDER BY at DESC, rowid DESC"
    ):
        out.setdefault((framework, name), []).append(float(ms))
    return out
