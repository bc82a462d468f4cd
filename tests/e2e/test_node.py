"""Node programs over MCP: CommonJS and ESM functions traced by pattern, values by name, async functions that
resolve and reject, an uncaught exception as a crash event."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import StrobeClient, poll

pytestmark = [pytest.mark.anyio, pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")]

APP = Path(__file__).resolve().parents[1] / "targets" / "node_app"


@pytest.fixture
def node_project(tmp_path: Path) -> Path:
    root = tmp_path / "node_app"
    shutil.copytree(APP, root)
    return root


async def run_to_end(strobe: StrobeClient, root: Path, script: str, patterns: list[str]) -> dict[str, Any]:
    staged = await strobe.call("debug_trace", add=patterns, projectRoot=str(root))
    assert "warnings" not in staged or not any("Invalid" in w for w in staged["warnings"]), staged
    launched = await strobe.call("debug_launch", command="node", args=[script], projectRoot=str(root),
                                 cwd=str(root))
    await strobe.wait_for_status(launched["sessionId"], "exited", timeout=60)
    return launched


def calls(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["eventType"], e["function"]) for e in events if e["eventType"].startswith("function_")]


async def test_commonjs_functions_with_their_arguments_and_return_values(
        strobe: StrobeClient, node_project: Path) -> None:
    launched = await run_to_end(strobe, node_project, "app.js", ["Cart.*", "auth.login", "check", "fetchUser"])
    sid = launched["sessionId"]
    assert launched["pendingPatternsApplied"] == 4
    output = [e["text"] for e in await strobe.all_events(sid, eventType="stdout")]
    assert output == ["total 5\n", "login true\n", "user user7\n", "caught no such user -1\n"]  # unchanged
    events = await strobe.all_events(sid, verbose=True)
    traced = calls(events)
    assert traced[:8] == [
        ("function_enter", "app.Cart.constructor"), ("function_exit", "app.Cart.constructor"),
        ("function_enter", "app.Cart.add"), ("function_exit", "app.Cart.add"),
        ("function_enter", "app.Cart.add"), ("function_exit", "app.Cart.add"),
        ("function_enter", "app.Cart.total"), ("function_exit", "app.Cart.total"),
    ]
    adds = [e for e in events if e.get("function") == "app.Cart.add"]
    assert (adds[0]["arguments"], adds[0]["argumentNames"]) == (["apple", 2], ["item", "qty"]), adds[0]
    assert [e["returnValue"] for e in adds if e["eventType"] == "function_exit"] == [1, 2]
    login_exit = next(e for e in events if e.get("function") == "auth.login" and e["eventType"] == "function_exit")
    assert login_exit["returnValue"] is True
    check_enter = next(e for e in events if e.get("function") == "auth.check" and e["eventType"] == "function_enter")
    login_enter = next(e for e in events if e.get("function") == "auth.login" and e["eventType"] == "function_enter")
    assert check_enter["parentEventId"] == login_enter["id"]  # called from login
    fetches = [e for e in events if e.get("function") == "app.fetchUser"]
    assert sorted(e["eventType"] for e in fetches) == ["function_enter"] * 2 + ["function_exit"] * 2
    exits = [e for e in fetches if e["eventType"] == "function_exit"]
    resolved = [e for e in exits if "exception" not in e]
    rejected = [e for e in exits if "exception" in e]
    assert resolved and resolved[0]["returnValue"] == {"id": 7, "name": "user7"}
    assert rejected and rejected[0]["exception"]["type"] == "RangeError"
    assert all(e["sourceFile"].endswith("app.js") for e in fetches)


async def test_esm_functions(strobe: StrobeClient, node_project: Path) -> None:
    launched = await run_to_end(strobe, node_project, "esm/app.mjs", ["geometry.*", "Shape.area"])
    events = await strobe.all_events(launched["sessionId"], verbose=True)
    traced = calls(events)
    assert ("function_enter", "geometry.square") in traced and ("function_exit", "geometry.Shape.area") in traced
    area = next(e for e in events if e.get("function") == "geometry.Shape.area" and e["eventType"] == "function_exit")
    assert area["returnValue"] == 9


async def test_an_uncaught_exception_is_a_crash_event(strobe: StrobeClient, node_project: Path) -> None:
    launched = await run_to_end(strobe, node_project, "crash.js", ["explode"])
    sid = launched["sessionId"]

    async def crash() -> dict[str, Any] | None:
        found = await strobe.call("debug_query", sessionId=sid, eventType="crash", verbose=True)
        return found["events"][0] if found["events"] else None

    event = await poll(crash, 10, "the crash event")
    assert "TypeError" in event["text"] and "explode" in event["text"], event
    stderr = "".join(e["text"] for e in await strobe.all_events(sid, eventType="stderr"))
    assert "TypeError: Cannot read properties of undefined" in stderr  # the program's own report, unchanged
    sessions = (await strobe.call("debug_list_sessions"))["sessions"]
    assert [s.get("exitCode") for s in sessions if s["sessionId"] == sid] == [1]


async def test_a_pattern_added_while_the_program_runs_says_it_applies_to_later_modules(
        strobe: StrobeClient, node_project: Path) -> None:
    stop = node_project / "stop"
    sid = (await strobe.call("debug_launch", command="node", args=["ticker.js", str(stop)],
                             projectRoot=str(node_project), cwd=str(node_project)))["sessionId"]

    async def ready() -> bool | None:
        page = await strobe.call("debug_query", sessionId=sid, eventType="stdout")
        return True if any(e["text"] == "ready\n" for e in page["events"]) else None

    await poll(ready, 30, "the program to start")
    traced = await strobe.call("debug_trace", sessionId=sid, add=["tick"])
    said = " ".join(traced.get("warnings", []))
    assert "added while the program runs" in said and "before debug_launch" in said, traced
    stop.touch()
    await strobe.wait_for_status(sid, "exited", timeout=30)
    assert calls(await strobe.all_events(sid)) == []  # nothing recorded that it said it could not trace
