"""Test durations kept for debug_test's baselines (strobe.store.test_durations)."""

from __future__ import annotations

from pathlib import Path

from strobe.store import test_durations as td
from strobe.store.schema import connect


def test_keeps_the_last_ten_of_each_test_newest_first(tmp_path: Path) -> None:
    conn = connect(tmp_path / "strobe.db")
    try:
        for run in range(12):
            td.record(conn, "cargo", [("parser::parses", float(run)), ("parser::fails", 100.0 + run)], 1_000 + run)
        td.record(conn, "go", [("TestX", 5.0)], 2_000)
        kept = td.load_all(conn)
        assert kept[("cargo", "parser::parses")] == [float(run) for run in range(11, 1, -1)]
        assert len(kept[("cargo", "parser::fails")]) == td.KEPT_PER_TEST
        assert kept[("go", "TestX")] == [5.0]
    finally:
        conn.close()
