"""Line breakpoints over MCP in a Rust program built at test time (tests/targets/rust_lines): Rust's std gives every
thread a small alternate signal stack, where Frida handles a line breakpoint's trap; the agent replaces it with a
bigger one (agent/src/native/altstack.ts), without which the program dies of SIGSEGV at its first trap. A line in a
loop of a spawned thread and a line on the main thread each stop their thread while the ticker thread runs on, and
once continued the program ends as it would without Strobe. A stack overflow, handled on the same stack, is
reported and std's own handler still runs. Go's lines stay refused, with why (tests/targets/go_lines)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import TARGETS, StrobeClient, ToolError, poll

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SOURCE = TARGETS / "rust_lines" / "src" / "main.rs"


def line_of(needle: str) -> int:
    text = SOURCE.read_text()
    return text[: text.index(needle)].count("\n") + 1


SQUARE = line_of("sum = add_square(sum, i);")  # in the loop of the "squares" thread
FACTOR = line_of("product = times(product, i);")  # in the loop of the main thread


async def launch_ready(strobe: StrobeClient, binary: Path, control: Path, *args: str) -> tuple[str, int]:
    """The session and pid of `binary CONTROL ARGS...` once it printed "ready"."""
    launched = await strobe.call("debug_launch", command=str(binary), args=[str(control), *args],
                                 projectRoot=str(control))
    sid = str(launched["sessionId"])

    async def ready() -> bool | None:
        return True if "ready\n" in await stdout(strobe, sid) else None

    await poll(ready, 30, f"{binary.name} to start")
    return sid, int(launched["pid"])


async def stdout(strobe: StrobeClient, sid: str) -> list[str]:
    return [e["text"] for e in await strobe.all_events(sid, eventType="stdout")]


async def stdout_with(strobe: StrobeClient, sid: str, line: str) -> list[str]:
    """The program's output once `line` is in it (output comes through a pipe of its own, not with the events)."""

    async def check() -> list[str] | None:
        printed = await stdout(strobe, sid)
        return printed if line in printed else None

    return await poll(check, 30, f"{line!r} from {sid}")


async def session(strobe: StrobeClient, sid: str) -> dict[str, Any]:
    listed = await strobe.call("debug_list_sessions")
    found: dict[str, Any] = next(s for s in listed["sessions"] if s["sessionId"] == sid)
    return found


