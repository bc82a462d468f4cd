"""bench/symbols_bench.py at a tiny size: it must build, index and match in a few seconds (no timing checks)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "bench" / "symbols_bench.py"


def load_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("symbols_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_tiny_run_reports_every_figure(tmp_path: Path) -> None:
    bench = load_bench()
    results = bench.run(tmp_path, 2000)
    assert set(results) >= {"functions", "debug_info_mb", "compile_s", "cold_s", "cached_s", "match_s"}
    assert all(isinstance(value, float) and value >= 0 for value in results.values())
    assert abs(results["functions"] - 2000) < 2000 * 0.1  # GROUP_FUNCTIONS is what a group really yields
    assert results["matched"] >= 11
    again = bench.run(tmp_path, 2000)  # the binary is reused, not rebuilt
    assert again["compile_s"] == results["compile_s"] and again["functions"] == results["functions"]
