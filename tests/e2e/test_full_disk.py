"""A real full disk: STROBE_HOME on a small tmpfs that a chatty program fills (needs root to mount it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import StrobeClient, connect, poll, processes_under, shutdown_daemon

pytestmark = [pytest.mark.anyio, pytest.mark.e2e,
              pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")]

DISK_MIB = 96


def _free_mib(path: Path) -> float:
    stats = os.statvfs(path)
    return stats.f_bavail * stats.f_frsize / (1 << 20)


@pytest.fixture
def small_home() -> Iterator[Path]:
    home = Path(tempfile.mkdtemp(prefix="sd-", dir="/tmp"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MIB}m,mode=0700", "tmpfs", str(home)], check=True)
    try:
        (home / "settings.json").write_text(json.dumps({"events.maxOutputPerSession": 10_000_000}))
        yield home
    finally:
        shutdown_daemon(home)
        if os.environ.get("STROBE_KEEP_LOGS"):
            shutil.copy(home / "daemon.log", Path(os.environ["STROBE_KEEP_LOGS"]) / f"{home.name}.log")
        for pid in processes_under(home):
            os.kill(pid, 9)
        subprocess.run(["umount", "-l", str(home)], check=False)
        shutil.rmtree(home, ignore_errors=True)


async def _session(client: StrobeClient, session_id: str) -> tuple[dict[str, Any], list[str]]:
    listing = await client.call("debug_list_sessions")
    mine = [s for s in listing["sessions"] if s["sessionId"] == session_id]
    assert mine, f"{session_id} is not listed: {listing}"
    return mine[0], listing.get("warnings", [])


async def test_a_full_disk_loses_nothing_silently_and_strobe_carries_on(
        small_home: Path, c_target: Callable[[str], Path], tmp_path: Path) -> None:
    program = str(c_target("floodctl"))
    stop = tmp_path / "stop"
    async with connect(small_home) as client:
        chatty = (await client.call("debug_launch", command=program, args=[str(stop)],
                                    projectRoot=str(tmp_path)))["sessionId"]

        async def losing() -> dict[str, Any] | None:
            page = await client.call("debug_query", sessionId=chatty, eventType="stdout", limit=1)
            warnings = page.get("warnings", [])
            return page if any("could not be stored" in w for w in warnings) and \
                any("disk holding STROBE_HOME is full" in w for w in warnings) else None

        page = await poll(losing, 120, "the store to fill the disk and say what it loses")
        assert page["totalCount"] > 0  # what was stored before the disk filled is still there
        _, listing_warnings = await _session(client, chatty)
        assert any("disk holding STROBE_HOME is full" in w for w in listing_warnings)

        stop.touch()  # the program ends with exit code 7 while the disk is full

        async def ended() -> dict[str, Any] | None:
            session, _ = await _session(client, chatty)
            return session if session["status"] != "running" else None

        session = await poll(ended, 60, "the chatty session to end")
        assert (session["status"], session["exitCode"]) == ("exited", 7)
        assert any("could not be stored" in w for w in session["warnings"])

        before = _free_mib(small_home)
        assert (await client.call("debug_delete_session", sessionId=chatty)) == {"success": True}
        assert _free_mib(small_home) > before + 10  # the deleted session's space went back to the disk

        quiet = (await client.call("debug_launch", command=program, args=[str(tmp_path / "never"), "50"],
                                   projectRoot=str(tmp_path)))["sessionId"]

        async def finished() -> dict[str, Any] | None:
            session, _ = await _session(client, quiet)
            return session if session["status"] != "running" else None

        await poll(finished, 60, "the second program to end")
        page = await client.call("debug_query", sessionId=quiet, eventType="stdout", limit=100)
        assert page["totalCount"] == 50 and "warnings" not in page  # stored in full once there is room
        assert "warnings" not in await client.call("debug_list_sessions")