async def pause_number(strobe: StrobeClient, sid: str, count: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The paused thread and its pause event once `count` pauses are stored; fails at once if the program died."""

    async def check() -> tuple[dict[str, Any], dict[str, Any]] | None:
        state = await session(strobe, sid)
        if state["status"] != "running":
            raise AssertionError(f"the program ended before pause {count}: {state}")
        pauses = await strobe.all_events(sid, eventType="pause")
        if len(pauses) < count or not state.get("paused"):
            return None
        [thread] = state["paused"]
        return thread, pauses[count - 1]

    return await poll(check, 30, f"pause {count} of {sid}")


async def ticks_go_on(strobe: StrobeClient, sid: str, why: str) -> None:
    """The ticker thread prints while another thread is paused."""
    before = sum(t.startswith("tick ") for t in await stdout(strobe, sid))

    async def more() -> bool | None:
        return True if sum(t.startswith("tick ") for t in await stdout(strobe, sid)) >= before + 5 else None

    await poll(more, 30, why)


async def test_rust_line_breakpoints_stop_a_spawned_thread_and_the_main_thread(
        strobe: StrobeClient, rust_target: Callable[[str], Path], tmp_path: Path) -> None:
    sid, pid = await launch_ready(strobe, rust_target("rust_lines"), tmp_path)
    answer = await strobe.call("debug_breakpoint", sessionId=sid, add=[
        {"file": "main.rs", "line": SQUARE, "hitCount": 3},  # the int3 traps at every iteration, stops at the third
        {"file": "main.rs", "line": FACTOR},
    ])
    squares_bp, factor_bp = answer["breakpoints"]
    assert [loc["function"] for loc in squares_bp["locations"]] == ["rust_lines::sum_of_squares"], squares_bp
    assert [loc["function"] for loc in factor_bp["locations"]] == ["rust_lines::product"], factor_bp
    (tmp_path / "go").touch()

    thread, pause = await pause_number(strobe, sid, 1)
    assert (thread["function"], thread["line"], thread["threadName"]) == ("rust_lines::sum_of_squares", SQUARE,
                                                                          "squares"), thread
    assert (pause["breakpointId"], pause["hit"], pause["line"]) == (squares_bp["id"], 3, SQUARE), pause
    assert pause["sourceFile"].endswith("tests/targets/rust_lines/src/main.rs"), pause
    assert "square 3\n" not in await stdout_with(strobe, sid, "square 2\n")
    await ticks_go_on(strobe, sid, "the ticker to print while the squares thread is paused")
    assert "square 3\n" not in await stdout(strobe, sid)  # still paused
    await strobe.call("debug_continue", sessionId=sid)

    main, pause = await pause_number(strobe, sid, 2)  # hits 4 and 5 went through the trap without stopping
    assert (main["function"], main["line"], main["threadName"]) == ("rust_lines::product", FACTOR, "rust_lines"), main
    assert main["threadId"] == pid  # the main thread
    assert (pause["breakpointId"], pause["hit"], pause["sourceFile"]) == (factor_bp["id"], 1, thread["sourceFile"])
    assert any("rust_lines::main" in frame for frame in main["backtrace"]), main["backtrace"]
    assert not any(t.startswith("factor ") for t in await stdout_with(strobe, sid, "square 5\n"))
    await ticks_go_on(strobe, sid, "the ticker to print while the main thread is paused")
    await strobe.call("debug_breakpoint", sessionId=sid, remove=[squares_bp["id"], factor_bp["id"]])
    await strobe.call("debug_continue", sessionId=sid)

    ended = await strobe.wait_for_status(sid, "exited", timeout=30)  # once its output is all stored
    assert ended["exitCode"] == 0, ended
    printed = await stdout(strobe, sid)
    assert [t for t in printed if not t.startswith("tick ")] == [
        "ready\n", *[f"square {i}\n" for i in range(1, 6)], *[f"factor {i}\n" for i in range(1, 6)],
        "sum 55 product 120\n"]
    assert len(await strobe.all_events(sid, eventType="pause")) == 2


async def test_a_rust_stack_overflow_is_reported_and_std_still_says_so(
        strobe: StrobeClient, rust_target: Callable[[str], Path], tmp_path: Path) -> None:
    """The crash report runs on the bigger alternate stack (on std's it died with the program), with the pc only:
    Frida's unwinders hang with a stack pointer in the guard page (agent/src/common/crash.ts)."""
    sid, _ = await launch_ready(strobe, rust_target("rust_lines"), tmp_path, "overflow")
    (tmp_path / "go").touch()
    ended = await strobe.wait_for_status(sid, "crashed", timeout=30)
    assert ended["signal"] in ("SIGSEGV", "SIGABRT"), ended
    [crash] = await strobe.all_events(sid, eventType="crash")
    assert (crash["signal"], crash["function"], crash["threadName"]) == ("SIGSEGV", "rust_lines::recurse",
                                                                         "deep"), crash
    stderr = "".join(e["text"] for e in await strobe.all_events(sid, eventType="stderr"))
    assert "thread 'deep'" in stderr and "has overflowed its stack" in stderr, stderr


async def test_a_go_line_is_refused_with_why(strobe: StrobeClient, build_dir: Path, tmp_path: Path) -> None:
    binary = build_dir / "go_lines"
    if not binary.exists():
        subprocess.run(["go", "build", "-o", str(binary), "."], cwd=TARGETS / "go_lines", check=True,
                       env={**os.environ, "CGO_ENABLED": "1", "GOTOOLCHAIN": "local"})
    sid, _ = await launch_ready(strobe, binary, tmp_path)
    source = (TARGETS / "go_lines" / "main.go").read_text()
    line = source[: source.index("count += int(C.one())")].count("\n") + 1
    with pytest.raises(ToolError) as raised:
        await strobe.call("debug_breakpoint", sessionId=sid, add=[{"file": "main.go", "line": line}])
    assert raised.value.code == "VALIDATION_ERROR", raised.value
    assert "not supported in Go code" in raised.value.message and "garbage collector" in raised.value.message
    (tmp_path / "quit").touch()
    await strobe.wait_for_status(sid, "exited", timeout=30)


async def test_rust_conditions_logpoints_and_steps(
        strobe: StrobeClient, rust_target: Callable[[str], Path], tmp_path: Path) -> None:
    """A logpoint in a Rust loop reads its locals at every iteration; a line condition over them stops at one; a
    step over goes to the next line; a function breakpoint's condition over its arguments, then a step out, back
    to the caller's line."""
    sid, _ = await launch_ready(strobe, rust_target("rust_lines"), tmp_path)
    await strobe.call("debug_logpoint", sessionId=sid, add=[{"file": "main.rs", "line": SQUARE,
                                                             "message": "i={i} sum={sum}"}])
    await strobe.call("debug_breakpoint", sessionId=sid, add=[
        {"file": "main.rs", "line": SQUARE, "condition": "i == 4 && sum == 14"},
        {"function": "rust_lines::times", "condition": "i == 3"},
    ])
    (tmp_path / "go").touch()

    thread, pause = await pause_number(strobe, sid, 1)
    assert (thread["line"], pause["locals"]["i"], pause["locals"]["sum"]) == (SQUARE, 4, 14), pause["locals"]
    over = await strobe.call("debug_continue", sessionId=sid, action="step-over")
    assert (over["status"], over["function"], over["line"]) == ("paused", "rust_lines::sum_of_squares", SQUARE + 1)
    assert over["locals"]["sum"] == 30, over["locals"]  # the line ran: 14 + 16
    await strobe.call("debug_continue", sessionId=sid)

    thread, pause = await pause_number(strobe, sid, 3)
    assert (thread["function"], pause["arguments"]) == ("rust_lines::times", {"product": 2, "i": 3}), pause
    out = await strobe.call("debug_continue", sessionId=sid, action="step-out")
    assert (out["function"], out["line"]) == ("rust_lines::product", FACTOR), out
    await strobe.call("debug_continue", sessionId=sid)
    ended = await strobe.wait_for_status(sid, "exited", timeout=30)
    assert ended["exitCode"] == 0, ended
    logged = [e["text"] for e in await strobe.all_events(sid, eventType="logpoint")]
    assert logged == ["i=1 sum=0", "i=2 sum=1", "i=3 sum=5", "i=4 sum=14", "i=5 sum=30"], logged
