"""Bad input gets the spec's error code and a message that says what to do; nothing else is disturbed."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import StrobeClient, poll

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_bad_input_leaves_daemon_and_other_sessions_untouched(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, tmp_path: Path
) -> None:
    sleeper = c_target("sleeper")
    bystander = (await strobe.call("debug_launch", command=str(sleeper), projectRoot=str(project)))["sessionId"]

    async def output_count() -> int | None:
        total = (await strobe.call("debug_query", sessionId=bystander, eventType="stdout"))["totalCount"]
        return total if total == 5 else None

    before = await poll(output_count, 10, "the bystander's output")

    not_exec = tmp_path / "notes.txt"
    not_exec.write_text("not a program")
    cases: list[tuple[str, dict[str, object], str, tuple[str, ...]]] = [
        ("debug_launch", {"projectRoot": str(project)}, "VALIDATION_ERROR", ("command", "missing")),
        ("debug_launch", {"command": str(sleeper)}, "VALIDATION_ERROR", ("projectRoot",)),
        ("debug_launch", {"command": str(sleeper), "projectRoot": str(project), "args": "x"}, "VALIDATION_ERROR",
         ("args",)),
        ("debug_launch", {"command": 42, "projectRoot": str(project)}, "VALIDATION_ERROR", ("command",)),
        ("debug_launch", {"command": str(tmp_path / "nope"), "projectRoot": str(project)}, "VALIDATION_ERROR",
         ("does not exist", "build")),
        ("debug_launch", {"command": str(tmp_path), "projectRoot": str(project)}, "VALIDATION_ERROR",
         ("directory",)),
        ("debug_launch", {"command": str(not_exec), "projectRoot": str(project)}, "VALIDATION_ERROR",
         ("not executable", "chmod +x")),
        ("debug_launch", {"command": str(sleeper), "projectRoot": "relative/dir"}, "VALIDATION_ERROR",
         ("absolute",)),
        ("debug_launch", {"command": str(sleeper), "projectRoot": str(tmp_path / "missing")}, "VALIDATION_ERROR",
         ("not an existing directory",)),
        ("debug_launch", {"command": str(sleeper), "projectRoot": str(project), "cwd": str(tmp_path / "missing")},
         "VALIDATION_ERROR", ("cwd",)),
        ("debug_launch", {"command": "no-such-program-xyz", "projectRoot": str(project)}, "VALIDATION_ERROR",
         ("not found on PATH",)),
        ("debug_query", {"sessionId": "nope-2026-01-01-00h00"}, "SESSION_NOT_FOUND", ("debug_list_sessions",)),
        ("debug_query", {"sessionId": bystander, "limit": 501}, "VALIDATION_ERROR", ("limit", "500")),
        ("debug_query", {"sessionId": bystander, "limit": 0}, "VALIDATION_ERROR", ("limit",)),
        ("debug_query", {"sessionId": bystander, "limit": "10"}, "VALIDATION_ERROR", ("limit",)),
        ("debug_query", {"sessionId": bystander, "offset": -1}, "VALIDATION_ERROR", ("offset",)),
        ("debug_query", {"sessionId": bystander, "eventType": "log"}, "VALIDATION_ERROR", ("eventType",)),
        ("debug_query", {"sessionId": bystander, "function": {"matches": "(unclosed"}}, "VALIDATION_ERROR",
         ("regular expression",)),
        ("debug_query", {"sessionId": bystander, "timeFrom": "yesterday"}, "VALIDATION_ERROR", ("-5s",)),
        ("debug_query", {"sessionId": bystander, "minDurationNs": -5}, "VALIDATION_ERROR", ("minDurationNs",)),
        ("debug_query", {"sessionId": bystander, "sesionId": "x"}, "VALIDATION_ERROR", ("unknown parameter",)),
        ("debug_stop", {"sessionId": "nope"}, "SESSION_NOT_FOUND", ("nope",)),
        ("debug_stop", {"sessionId": bystander, "retain": "yes"}, "VALIDATION_ERROR", ("retain",)),
        ("debug_delete_session", {"sessionId": "nope"}, "SESSION_NOT_FOUND", ()),
        ("debug_delete_session", {"sessionId": bystander}, "VALIDATION_ERROR", ("still running", "debug_stop")),
        ("debug_list_sessions", {"all": True}, "VALIDATION_ERROR", ("unknown parameter",)),
        ("debug_teleport", {}, "VALIDATION_ERROR", ("Unknown tool", "debug_launch")),
    ]
    for tool, arguments, code, fragments in cases:
        error = await strobe.error(tool, **arguments)
        assert error.code == code, (tool, arguments, error)
        for fragment in fragments:
            assert fragment in error.message, (tool, arguments, error.message)

    # The bystander session is still running, its output intact, and the daemon still serves.
    sessions = {s["sessionId"]: s for s in (await strobe.call("debug_list_sessions"))["sessions"]}
    assert sessions[bystander]["status"] == "running"
    os.kill(sessions[bystander]["pid"], 0)
    assert (await strobe.call("debug_query", sessionId=bystander, eventType="stdout"))["totalCount"] == before
    await strobe.call("debug_stop", sessionId=bystander)


async def test_non_elf_file_is_refused_by_frida_with_advice(
    strobe: StrobeClient, project: Path, tmp_path: Path
) -> None:
    fake = tmp_path / "fake-binary"
    fake.write_bytes(b"\x00\x01 not an executable format")
    fake.chmod(0o755)
    error = await strobe.error("debug_launch", command=str(fake), projectRoot=str(project))
    assert error.code == "FRIDA_ATTACH_FAILED"
    assert str(fake) in error.message
    assert (await strobe.call("debug_list_sessions"))["sessions"] == []
