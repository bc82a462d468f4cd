"""Fixtures of the daemon's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from strobe.store.writer import Writer


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[Writer]:
    w = Writer(tmp_path / "strobe.db")
    w.start()
    yield w
    w.close()
