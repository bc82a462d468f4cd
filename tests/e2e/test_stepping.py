"""Stepping over MCP on C and C++ programs built at test time (tests/targets/steps.c, steps_cpp.cpp): debug_continue's
step-over runs calls (a recursive one included) through and stops at the next line of the same frame, step-into
stops in the function a line calls (directly, through a pointer, through a virtual call), step-out stops in the
caller; another thread paused at the same breakpoint stays paused while one steps."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import StrobeClient, poll
from tests.e2e.test_breakpoints import launch, paused, stdout

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

TARGETS = Path(__file__).parents[1] / "targets"


def line_of(needle: str, source: str = "steps.c") -> int:
    text = (TARGETS / source).read_text()
    return text[: text.index(needle)].count("\n") + 1


SQUARE_OPEN, SQUARE_BODY = line_of("int square(int x) {"), line_of("int y = x * x;")
FACT_BASE, FACT_CALL, FACT_RETURN = (line_of("if (n <= 1)"), line_of("int below = fact(n - 1);"),
                                     line_of("return n * below;"))
WORK_SQUARE, WORK_INDIRECT, WORK_FACT, WORK_RETURN = (line_of("int s = square(a);"), line_of("int t = op(a + 1);"),
                                                      line_of("int f = fact(3);"), line_of("return s + t + f;"))
WORKER_CALL = line_of("int r = work(a);")
CPP = "steps_cpp.cpp"
CPP_SUM, CPP_FOR = line_of("sum += shape->area();", CPP), line_of("for (const auto &shape", CPP)
RECT_AREA, RECT_BODY = line_of("int area() const override {", CPP), line_of("int a = w * h;", CPP)


async def step(strobe: StrobeClient, sid: str, action: str, **more: Any) -> dict[str, Any]:
    answer: dict[str, Any] = await strobe.call("debug_continue", sessionId=sid, action=action, **more)
    assert answer["status"] == "paused", answer
    return answer


async def paused_events(strobe: StrobeClient, sid: str, count: int) -> list[dict[str, Any]]:
    """The session's pause events, once there are `count` (a step answers before its event is committed)."""
    async def stored() -> list[dict[str, Any]] | None:
        events = await strobe.all_events(sid, eventType="pause")
        return events if len(events) >= count else None

    found: list[dict[str, Any]] = await poll(stored, 30, f"{count} pause events")
    return found


async def finish(strobe: StrobeClient, sid: str, *results: str) -> None:
    async def printed() -> bool | None:
        out = await stdout(strobe, sid)
        return True if all(r in out for r in results) else None

    await poll(printed, 30, f"{results} to be printed")
    await strobe.wait_for_status(sid, "exited", timeout=30)


async def test_step_over_runs_calls_and_recursion_through_then_step_out_returns_to_the_caller(
        strobe: StrobeClient, c_target: Callable[[str], Path], tmp_path: Path) -> None:
    sid = await launch(strobe, c_target("steps"), tmp_path)
    await strobe.call("debug_breakpoint", sessionId=sid, add=[{"function": "work", "condition": "a == 4"}])
    (tmp_path / "go").touch()
    [thread] = await paused(strobe, sid)
    assert (thread["function"], thread["threadName"]) == ("work", "w-1")

    at = await step(strobe, sid, "step-over")
    assert (at["function"], at["line"], at["step"]) == ("work", WORK_SQUARE, "over"), at
    at = await step(strobe, sid, "step-over")
    assert (at["function"], at["line"]) == ("work", WORK_INDIRECT), at
    assert at["locals"]["s"] == 16 and at["threadId"] == thread["threadId"]
    at = await step(strobe, sid, "step-over")
    assert (at["function"], at["line"]) == ("work", WORK_FACT), at
    at = await step(strobe, sid, "step-over")  # fact(3)'s recursion runs through: its lines are deeper frames
    assert (at["function"], at["line"]) == ("work", WORK_RETURN), at
    assert (at["locals"]["t"], at["locals"]["f"]) == (25, 6), at["locals"]
    assert not any(t.startswith("w-1 result") for t in await stdout(strobe, sid))

    out = await step(strobe, sid, "step-out")
    assert (out["function"], out["line"]) == ("worker", WORKER_CALL), out
    pauses = await paused_events(strobe, sid, 6)
    assert [p.get("step") for p in pauses] == [None, "over", "over", "over", "over", "out"]
    assert [p["line"] for p in pauses[1:5]] == [WORK_SQUARE, WORK_INDIRECT, WORK_FACT, WORK_RETURN]

    await strobe.call("debug_continue", sessionId=sid)
    await finish(strobe, sid, "w-1 result 47\n", "w-2 result 67\n")


