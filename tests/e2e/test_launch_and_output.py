"""debug_launch → debug_query on output → debug_stop, through a real `strobe mcp`, on C programs built now."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import StrobeClient, connect, poll, write_settings

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SESSION_ID = re.compile(r"^hello-\d{4}-\d{2}-\d{2}-\d{2}h\d{2}(-\d+)?$")


async def test_launch_captures_stdout_stderr_and_exit_code(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    hello = c_target("hello")
    launched = await strobe.call(
        "debug_launch", command=str(hello), args=["one", "two words"], projectRoot=str(project),
        env={"STROBE_TEST_VAR": "from-the-agent", "EXIT_CODE": "5"},
    )
    sid = launched["sessionId"]
    assert SESSION_ID.match(sid), sid
    assert launched["pid"] > 0
    assert "stderr" in launched["nextSteps"]

    ended = await strobe.wait_for_status(sid, "exited")
    assert ended["exitCode"] == 5
    assert ended["pid"] == launched["pid"]
    assert ended["binaryPath"] == str(hello)
    assert ended["endedAt"] >= ended["startedAt"]

    stderr = await strobe.call("debug_query", sessionId=sid, eventType="stderr")
    assert [e["text"] for e in stderr["events"]] == ["error: widget count is 3, expected 4\n"]
    assert stderr["totalCount"] == 1 and stderr["hasMore"] is False
    assert stderr["sessionStatus"] == "exited" and stderr["exitCode"] == 5

    stdout = await strobe.call("debug_query", sessionId=sid, eventType="stdout")
    assert [e["text"] for e in stdout["events"]] == [
        "hello from stdout\n",
        "arg[1]=one\n",
        "arg[2]=two words\n",
        f"cwd={hello.parent}\n",  # default working directory: the executable's
        "env=from-the-agent\n",
    ]
    assert all(e["eventType"] == "stdout" and e["id"].startswith(sid + "-") for e in stdout["events"])

    everything = await strobe.call("debug_query", sessionId=sid, verbose=True)
    assert everything["totalCount"] == 6
    stamps = [e["timestampNs"] for e in everything["events"]]
    assert stamps == sorted(stamps)
    assert {e["pid"] for e in everything["events"]} == {launched["pid"]}
    assert "pids" not in everything  # only listed when a session has several processes


async def test_cwd_and_relative_command(strobe: StrobeClient, c_target: Callable[[str], Path], project: Path) -> None:
    hello = c_target("hello")
    (project / "bin").mkdir()
    os.symlink(hello, project / "bin" / "hello")
    workdir = project / "work"
    workdir.mkdir()
    sid = (await strobe.call("debug_launch", command="bin/hello", cwd=str(project), projectRoot=str(project)))[
        "sessionId"
    ]
    await strobe.wait_for_status(sid, "exited")
    texts = [e["text"] for e in (await strobe.call("debug_query", sessionId=sid, eventType="stdout"))["events"]]
    assert f"cwd={project}\n" in texts
    await strobe.call("debug_stop", sessionId=sid)


async def test_exited_session_does_not_block_relaunch(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    hello = c_target("hello")
    first = (await strobe.call("debug_launch", command=str(hello), projectRoot=str(project)))["sessionId"]
    await strobe.wait_for_status(first, "exited")
    second = (await strobe.call("debug_launch", command=str(hello), projectRoot=str(project)))["sessionId"]
    if second.startswith(first):  # same minute: the collision suffix
        assert second == f"{first}-2"
    else:  # the clock moved on to a new minute: a fresh id
        assert SESSION_ID.match(second) and second != first
    await strobe.wait_for_status(second, "exited")
    sessions = {s["sessionId"]: s for s in (await strobe.call("debug_list_sessions"))["sessions"]}
    assert sessions[first]["status"] == sessions[second]["status"] == "exited"
    for sid in (first, second):
        assert (await strobe.call("debug_query", sessionId=sid, eventType="stderr"))["totalCount"] == 1


async def test_session_exists_only_while_running(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    sleeper = c_target("sleeper")
    sid = (await strobe.call("debug_launch", command=str(sleeper), projectRoot=str(project)))["sessionId"]
    error = await strobe.error("debug_launch", command=str(sleeper), projectRoot=str(project))
    assert error.code == "SESSION_EXISTS"
    assert sid in error.message and "debug_stop" in error.message
    stopped = await strobe.call("debug_stop", sessionId=sid)
    assert stopped["success"] is True
    again = (await strobe.call("debug_launch", command=str(sleeper), projectRoot=str(project)))["sessionId"]
    await strobe.call("debug_stop", sessionId=again)


async def test_megabytes_written_then_immediate_exit_lose_nothing(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    lines = 50_000  # 5 MB through the pipe, then exit straight away
    sid = (
        await strobe.call("debug_launch", command=str(c_target("flood")), args=[str(lines)], projectRoot=str(project))
    )["sessionId"]
    await strobe.wait_for_status(sid, "exited", timeout=60)
    first = await strobe.call("debug_query", sessionId=sid, eventType="stdout", limit=500)
    assert first["totalCount"] == lines
    assert first["hasMore"] is True and "offset 500" in first["hint"]
    texts = [e["text"] for e in await strobe.all_events(sid, eventType="stdout")]
    assert len(texts) == lines
    for i, text in enumerate(texts):
        assert text.startswith(f"line {i:08d} ") and text.endswith("efg\n") and len(text) == 100, (i, text)
    stderr = [e["text"] for e in await strobe.all_events(sid, eventType="stderr")]
    assert stderr == [f"progress {i}\n" for i in range(0, lines, 100)] + ["flood done\n"]


async def test_partial_lines_long_lines_and_binary_output(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    sid = (await strobe.call("debug_launch", command=str(c_target("sleeper")), projectRoot=str(project)))["sessionId"]

    async def prompt_seen() -> list[str] | None:
        texts = [e["text"] for e in await strobe.all_events(sid, eventType="stdout")]
        return texts if texts and texts[-1] == "Enter value: " else None

    # The prompt has no newline and the process keeps running: it still shows up.
    texts = await poll(prompt_seen, 10, "the prompt without a newline")
    assert texts[0] == "ready\n"
    long_pieces = texts[1:-2]
    assert len(long_pieces) == 2  # a 9001-byte line is cut into 8 KiB events
    assert "".join(long_pieces) == "x" * 9000 + "\n"
    assert texts[-2] == "bad bytes: \\xff\\xfe end\n"
    assert (await strobe.call("debug_list_sessions"))["sessions"][0]["status"] == "running"
    stopped = await strobe.call("debug_stop", sessionId=sid)
    assert stopped["eventsCollected"] == 5
    assert (await strobe.error("debug_query", sessionId=sid)).code == "SESSION_NOT_FOUND"


async def test_stop_retain_then_delete(strobe: StrobeClient, c_target: Callable[[str], Path], project: Path) -> None:
    sleeper = c_target("sleeper")
    sid = (await strobe.call("debug_launch", command=str(sleeper), projectRoot=str(project)))["sessionId"]
    await poll(
        lambda: _nonempty(strobe.call("debug_query", sessionId=sid, eventType="stdout")), 10, "first output"
    )
    running = await strobe.wait_for_status(sid, "running")
    pid = running["pid"]
    stopped = await strobe.call("debug_stop", sessionId=sid, retain=True)
    assert stopped["success"] is True and stopped["eventsCollected"] >= 1
    assert "debug_delete_session" in stopped["hint"]
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the process is gone once debug_stop returns
    listed = {s["sessionId"]: s for s in (await strobe.call("debug_list_sessions"))["sessions"]}
    assert listed[sid]["status"] == "stopped" and listed[sid]["retained"] is True
    assert (await strobe.call("debug_query", sessionId=sid))["totalCount"] == stopped["eventsCollected"]
    assert (await strobe.call("debug_delete_session", sessionId=sid)) == {"success": True}
    assert sid not in {s["sessionId"] for s in (await strobe.call("debug_list_sessions"))["sessions"]}
    assert (await strobe.error("debug_delete_session", sessionId=sid)).code == "SESSION_NOT_FOUND"


async def _nonempty(call: object) -> dict[str, object] | None:
    page = await call  # type: ignore[misc]
    return page if page["totalCount"] else None


async def test_time_pid_and_paging_filters(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    launched = await strobe.call("debug_launch", command=str(c_target("flood")), args=["300"], projectRoot=str(project))
    sid, pid = launched["sessionId"], launched["pid"]
    await strobe.wait_for_status(sid, "exited")
    all_events = await strobe.all_events(sid)
    assert len(all_events) == 300 + 3 + 1
    middle = all_events[150]["timestampNs"]
    later = await strobe.all_events(sid, timeFrom=middle)
    assert later and all(e["timestampNs"] >= middle for e in later)
    assert len(later) == sum(1 for e in all_events if e["timestampNs"] >= middle)
    earlier = await strobe.all_events(sid, timeTo=middle)
    assert len(earlier) == sum(1 for e in all_events if e["timestampNs"] <= middle)
    last = all_events[-1]["timestampNs"]
    recent = await strobe.all_events(sid, timeFrom="-0ns")
    assert [e["timestampNs"] for e in recent] == [e["timestampNs"] for e in all_events if e["timestampNs"] == last]
    page = await strobe.call("debug_query", sessionId=sid, limit=10, offset=295)
    assert [e["id"] for e in page["events"]] == [e["id"] for e in all_events[295:304]]
    assert page["hasMore"] is False and page["totalCount"] == 304
    assert (await strobe.call("debug_query", sessionId=sid, pid=pid))["totalCount"] == 304
    assert (await strobe.call("debug_query", sessionId=sid, pid=pid + 100_000))["totalCount"] == 0
    assert (await strobe.call("debug_query", sessionId=sid, eventType="function_enter"))["totalCount"] == 0


async def test_fifo_limit_from_project_settings(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    write_settings(project / ".strobe", {"events.maxOutputPerSession": 100})
    sid = (
        await strobe.call("debug_launch", command=str(c_target("flood")), args=["1000"], projectRoot=str(project))
    )["sessionId"]
    await strobe.wait_for_status(sid, "exited")
    page = await strobe.call("debug_query", sessionId=sid, limit=500)
    assert page["totalCount"] == 100
    kept = {e["text"][:13] for e in page["events"]}
    # The newest events are the ones kept (stdout and stderr are separate pipes, so only per-stream order holds).
    assert "line 00000999" in kept and "line 00000000" not in kept
    assert any("dropped" in w and "events.maxOutputPerSession" in w for w in page["warnings"])
    assert (await strobe.call("debug_stop", sessionId=sid))["eventsDropped"] == 1011 - 100


async def test_invalid_settings_fall_back_with_a_warning(
    strobe: StrobeClient, strobe_home: Path, c_target: Callable[[str], Path], project: Path
) -> None:
    write_settings(strobe_home, {"events.maxPerSession": "lots"})
    write_settings(project / ".strobe", {"events.maxPerSesion": 5})
    launched = await strobe.call("debug_launch", command=str(c_target("hello")), projectRoot=str(project))
    warnings = " ".join(launched["warnings"])
    assert "events.maxPerSession" in warnings and "200,000" in warnings
    assert "unknown setting 'events.maxPerSesion'" in warnings
    await strobe.wait_for_status(launched["sessionId"], "exited")
    assert (await strobe.call("debug_query", sessionId=launched["sessionId"]))["totalCount"] == 4


async def test_second_client_sees_and_queries_a_session_that_outlives_its_creator(
    strobe_home: Path, c_target: Callable[[str], Path], project: Path
) -> None:
    sleeper = c_target("sleeper")
    async with connect(strobe_home) as second:
        async with connect(strobe_home) as first:
            sid = (await first.call("debug_launch", command=str(sleeper), projectRoot=str(project)))["sessionId"]
            listed = await second.wait_for_status(sid, "running")
            assert listed["binaryPath"] == str(sleeper)
        # The creating client is gone; the session and its process are not.
        page = await poll(
            lambda: _nonempty(second.call("debug_query", sessionId=sid, eventType="stdout")), 10, "output"
        )
        assert page["events"][0]["text"] == "ready\n"  # type: ignore[index]
        await second.wait_for_status(sid, "running")
        await second.call("debug_stop", sessionId=sid)
