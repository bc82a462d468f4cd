"""The daemon's life: one per STROBE_HOME however many proxies race to start it, private files,
recovery from a killed daemon, idle exit, and a proxy that carries its client across a restart."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from tests.conftest import connect, poll, processes_under, write_settings

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def daemon_pid(home: Path) -> int:
    return int((home / "strobe.pid").read_text())


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


async def test_three_proxies_at_once_share_one_daemon(strobe_home: Path) -> None:
    async with connect(strobe_home) as a, connect(strobe_home) as b, connect(strobe_home) as c:
        results = []

        async def call(client: object) -> None:
            results.append(await client.call("debug_list_sessions"))  # type: ignore[attr-defined]

        async with anyio.create_task_group() as tg:
            for client in (a, b, c):
                tg.start_soon(call, client)
        assert results == [{"sessions": []}] * 3

        async def one_daemon() -> list[int] | None:
            daemons = [
                pid for pid in processes_under(strobe_home)
                if b"strobe\x00daemon" in Path(f"/proc/{pid}/cmdline").read_bytes()
            ]
            return daemons if len(daemons) == 1 else None

        # Daemons that lost the start-up race exit at once; the one left is the one in the pid file.
        assert await poll(one_daemon, 10, "a single daemon") == [daemon_pid(strobe_home)]


async def test_files_are_private(strobe_home: Path) -> None:
    async with connect(strobe_home) as client:
        await client.call("debug_list_sessions")
        assert stat.S_IMODE(strobe_home.stat().st_mode) == 0o700
        assert stat.S_IMODE((strobe_home / "strobe.sock").stat().st_mode) == 0o600
        assert alive(daemon_pid(strobe_home))
        assert (strobe_home / "strobe.db").exists() and (strobe_home / "daemon.log").exists()


async def test_killed_daemon_is_replaced_and_its_sessions_marked_stopped(
    strobe_home: Path, c_target: Callable[[str], Path], project: Path
) -> None:
    async with connect(strobe_home) as client:
        launched = await client.call("debug_launch", command=str(c_target("sleeper")), projectRoot=str(project))
        first = daemon_pid(strobe_home)
    os.kill(first, signal.SIGKILL)
    await poll(lambda: _done(not alive(first)), 10, "the daemon to die")
    with contextlib.suppress(ProcessLookupError):  # its target (which the daemon's death has killed already)
        os.kill(launched["pid"], signal.SIGKILL)
    assert (strobe_home / "strobe.sock").exists() and (strobe_home / "strobe.pid").exists()  # stale leftovers
    async with connect(strobe_home) as client:
        sessions = (await client.call("debug_list_sessions"))["sessions"]
        assert daemon_pid(strobe_home) != first
        assert [(s["sessionId"], s["status"], s["retained"]) for s in sessions] == [
            (launched["sessionId"], "stopped", True)
        ]
        assert (await client.call("debug_query", sessionId=launched["sessionId"]))["totalCount"] >= 1


async def _done(condition: bool) -> bool | None:
    return True if condition else None


async def test_idle_daemon_exits_and_the_proxy_carries_on(
    strobe_home: Path, c_target: Callable[[str], Path], project: Path
) -> None:
    write_settings(strobe_home, {"daemon.idleTimeoutMs": 1500})
    async with connect(strobe_home) as client:
        sid = (await client.call("debug_launch", command=str(c_target("hello")), projectRoot=str(project)))[
            "sessionId"
        ]
        await client.wait_for_status(sid, "exited")
        first = daemon_pid(strobe_home)
        await poll(lambda: _done(not alive(first)), 20, "the idle daemon to exit")
        assert not (strobe_home / "strobe.sock").exists()
        # The same client keeps working: the proxy restarts the daemon and replays the handshake.
        page = await client.call("debug_query", sessionId=sid, eventType="stderr")
        assert page["totalCount"] == 1
        assert daemon_pid(strobe_home) != first


def test_proxy_writes_only_protocol_bytes(strobe_home: Path) -> None:
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "debug_list_sessions", "arguments": {}}},
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "strobe", "mcp"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, "STROBE_HOME": str(strobe_home)},
    )
    assert proc.stdin is not None and proc.stdout is not None
    replies = []
    for message in messages:
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        if "id" in message:
            replies.append(json.loads(proc.stdout.readline()))
    proc.stdin.close()
    rest = proc.stdout.read()
    assert proc.wait(timeout=30) == 0
    assert rest == b""
    assert [r["id"] for r in replies] == [1, 2, 3]
    assert replies[0]["result"]["protocolVersion"] == "2024-11-05"
    names = {tool["name"] for tool in replies[1]["result"]["tools"]}
    assert names == {
        "debug_launch", "debug_trace", "debug_query", "debug_stop", "debug_list_sessions", "debug_delete_session",
        "debug_read", "debug_test", "debug_test_status", "debug_breakpoint", "debug_logpoint", "debug_continue",
        "debug_write", "debug_input", "debug_stacks", "debug_export",
    }
    for tool in replies[1]["result"]["tools"]:
        assert "Example" in tool["description"] and tool["inputSchema"]["type"] == "object"
    assert json.loads(replies[2]["result"]["content"][0]["text"]) == {"sessions": []}


async def test_shutdown_kills_targets_and_keeps_their_sessions(
    strobe_home: Path, c_target: Callable[[str], Path], project: Path
) -> None:
    async with connect(strobe_home) as client:
        launched = await client.call("debug_launch", command=str(c_target("sleeper")), projectRoot=str(project))
        await poll(
            lambda: _some(client.call("debug_query", sessionId=launched["sessionId"], eventType="stdout")), 10, "output"
        )
        result = subprocess.run(
            [sys.executable, "-m", "strobe", "shutdown"], env={**os.environ, "STROBE_HOME": str(strobe_home)},
            timeout=30, check=False,
        )
        assert result.returncode == 0
        assert not alive(launched["pid"])
        sessions = (await client.call("debug_list_sessions"))["sessions"]  # through a fresh daemon
        assert [(s["status"], s["retained"]) for s in sessions] == [("stopped", True)]
        assert (await client.call("debug_query", sessionId=launched["sessionId"]))["totalCount"] == 5


async def _some(call: object) -> bool | None:
    page = await call  # type: ignore[misc]
    return True if page["totalCount"] == 5 else None


async def test_daemon_whose_socket_is_removed_exits(strobe_home: Path) -> None:
    async with connect(strobe_home) as client:
        await client.call("debug_list_sessions")
        pid = daemon_pid(strobe_home)
        (strobe_home / "strobe.sock").unlink()
        await poll(lambda: _done(not alive(pid)), 10, "the unreachable daemon to exit")
