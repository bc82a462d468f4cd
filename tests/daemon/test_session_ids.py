"""session_base_id: `{binary}-{YYYY-MM-DD}-{HHhMM}`."""

from __future__ import annotations

from datetime import datetime

import pytest

from strobe.daemon.session_ids import session_base_id

WHEN = datetime(2026, 2, 5, 14, 32, 59, 999_999)


def test_format() -> None:
    assert session_base_id("/home/me/proj/server", WHEN) == "server-2026-02-05-14h32"


def test_zero_padding() -> None:
    assert session_base_id("/bin/app", datetime(2026, 1, 2, 3, 4)) == "app-2026-01-02-03h04"


def test_midnight() -> None:
    assert session_base_id("app", datetime(2025, 12, 31, 0, 0)) == "app-2025-12-31-00h00"


@pytest.mark.parametrize(
    "path", ["server", "./server", "build/debug/server", "/a/b/c/server", "/x/y/server/"]
)
def test_basename_only(path: str) -> None:
    assert session_base_id(path, WHEN) == "server-2026-02-05-14h32"


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/tmp/my prog", "my_prog"),
        ("/tmp/my   prog(1)", "my_prog_1"),  # runs of unsafe characters become one '_', edges stripped
        ("/tmp/a$b&c", "a_b_c"),
        ("/tmp/ünïcode", "n_code"),
        ("/tmp/keep.these_+-", "keep.these_+-"),
        ("/tmp/python3.11", "python3.11"),
        ("/tmp/!!!", "program"),
        ("", "program"),
        ("/tmp/__init__", "init"),
    ],
)
def test_unsafe_characters_replaced(path: str, name: str) -> None:
    base = session_base_id(path, WHEN)
    assert base == f"{name}-2026-02-05-14h32"


@pytest.mark.parametrize("path", ["/tmp/a b", "/tmp/x\ny", "/tmp/'quoted'", "/tmp/semi;colon", "/tmp/ü"])
def test_result_uses_only_safe_characters(path: str) -> None:
    base = session_base_id(path, WHEN)
    assert all(ch.isascii() and (ch.isalnum() or ch in "._+-") for ch in base)
