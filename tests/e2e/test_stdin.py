"""A launched program's standard input: debug_launch stdin / stdinFile / keepStdinOpen and debug_input, through a
real `strobe mcp`, on tests/targets/stdin_lines.c (echoes each line, exits with the sum of the numbers it read once
it sees end-of-file)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import StrobeClient, poll

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def stdout_of(strobe: StrobeClient, sid: str) -> list[str]:
    return [e["text"] for e in await strobe.all_events(sid, eventType="stdout")]


async def wait_for_output(strobe: StrobeClient, sid: str, line: str) -> list[str]:
    async def check() -> list[str] | None:
        texts = await stdout_of(strobe, sid)
        return texts if line in texts else None

    return await poll(check, 15, f"{line!r} in the output of {sid}")


async def test_stdin_text_is_read_to_its_end(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    program = c_target("stdin_lines")
    launched = await strobe.call("debug_launch", command=str(program), projectRoot=str(project),
                                 stdin="3\n4 apples\n\n100\n")
    assert launched["stdin"] == {"bytes": 16, "open": False}
    ended = await strobe.wait_for_status(launched["sessionId"], "exited")
    assert ended["exitCode"] == 107  # it saw end-of-file: without it, it would still be waiting
    assert await stdout_of(strobe, launched["sessionId"]) == [
        "read 1: 3\n", "read 2: 4 apples\n", "read 3: \n", "read 4: 100\n", "eof after 4 lines, sum 107\n"]
    await strobe.call("debug_stop", sessionId=launched["sessionId"])


async def test_stdin_file_larger_than_the_pipe_is_streamed(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, tmp_path: Path
) -> None:
    program = c_target("stdin_lines")
    numbers = tmp_path / "numbers.txt"
    numbers.write_text("".join(f"{n}\n" for n in range(1, 30_001)))  # ~170 KB: more than a pipe holds
    launched = await strobe.call("debug_launch", command=str(program), projectRoot=str(project),
                                 stdinFile=str(numbers))
    assert launched["stdin"] == {"bytes": numbers.stat().st_size, "open": False}
    sid = launched["sessionId"]
    ended = await strobe.wait_for_status(sid, "exited", timeout=60)
    total = sum(range(1, 30_001))
    assert ended["exitCode"] == total % 256
    texts = await stdout_of(strobe, sid)
    assert texts[-1] == f"eof after 30000 lines, sum {total}\n"
    assert texts[:2] == ["read 1: 1\n", "read 2: 2\n"] and texts[-2] == "read 30000: 30000\n"
    await strobe.call("debug_stop", sessionId=sid)


async def test_kept_open_then_fed_and_closed_with_debug_input(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    program = c_target("stdin_lines")
    launched = await strobe.call("debug_launch", command=str(program), projectRoot=str(project),
                                 stdin="1\n", keepStdinOpen=True)
    sid = launched["sessionId"]
    assert launched["stdin"] == {"bytes": 2, "open": True} and "debug_input" in launched["nextSteps"]
    await wait_for_output(strobe, sid, "read 1: 1\n")

    sent = await strobe.call("debug_input", sessionId=sid, text="20\n")
    assert sent["success"] is True and sent["bytes"] == 3 and sent["stdinOpen"] is True
    await wait_for_output(strobe, sid, "read 2: 20\n")
    await strobe.call("debug_input", sessionId=sid, text="300\n")
    await wait_for_output(strobe, sid, "read 3: 300\n")
    sessions = (await strobe.call("debug_list_sessions"))["sessions"]
    assert [s["status"] for s in sessions if s["sessionId"] == sid] == ["running"]  # still waiting for more

    closed = await strobe.call("debug_input", sessionId=sid, close=True)
    assert closed["stdinOpen"] is False
    ended = await strobe.wait_for_status(sid, "exited")
    assert ended["exitCode"] == 321 % 256
    assert (await stdout_of(strobe, sid))[-1] == "eof after 3 lines, sum 321\n"

    late = await strobe.error("debug_input", sessionId=sid, text="4\n")
    assert late.code == "PROCESS_EXITED"
    await strobe.call("debug_stop", sessionId=sid)


async def test_text_and_close_in_one_debug_input(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    program = c_target("stdin_lines")
    sid = (await strobe.call("debug_launch", command=str(program), projectRoot=str(project),
                             keepStdinOpen=True))["sessionId"]
    sent = await strobe.call("debug_input", sessionId=sid, text="5\n6\n", close=True)
    assert sent["bytes"] == 4 and sent["stdinOpen"] is False
    ended = await strobe.wait_for_status(sid, "exited")
    assert ended["exitCode"] == 11
    assert await stdout_of(strobe, sid) == ["read 1: 5\n", "read 2: 6\n", "eof after 2 lines, sum 11\n"]
    await strobe.call("debug_stop", sessionId=sid)


async def test_closed_stdin_refuses_more_input(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    """--wait keeps the program running after end-of-file: the refusal is about its stdin, not its exit."""
    program = c_target("stdin_lines")
    sid = (await strobe.call("debug_launch", command=str(program), args=["--wait"], projectRoot=str(project),
                             stdin="1\n"))["sessionId"]
    await wait_for_output(strobe, sid, "eof after 1 lines, sum 1\n")
    refused = await strobe.error("debug_input", sessionId=sid, text="2\n")
    assert refused.code == "VALIDATION_ERROR" and "already closed" in refused.message
    again = await strobe.error("debug_input", sessionId=sid, close=True)
    assert again.code == "VALIDATION_ERROR"
    await strobe.call("debug_stop", sessionId=sid)


async def test_bad_stdin_parameters_fail_before_anything_is_spawned(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, tmp_path: Path
) -> None:
    program = c_target("stdin_lines")
    base: dict[str, Any] = {"command": str(program), "projectRoot": str(project)}
    both = await strobe.error("debug_launch", **base, stdin="1\n", stdinFile=str(tmp_path / "x"))
    assert both.code == "VALIDATION_ERROR" and "not both" in both.message
    missing = await strobe.error("debug_launch", **base, stdinFile=str(tmp_path / "missing.txt"))
    assert missing.code == "VALIDATION_ERROR" and "missing.txt" in missing.message
    directory = await strobe.error("debug_launch", **base, stdinFile=str(tmp_path))
    assert directory.code == "VALIDATION_ERROR" and "not a regular file" in directory.message
    big = tmp_path / "big.bin"
    with big.open("wb") as file:
        file.truncate(16 * 1024 * 1024 + 1)  # sparse: over the limit without writing 16 MiB
    too_big = await strobe.error("debug_launch", **base, stdinFile=str(big))
    assert too_big.code == "VALIDATION_ERROR" and "16,777,216" in too_big.message
    too_long = await strobe.error("debug_launch", **base, stdin="x" * (1_048_576 + 1))
    assert too_long.code == "VALIDATION_ERROR" and "stdin" in too_long.message
    assert (await strobe.call("debug_list_sessions"))["sessions"] == []  # nothing was launched


async def test_debug_input_errors(strobe: StrobeClient, c_target: Callable[[str], Path], project: Path) -> None:
    unknown = await strobe.error("debug_input", sessionId="nope-2026-01-01-00h00", text="1\n")
    assert unknown.code == "SESSION_NOT_FOUND"
    nothing = await strobe.error("debug_input", sessionId="nope-2026-01-01-00h00")
    assert nothing.code == "VALIDATION_ERROR"

    program = c_target("stdin_lines")
    sid = (await strobe.call("debug_launch", command=str(program), projectRoot=str(project)))["sessionId"]
    without = await strobe.error("debug_input", sessionId=sid, text="1\n")  # today's stdin: Frida's pipe
    assert without.code == "VALIDATION_ERROR" and "keepStdinOpen" in without.message
    sessions = (await strobe.call("debug_list_sessions"))["sessions"]
    assert [s["status"] for s in sessions if s["sessionId"] == sid] == ["running"]  # nobody closes Frida's pipe
    await strobe.call("debug_stop", sessionId=sid)

    closed = (await strobe.call("debug_launch", command=str(program), projectRoot=str(project),
                                stdin="9\n"))["sessionId"]
    await strobe.wait_for_status(closed, "exited")
    ended = await strobe.error("debug_input", sessionId=closed, text="1\n")
    assert ended.code == "PROCESS_EXITED"
    await strobe.call("debug_stop", sessionId=closed)


async def test_a_program_that_never_reads_its_large_stdin_still_ends(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    """More input than the pipe holds, for a program that exits without reading it: the session ends as the program
    does (found by the tool fuzzer: a 1 MiB stdin kept a short-lived program's session running)."""
    program = c_target("hello")
    launched = await strobe.call("debug_launch", command=str(program), projectRoot=str(project),
                                 stdin="*" * 1_000_000)
    ended = await strobe.wait_for_status(launched["sessionId"], "exited", timeout=30)
    assert ended["exitCode"] == 7  # hello's own
    await strobe.call("debug_stop", sessionId=launched["sessionId"])
