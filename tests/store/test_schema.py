"""The store's files are the user's only: SQLite gives -wal and -shm the database's mode, so it is created 0600."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from strobe.store.schema import connect


@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0)
    yield
    os.umask(previous)


def test_database_wal_and_shm_are_0600(tmp_path: Path, open_umask: None) -> None:
    db = tmp_path / "strobe.db"
    writer = connect(db)
    reader = connect(db, readonly=True)
    try:
        writer.execute("INSERT INTO meta (key, value) VALUES ('probe', 'x')")
        assert reader.execute("SELECT value FROM meta WHERE key = 'probe'").fetchone() == ("x",)
        files = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    finally:
        reader.close()
        writer.close()
    assert files == {"strobe.db": 0o600, "strobe.db-wal": 0o600, "strobe.db-shm": 0o600}


def test_files_an_older_version_left_readable_are_narrowed(tmp_path: Path) -> None:
    db = tmp_path / "strobe.db"
    connect(db).close()
    for name in ("strobe.db", "strobe.db-wal", "strobe.db-shm"):
        (tmp_path / name).touch()
        os.chmod(tmp_path / name, 0o644)
    conn = connect(db)
    try:
        files = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    finally:
        conn.close()
    assert files == {"strobe.db": 0o600, "strobe.db-wal": 0o600, "strobe.db-shm": 0o600}
