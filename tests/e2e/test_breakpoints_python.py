"""Breakpoints, logpoints and steps in Python code over MCP (tests/targets/python_breaks, every CPython this machine
has): the thread that hits one stops alone while the ticker thread prints on; conditions, hit counts and messages
are Python over the frame's names; the pause shows each frame's locals; continue and each step kind."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import StrobeClient, ToolError, poll
from tests.instrument.pytracer.runner import interpreters

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

APP = Path(__file__).parent.parent / "targets" / "python_breaks"
ORDERS = (APP / "orders.py").read_text()
PYTHONS = interpreters()


def line_of(needle: str) -> int:
    return ORDERS[: ORDERS.index(needle)].count("\n") + 1


ADD_LINE = line_of("acc.total = before + n")


@pytest.fixture
def app(project: Path) -> Path:
    shutil.copytree(APP, project, dirs_exist_ok=True)
    (project / "control").mkdir()
    return project


async def stdout(strobe: StrobeClient, sid: str) -> list[str]:
    return [e["text"] for e in await strobe.all_events(sid, eventType="stdout")]


async def launch(strobe: StrobeClient, python: str, app: Path) -> str:
    launched = await strobe.call("debug_launch", command=python, args=["app.py", str(app / "control")],
                                 projectRoot=str(app), cwd=str(app))
    sid = str(launched["sessionId"])

    async def ready() -> bool | None:
        return True if "ready\n" in await stdout(strobe, sid) else None

    await poll(ready, 30, "the Python target to start")
    return sid


async def paused(strobe: StrobeClient, sid: str, count: int = 1) -> dict[str, Any]:
    """The one paused thread, once `count` pause events are stored."""

    async def check() -> dict[str, Any] | None:
        listed = await strobe.call("debug_list_sessions")
        session = next(s for s in listed["sessions"] if s["sessionId"] == sid)
        pauses = await strobe.all_events(sid, eventType="pause")
        return session["paused"][0] if session.get("paused") and len(pauses) >= count else None

    found: dict[str, Any] = await poll(check, 30, f"{count} pause(s) in {sid}")
    return found


async def finish(strobe: StrobeClient, sid: str, app: Path) -> None:
    async def done() -> bool | None:
        return True if any(t.startswith("orders done") for t in await stdout(strobe, sid)) else None

    await poll(done, 30, "the orders to finish")
    (app / "control" / "quit").touch()
    await strobe.wait_for_status(sid, "exited", timeout=30)


@pytest.mark.parametrize("python", PYTHONS)
async def test_a_python_breakpoint_stops_one_thread_with_its_frames(strobe: StrobeClient, python: str,
                                                                    app: Path) -> None:
    sid = await launch(strobe, python, app)
    [bp] = (await strobe.call("debug_breakpoint", sessionId=sid, add=[
        {"function": "orders.process_order", "condition": "qty > 100 and acc.owner == 'ada'"}]))["breakpoints"]
    assert bp["locations"][0]["file"] == str(app / "orders.py") and bp["runtime"] == "python", bp
    (app / "control" / "go").touch()

    thread = await paused(strobe, sid)
    assert (thread["function"], thread["breakpointId"]) == ("process_order", bp["id"]), thread
    [pause] = await strobe.all_events(sid, eventType="pause")
    assert pause["arguments"]["oid"] == 3 and pause["arguments"]["qty"] == 150, pause
    caller = pause["backtrace"][1]
    assert caller["function"] == "main" and caller["locals"]["oid"] == 3, pause["backtrace"]
    printed = await stdout(strobe, sid)
    assert "order 2 qty 100 total 150\n" in printed and not any(t.startswith("order 3") for t in printed)

    ticks = sum(t.startswith("tick") for t in printed)

    async def ticker_runs_on() -> bool | None:
        return True if sum(t.startswith("tick") for t in await stdout(strobe, sid)) >= ticks + 20 else None

    await poll(ticker_runs_on, 30, "the ticker thread to print while the main thread is paused")
    await strobe.call("debug_continue", sessionId=sid)
    await paused(strobe, sid, count=2)
    assert (await strobe.all_events(sid, eventType="pause"))[1]["arguments"]["oid"] == 4
    await strobe.call("debug_breakpoint", sessionId=sid, remove=[bp["id"]])
    await strobe.call("debug_continue", sessionId=sid)
    await finish(strobe, sid, app)


@pytest.mark.parametrize("python", PYTHONS)
async def test_python_lines_hit_counts_and_steps(strobe: StrobeClient, python: str, app: Path) -> None:
    sid = await launch(strobe, python, app)
    [bp] = (await strobe.call("debug_breakpoint", sessionId=sid, add=[
        {"file": "orders.py", "line": ADD_LINE, "hitCount": 2}]))["breakpoints"]
    assert bp["locations"][0]["function"] == "add_to"
    with pytest.raises(ToolError) as raised:
        await strobe.call("debug_breakpoint", sessionId=sid, add=[{"file": "orders.py", "line": line_of("LIMIT") - 1}])
    assert "has no code" in raised.value.message and "next lines with code" in raised.value.message
    (app / "control" / "go").touch()

    thread = await paused(strobe, sid)
    assert thread["line"] == ADD_LINE and thread["locals"]["n"] == 100 and thread["locals"]["before"] == 50, thread
    read = (await strobe.call("debug_read", sessionId=sid, targets=[
        {"variable": "before"}, {"variable": "acc.owner", "frame": 0}, {"variable": "qty", "frame": 1}]))["results"]
    assert [(r["value"], r["frame"]) for r in read] == [(50, 0), ("ada", 0), (100, 1)], read
    [written] = (await strobe.call("debug_write", sessionId=sid, targets=[{"variable": "n", "value": 1000}]))[
        "results"]
    assert (written["previousValue"], written["newValue"], written["frame"]) == (100, 1000, 0), written
    over = await strobe.call("debug_continue", sessionId=sid, action="step-over")
    assert (over["status"], over["function"], over["line"]) == ("paused", "add_to", ADD_LINE + 1), over
    [total] = (await strobe.call("debug_read", sessionId=sid, targets=[{"variable": "acc.total"}]))["results"]
    assert total["value"] == 1050, total  # the line ran with the written n
    out = await strobe.call("debug_continue", sessionId=sid, action="step-out")
    assert out["function"] == "process_order" and out["line"] > line_of("total = add_to(acc, qty)"), out
    await strobe.call("debug_breakpoint", sessionId=sid, remove=[bp["id"]])
    # step-into from the caller's next call: the next order's add_to is entered
    into = None
    for _ in range(6):
        into = await strobe.call("debug_continue", sessionId=sid, action="step-into")
        if into["function"] == "add_to":
            break
    assert into is not None and into["function"] == "add_to", into
    assert "order 2 qty 100 total 1050\n" in await stdout(strobe, sid)  # the write changed what it printed
    steps = [e["step"] for e in await strobe.all_events(sid, eventType="pause") if e.get("step")]
    assert steps[:2] == ["over", "out"] and "into" in steps
    await strobe.call("debug_continue", sessionId=sid)
    await finish(strobe, sid, app)


@pytest.mark.parametrize("python", PYTHONS)
async def test_python_logpoints_record_without_stopping(strobe: StrobeClient, python: str, app: Path) -> None:
    sid = await launch(strobe, python, app)
    answer = await strobe.call("debug_logpoint", sessionId=sid, add=[
        {"file": "orders.py", "line": ADD_LINE, "message": "n={n} total={acc.total} owner={acc.owner!r}"},
        {"function": "orders.process_order", "message": "order {oid}", "condition": "qty >= 200"},
    ])
    assert len(answer["logpoints"]) == 2
    (app / "control" / "go").touch()

    async def logged() -> list[str] | None:
        found = [e["text"] for e in await strobe.all_events(sid, eventType="logpoint")]
        return found if len(found) >= 7 else None

    texts = await poll(logged, 30, "the logpoint lines")
    await finish(strobe, sid, app)
    assert [t for t in texts if t.startswith("n=")] == [
        f"n={n} total={before} owner='ada'" for n, before in [(50, 0), (100, 50), (150, 150), (200, 300), (250, 500)]]
    assert [t for t in texts if t.startswith("order")] == ["order 4", "order 5"]
    assert await strobe.all_events(sid, eventType="pause") == []


@pytest.mark.parametrize("python", PYTHONS)
async def test_a_staged_python_breakpoint_is_in_force_from_the_first_line(strobe: StrobeClient, python: str,
                                                                          app: Path) -> None:
    staged = await strobe.call("debug_breakpoint", projectRoot=str(app), add=[
        {"function": "orders.add_to", "condition": "n == 100"}])
    assert staged["mode"] == "pending"
    (app / "control" / "go").touch()  # the orders start at once: only the staged breakpoint can stop them
    sid = await launch(strobe, python, app)
    thread = await paused(strobe, sid)
    assert (thread["function"], thread["arguments"]["n"]) == ("add_to", 100), thread
    await strobe.call("debug_breakpoint", sessionId=sid, remove=[thread["breakpointId"]])
    await strobe.call("debug_continue", sessionId=sid)
    await finish(strobe, sid, app)