async def test_step_into_enters_direct_and_indirect_calls(
        strobe: StrobeClient, c_target: Callable[[str], Path], tmp_path: Path) -> None:
    sid = await launch(strobe, c_target("steps"), tmp_path)
    await strobe.call("debug_breakpoint", sessionId=sid, add=[{"file": "steps.c", "line": WORK_SQUARE,
                                                               "hitCount": 1}])
    (tmp_path / "go").touch()
    [thread] = await paused(strobe, sid)
    a = 4 if thread["threadName"] == "w-1" else 5

    into = await step(strobe, sid, "step-into")
    assert (into["function"], into["step"], into["line"]) == ("square", "into", SQUARE_OPEN), into
    assert into["arguments"] == {"x": a}  # at its first instruction: read from the registers
    at = await step(strobe, sid, "step-over")
    assert (at["function"], at["line"]) == ("square", SQUARE_BODY), at
    assert at["locals"] == {"x": a, "y": at["locals"]["y"]}, at  # square is a leaf: x is in the red zone
    back = await step(strobe, sid, "step-out")
    assert (back["function"], back["line"]) == ("work", WORK_SQUARE), back
    assert back["locals"]["a"] == a, back
    at = await step(strobe, sid, "step-over")
    assert (at["function"], at["line"]) == ("work", WORK_INDIRECT), at
    assert at["locals"]["a"] == a, at

    into = await step(strobe, sid, "step-into")  # op(a + 1): a call through a function pointer
    assert (into["function"], into["arguments"]) == ("square", {"x": a + 1}), into

    await strobe.call("debug_continue", sessionId=sid)
    await finish(strobe, sid, "w-1 result 47\n", "w-2 result 67\n")


async def test_one_thread_steps_while_another_stays_paused_at_the_same_breakpoint(
        strobe: StrobeClient, c_target: Callable[[str], Path], tmp_path: Path) -> None:
    sid = await launch(strobe, c_target("steps"), tmp_path)
    await strobe.call("debug_breakpoint", sessionId=sid, add=[{"function": "fact", "condition": "n == 3"}])
    (tmp_path / "go").touch()
    first, second = await paused(strobe, sid, count=2)

    with pytest.raises(Exception, match="say which one"):
        await strobe.call("debug_continue", sessionId=sid, action="step-over")
    tid = first["threadId"]
    at = await step(strobe, sid, "step-over", threadId=tid)
    assert (at["function"], at["line"], at["threadId"]) == ("fact", FACT_BASE, tid), at
    at = await step(strobe, sid, "step-over", threadId=tid)
    assert at["line"] == FACT_CALL, at
    at = await step(strobe, sid, "step-over", threadId=tid)  # fact(2) and fact(1) run these lines deeper down
    assert at["line"] == FACT_RETURN, at
    assert (at["locals"]["n"], at["locals"]["below"]) == (3, 2), at["locals"]

    listed = await strobe.call("debug_list_sessions")
    [session] = [s for s in listed["sessions"] if s["sessionId"] == sid]
    by_thread = {p["threadId"]: p for p in session["paused"]}
    assert by_thread[second["threadId"]]["line"] == second["line"]  # the other one has not moved
    assert by_thread[second["threadId"]]["breakpointId"] == second["breakpointId"]
    assert by_thread[tid]["step"] == "over"

    await strobe.call("debug_continue", sessionId=sid)
    await finish(strobe, sid, "w-1 result 47\n", "w-2 result 67\n")


