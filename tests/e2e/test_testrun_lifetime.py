"""Test runs never outlive a dead daemon: an untraced debug_test run (a plain subprocess, no agent, so no lifeline)
whose command hangs is killed with its whole process group, grandchildren included, when the daemon is killed with -9
(the reaper holds the group: testing/runner.py, instrument/launcher.py).

The test waits by polling with a deadline, and kills whatever it found in `finally` (the strobe_home fixture then
fails the test if anything started under its home is still there)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.conftest import connect, poll, processes_under
from tests.e2e.test_target_lifetime import daemon_pid, gone, kill_all

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

# A hung suite: the shell leader sleeps, so does a child, and a grandchild under a subshell (`; true` keeps sh from
# exec()ing its last command, so each level stays a process of its own).
HUNG_SUITE = "(sleep 600; true) & sleep 600; true"


def stat(pid: int) -> tuple[int, int, int] | None:
    """(parent pid, process group, session) of a live process, None when it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else (int(fields[1]), int(fields[2]), int(fields[3]))


def live() -> dict[int, tuple[int, int, int]]:
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := stat(int(entry))) is not None:
            found[int(entry)] = fields
    return found


def family_of_the_run(daemon: int) -> dict[int, int] | None:
    """The test command's process group once it is complete (the shell leader the daemon started in a session of
    its own, its subshell and their two sleeps): pid -> parent pid."""
    processes = live()
    leaders = [pid for pid, (parent, _, session) in processes.items() if parent == daemon and session == pid
               and Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[-2:] == [HUNG_SUITE.encode(), b""]]
    if len(leaders) != 1:
        return None
    group = {pid: parent for pid, (parent, pgrp, _) in processes.items() if pgrp == leaders[0]}
    grandchildren = [pid for pid, parent in group.items() if parent not in (leaders[0], daemon)]
    return group if len(group) == 4 and len(grandchildren) == 1 else None


async def test_a_daemon_killed_with_minus_9_takes_its_test_runs_whole_process_group_with_it(
    strobe_home: Path, project: Path
) -> None:
    family: list[int] = []
    try:
        async with connect(strobe_home) as client:
            started = await client.call("debug_test", projectRoot=str(project), framework="generic",
                                        command=HUNG_SUITE)
            assert started["status"] == "running" and "sessionId" not in started  # untraced: no agent in it
            daemon = daemon_pid(strobe_home)

            async def complete() -> dict[int, int] | None:
                return family_of_the_run(daemon)

            family += await poll(complete, 30, "the test command, its child and grandchild to run")
        # The client is gone first: its proxy would otherwise start a new daemon behind the test's back.
        os.kill(daemon, signal.SIGKILL)
        took = await gone([daemon, *family], 10, "the daemon and every process of its test run to be gone")
        print(f"daemon and the test run's 4 processes gone {took:.3f}s after kill -9")

        async def nothing_left() -> bool | None:
            return True if not processes_under(strobe_home) else None

        await poll(nothing_left, 10, "nothing left under the home (the reaper ends too)")
    finally:
        kill_all(family)
