"""The daemon's log: daemon.log and its rotated files are the user's only (0600), whatever the umask."""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from strobe.paths import StrobePaths
from strobe.service import PrivateRotatingFileHandler, configure_logging


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0)
    yield
    os.umask(previous)


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield root
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)


def test_the_log_and_its_rotations_are_0600(tmp_path: Path, open_umask: None) -> None:
    log_file = tmp_path / "daemon.log"
    handler = PrivateRotatingFileHandler(log_file, maxBytes=200, backupCount=2, encoding="utf-8")
    logger = logging.Logger("rotation-test")
    logger.addHandler(handler)
    try:
        for n in range(40):
            logger.warning("line %d of a log that rotates", n)
    finally:
        handler.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["daemon.log", "daemon.log.1", "daemon.log.2"]
    assert {name: mode(tmp_path / name) for name in files} == dict.fromkeys(files, 0o600)


def test_configure_logging_makes_existing_logs_private(
    tmp_path: Path, open_umask: None, root_logger: logging.Logger
) -> None:
    paths = StrobePaths(tmp_path)
    for name in ("daemon.log", "daemon.log.1", "daemon.log.2"):
        (tmp_path / name).write_text("from an older version\n")
        os.chmod(tmp_path / name, 0o644)
    configure_logging(paths)
    logging.getLogger("strobe").warning("hello")
    assert [mode(tmp_path / name) for name in ("daemon.log", "daemon.log.1", "daemon.log.2")] == [0o600] * 3
