"""debug_export end to end: a C program with two threads launched and traced through a real MCP client, polled,
crashed, then exported as a Chrome trace (checked slice by slice) and as an HTML timeline (drawn by headless
Chromium, checked in its DOM and screenshot); `strobe export` reads the same store while the daemon runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Control, StrobeClient, poll
from tests.e2e.test_trace import launch_ready
from tests.export import browser
from tests.export.checks import assert_offline, check_chrome, html_data, load_chrome

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


@pytest.fixture(scope="module")
def two_threads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export-target") / "two_threads"
    source = Path(__file__).parent / "targets" / "two_threads.c"
    subprocess.run(["gcc", "-g", "-O0", "-pthread", "-o", str(out), str(source)], check=True)
    return out


async def crashed_session(strobe: StrobeClient, binary: Path, project: Path, control: Control) -> str:
    sid = await launch_ready(strobe, binary, project, str(control.directory))
    traced = await strobe.call("debug_trace", sessionId=sid, add=["outer", "inner", "leaf", "crash_now"])
    assert traced["hookedFunctions"] == 4
    (control.directory / "go").touch()

    async def both_done() -> bool | None:
        lines = {e["text"] for e in await strobe.all_events(sid, eventType="stdout")}
        return True if {"main: 8\n", "worker: 18\n"} <= lines else None

    await poll(both_done, 30, "both threads' calls")
    started = await strobe.call("debug_read", sessionId=sid, targets=[{"variable": "counter"}],
                                poll={"intervalMs": 50, "durationMs": 300})
    assert started["polling"] is True

    async def polled() -> bool | None:
        page = await strobe.call("debug_query", sessionId=sid, eventType="variable_snapshot")
        return True if page.get("polls") and page["polls"][0]["state"] == "complete" else None

    await poll(polled, 15, "the poll to complete")
    (control.directory / "crash").touch()
    await strobe.wait_for_status(sid, "crashed", timeout=30)
    return sid


def slices_by_thread(doc: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in doc["traceEvents"]
             if e["ph"] == "M" and e["name"] == "thread_name"}
    return {names[thread]: own for thread, own in check_chrome(doc).items()}


async def test_export_a_traced_two_thread_run(
    strobe: StrobeClient, two_threads: Path, project: Path, control: Control, strobe_home: Path, tmp_path: Path
) -> None:
    sid = await crashed_session(strobe, two_threads, project, control)

    # ---- Chrome trace, default path ----
    chrome = await strobe.call("debug_export", sessionId=sid)
    path = Path(chrome["path"])
    assert path == strobe_home / "exports" / f"{sid}.json" and chrome["format"] == "chrome"
    assert chrome["threads"] == 2 and "truncated" not in chrome and "ui.perfetto.dev" in chrome["nextSteps"]
    doc = load_chrome(path)
    threads = slices_by_thread(doc)
    assert set(threads) == {"two_threads", "worker"}
    main, worker = threads["two_threads"], threads["worker"]
    assert Counter((e["name"], e["_depth"]) for e in main) == {("outer", 0): 1, ("inner", 1): 2, ("leaf", 2): 4}
    assert Counter((e["name"], e["_depth"]) for e in worker) == {
        ("outer", 0): 1, ("inner", 1): 3, ("leaf", 2): 6, ("crash_now", 0): 1}
    outer_main = next(e for e in main if e["name"] == "outer")
    assert outer_main["args"]["arguments"] == [2] and outer_main["args"]["returnValue"] == 8
    assert outer_main["args"]["argumentNames"] == ["n"]
    assert [e["args"]["returnValue"] for e in worker if e["name"] == "inner"] == [2, 6, 10]
    crash_now = next(e for e in worker if e["name"] == "crash_now")
    assert crash_now["args"]["unfinished"] == "no exit recorded: the process crashed"
    assert all("unfinished" not in e["args"] for e in main + worker if e is not crash_now)
    # The worker began after the main thread's calls: the two tracks do not overlap in time.
    assert max(e["ts"] + e["dur"] for e in main) <= min(e["ts"] for e in worker)

    instants = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    lines = [e["args"]["text"] for e in instants if e["cat"] == "stdout"]
    assert lines == ["ready\n", "main: 8\n", "worker: 18\n"]
    (crash,) = [e for e in instants if e["cat"] == "crash"]
    assert crash["args"]["signal"] == "SIGSEGV" and crash["args"]["function"] == "crash_now"
    assert crash["args"]["backtrace"][0]["function"] == "crash_now"
    last = max(e["ts"] for e in doc["traceEvents"] if e["ph"] != "M")  # microseconds, as floats: 1 ns of rounding
    assert crash["ts"] >= crash_now["ts"] and abs(crash_now["ts"] + crash_now["dur"] - last) < 0.002
    counters = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    assert len(counters) >= 2 and all(e["name"] == "counter" and e["args"] == {"value": 10.0} for e in counters)

    # ---- HTML timeline, a path of ours ----
    page = tmp_path / "run.html"
    html = await strobe.call("debug_export", sessionId=sid, format="html", path=str(page))
    assert html["path"] == str(page) and html["threads"] == 2 and "browser" in html["nextSteps"]
    assert_offline(page)
    data = html_data(page)
    assert Counter(data["names"][c[4]] for c in data["items"] if c[0] == 0) == {
        "outer": 2, "inner": 5, "leaf": 10, "crash_now": 1}
    shown = browser.render(page, tmp_path / "chromium", fragment="#probe=outer")
    assert shown.errors == "" and not browser.uncaught(shown.console), (shown.errors, shown.console[-2000:])
    assert shown.status["data-state"] == "drawn" and shown.status["data-thread-tracks"] == "2"
    assert shown.status["data-calls"] == "18" and shown.status["data-probe"] == "outer"
    canvas, tracks, palette = browser.layout(shown.status)
    image = browser.read_png(browser.screenshot(page, tmp_path / "chromium"))
    left, right = canvas["left"] + canvas["labelWidth"], canvas["left"] + canvas["width"]
    for track in (t for t in tracks if t["kind"] == "thread"):
        y = canvas["top"] + track["y"] + 2
        colored = image.count(left, y + 2, right, y + canvas["row"] - 4, {browser.slice_color("outer", palette)})
        assert colored >= 1, f"no outer() slice drawn on {track['name']}"
    events_track = next(t for t in tracks if t["kind"] == "events")
    assert image.count(left, canvas["top"] + events_track["y"], right,
                       canvas["top"] + events_track["y"] + events_track["h"], {browser.hex_color("#d7191c")}) >= 20

    # ---- the CLI over the same store, the daemon still up ----
    env = {**os.environ, "STROBE_HOME": str(strobe_home)}
    out = tmp_path / "cli"
    out.mkdir()
    done = subprocess.run([sys.executable, "-m", "strobe", "export", sid, "-o", str(out)], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert load_chrome(out / f"{sid}.json")["traceEvents"] and "ui.perfetto.dev" in done.stdout


async def test_export_errors(strobe: StrobeClient, two_threads: Path, project: Path, control: Control,
                             tmp_path: Path) -> None:
    error = await strobe.error("debug_export", sessionId="no-such-session")
    assert error.code == "SESSION_NOT_FOUND"
    sid = await launch_ready(strobe, two_threads, project, str(control.directory))
    relative = await strobe.error("debug_export", sessionId=sid, path="out.json")
    assert relative.code == "VALIDATION_ERROR" and "absolute" in relative.message
    missing = await strobe.error("debug_export", sessionId=sid, path=str(tmp_path / "nope" / "t.json"))
    assert missing.code == "VALIDATION_ERROR" and "does not exist" in missing.message
    bad_format = await strobe.error("debug_export", sessionId=sid, format="svg")
    assert bad_format.code == "VALIDATION_ERROR"
    # A running session exports too: its output so far, nothing unfinished yet (no traced call is open).
    running = await strobe.call("debug_export", sessionId=sid, maxEvents=1)
    assert running["sessionStatus"] == "running" and running["events"] == 1
    assert any("still running" in w for w in running["warnings"])
    doc = json.loads(Path(running["path"]).read_text())
    assert [e["args"]["text"] for e in doc["traceEvents"] if e["ph"] == "i"] == ["ready\n"]
    await strobe.call("debug_stop", sessionId=sid)
