"""Hooks never break the program, end to end: a function whose loop jumps back into the bytes a hook overwrites
(tests/targets/prologue_loop.c, written in assembly) is neither traced nor given an entry breakpoint, with a
warning saying why; the function next to it is traced, and the program goes on printing the right results."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Control, StrobeClient, poll

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

WHY = ("a jump at +0x6 lands at +0x2, inside the first 16 bytes, which Strobe's hook overwrites: hooked, the program "
       "would crash or go wrong there")
ROUND = [f"sum({n})={n * (n + 1) // 2} scale({n})={3 * n}\n" for n in range(1, 21)]


async def output(strobe: StrobeClient, sid: str) -> list[str]:
    return [e["text"] for e in await strobe.all_events(sid, eventType="stdout")]


async def test_a_function_a_hook_would_break_is_left_alone_and_the_program_runs_on(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    binary = c_target("prologue_loop")
    sid = (await strobe.call("debug_launch", command=str(binary), args=[str(control.directory)],
                             projectRoot=str(project)))["sessionId"]

    async def ready() -> bool | None:
        return True if "ready\n" in await output(strobe, sid) else None

    await poll(ready, 15, "the target to be ready")
    traced = await strobe.call("debug_trace", sessionId=sid, add=["prologue_*"])
    assert traced["hookedFunctions"] == 1
    assert [w for w in traced["warnings"] if "prologue" in w] == [
        f"Could not hook prologue_sum: {WHY} (left unhooked; trace its callers or the functions it calls instead)."]

    await control.round(strobe, sid)
    lines = await output(strobe, sid)
    assert lines[lines.index("ready\n") + 1:] == [*ROUND, "round 1 done\n"]
    enters = await strobe.all_events(sid, eventType="function_enter")
    assert Counter(e["function"] for e in enters) == {"prologue_scale": 20}

    # A breakpoint at its entry is an entry hook too: refused the same way, nothing armed, nothing paused.
    answer = await strobe.call("debug_breakpoint", sessionId=sid, add=[{"function": "prologue_sum"}])
    assert answer["breakpoints"] == []
    assert answer["warnings"] == [f"Breakpoint on 'prologue_sum': prologue_sum left out: {WHY}; break at a line inside "
                                  "it instead."]
    await control.round(strobe, sid)
    lines = await output(strobe, sid)
    assert lines[lines.index("round 1 done\n") + 1:] == [*ROUND, "round 2 done\n"]

    (control.directory / "quit").touch()
    ended = await strobe.wait_for_status(sid, "exited")
    assert ended["exitCode"] == 0, ended
