"""`strobe export` without a daemon: it reads the store under STROBE_HOME directly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.export.checks import check_chrome, html_data, load_chrome
from tests.export.dataset import store


def strobe(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STROBE_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "strobe", "export", *args], env=env, capture_output=True,
                          text=True, timeout=60, check=False)


def test_export_both_formats_and_list_sessions_for_an_unknown_one(tmp_path: Path) -> None:
    stored = store(tmp_path / "home")
    done = strobe(stored.home, stored.session_id)
    assert done.returncode == 0, done.stderr
    default = stored.home / "exports" / f"{stored.session_id}.json"
    assert done.stdout.startswith(f"{default}: 15 events, 2 threads (chrome, ")
    assert "ui.perfetto.dev" in done.stdout
    check_chrome(load_chrome(default))

    page = tmp_path / "t.html"
    done = strobe(stored.home, stored.session_id, "--format", "html", "-o", str(page))
    assert done.returncode == 0, done.stderr
    assert html_data(page)["session"]["id"] == stored.session_id and f"file://{page}" in done.stdout

    cut = strobe(stored.home, stored.session_id, "--max-events", "2", "--from", "1ms", "-o", str(tmp_path))
    assert cut.returncode == 0 and "Stopped at --max-events (2 events)" in cut.stderr and "--from/--to" in cut.stderr

    missing = strobe(stored.home, "nope")
    assert missing.returncode == 1
    assert "no session 'nope'" in missing.stderr and stored.session_id in missing.stderr and "crashed" in missing.stderr


def test_an_empty_home_says_there_are_no_sessions(tmp_path: Path) -> None:
    home = tmp_path / "empty"
    home.mkdir(mode=0o700)
    done = strobe(home, "any")
    assert done.returncode == 1 and "no sessions yet" in done.stderr
    assert not (home / "strobe.db").exists()  # exporting never creates a store
