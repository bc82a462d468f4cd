"""STROBE_HOME is a private directory of the user's own: created 0700 when missing, refused (never changed) when
it is a symlink, not a directory, someone else's, or writable by others; files are created 0600."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from strobe.paths import StrobePaths, UnsafeHomeError, private_dir, private_opener


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """umask 0: whatever mode a file gets is the one Strobe asked for."""
    previous = os.umask(0)
    yield
    os.umask(previous)


def test_a_missing_home_is_created_private(tmp_path: Path, open_umask: None) -> None:
    home = tmp_path / "nested" / "home"
    StrobePaths(home).ensure_home()
    assert home.is_dir() and mode(home) == 0o700


def test_a_private_home_is_accepted_and_left_as_it_is(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    os.chmod(home, 0o750)  # readable by the group: allowed, and not tightened behind the user's back
    StrobePaths(home).ensure_home()
    assert mode(home) == 0o750


@pytest.mark.parametrize(
    ("bits", "who"), [(0o770, "its group"), (0o707, "every user"), (0o777, "its group and every user")]
)
def test_a_home_others_can_write_is_refused_and_not_chmodded(tmp_path: Path, bits: int, who: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    os.chmod(home, bits)
    with pytest.raises(UnsafeHomeError) as raised:
        StrobePaths(home).ensure_home()
    message = str(raised.value)
    assert f"writable by {who}" in message and f"`chmod 700 {home}`" in message
    assert mode(home) == bits


def test_a_symlinked_home_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(UnsafeHomeError) as raised:
        StrobePaths(link).ensure_home()
    message = str(raised.value)
    assert "is a symlink" in message and str(real) in message and f"mkdir -m 700 {link}" in message
    assert link.is_symlink() and list(real.iterdir()) == []


def test_a_dangling_symlink_is_refused_not_followed(tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(UnsafeHomeError, match="is a symlink"):
        StrobePaths(link).ensure_home()
    assert not (tmp_path / "nowhere").exists()


def test_a_file_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("")
    with pytest.raises(UnsafeHomeError, match="is not a directory"):
        StrobePaths(home).ensure_home()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory another user owns needs root")
def test_another_users_home_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    os.chown(home, 65534, 65534)
    with pytest.raises(UnsafeHomeError) as raised:
        StrobePaths(home).ensure_home()
    assert "belongs to uid 65534" in str(raised.value) and "not to you" in str(raised.value)
    assert os.stat(home).st_uid == 65534


def test_private_opener_creates_0600_and_narrows_an_existing_file(tmp_path: Path, open_umask: None) -> None:
    fresh = tmp_path / "fresh"
    with open(fresh, "w", opener=private_opener) as out:
        out.write("x")
    assert mode(fresh) == 0o600
    old = tmp_path / "old"
    old.write_text("kept")
    os.chmod(old, 0o644)
    with open(old, "a", opener=private_opener) as out:
        out.write("!")
    assert mode(old) == 0o600 and old.read_text() == "kept!"


def test_private_opener_does_not_follow_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("")
    os.chmod(target, 0o644)
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(OSError), open(link, "a", opener=private_opener):
        pass
    assert mode(target) == 0o644


def test_private_dir_creates_and_narrows(tmp_path: Path) -> None:
    previous = os.umask(0)
    try:
        made = private_dir(tmp_path / "a" / "b")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o700
    wide = tmp_path / "wide"
    wide.mkdir(mode=0o755)
    os.chmod(wide, 0o755)
    assert stat.S_IMODE(os.stat(private_dir(wide)).st_mode) == 0o700