async def test_step_into_a_virtual_call_in_cpp(
        strobe: StrobeClient, cpp_target: Callable[[str], Path], tmp_path: Path) -> None:
    sid = await launch(strobe, cpp_target("steps_cpp"), tmp_path)
    await strobe.call("debug_breakpoint", sessionId=sid, add=[{"file": "steps_cpp.cpp", "line": CPP_SUM,
                                                               "hitCount": 1}])
    (tmp_path / "go").touch()
    await paused(strobe, sid)

    into = await step(strobe, sid, "step-into")  # the line's first call: unique_ptr's operator-> (it has lines)
    assert "unique_ptr" in into["function"] and into["function"].endswith("operator->"), into
    back = await step(strobe, sid, "step-out")
    assert (back["function"], back["line"]) == ("total", CPP_SUM), back
    into = await step(strobe, sid, "step-into")  # the rest of the line: area() through the vtable
    assert (into["function"], into["line"]) == ("Rect::area", RECT_AREA), into
    at = await step(strobe, sid, "step-over")
    assert (at["function"], at["line"]) == ("Rect::area", RECT_BODY), at
    back = await step(strobe, sid, "step-out")
    assert (back["function"], back["line"]) == ("total", CPP_SUM), back
    at = await step(strobe, sid, "step-over")  # the loop's increment and condition
    assert (at["function"], at["line"]) == ("total", CPP_FOR), at
    at = await step(strobe, sid, "step-over")
    assert (at["function"], at["line"], at["locals"]["sum"]) == ("total", CPP_SUM, 6), at
    into = await step(strobe, sid, "step-into")
    assert into["function"].endswith("operator->"), into
    await step(strobe, sid, "step-out")
    into = await step(strobe, sid, "step-into")
    assert into["function"] == "Odd::area", into

    await strobe.call("debug_continue", sessionId=sid)
    await finish(strobe, sid, "total 13\n")


async def test_cpp_conditions_read_this_and_a_logpoint_reads_the_loop(
        strobe: StrobeClient, cpp_target: Callable[[str], Path], tmp_path: Path) -> None:
    """In C++: a logpoint in total()'s loop reads `sum` each iteration; a line condition inside a method reads its
    object through `this`; a function condition over `this` at a method's entry (this arrives in rdi)."""
    sid = await launch(strobe, cpp_target("steps_cpp"), tmp_path)
    await strobe.call("debug_logpoint", sessionId=sid, add=[{"file": CPP, "line": CPP_SUM, "message": "sum={sum}"}])
    await strobe.call("debug_breakpoint", sessionId=sid, add=[
        {"file": CPP, "line": RECT_BODY, "condition": "this->w * this->h == 6"},
        {"function": "Odd::area", "condition": "this->n == 3"},
    ])
    (tmp_path / "go").touch()
    await paused(strobe, sid)
    [rect] = await paused_events(strobe, sid, 1)
    assert (rect["function"], rect["line"]) == ("Rect::area", RECT_BODY), rect
    await strobe.call("debug_continue", sessionId=sid)
    odd = (await paused_events(strobe, sid, 2))[1]
    assert odd["function"] == "Odd::area" and odd["line"] == line_of("int area() const override {\n        return n",
                                                                      CPP), odd
    await strobe.call("debug_continue", sessionId=sid)
    await finish(strobe, sid, "total 13\n")
    logged = [e["text"] for e in await strobe.all_events(sid, eventType="logpoint")]
    assert logged == ["sum=0", "sum=6"], logged
