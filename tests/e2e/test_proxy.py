"""The proxy across a daemon that dies mid-call, and with requests over its size limit, through a real
`strobe mcp` driven line by line: a call that may have run is never sent twice, read-only calls are, and a
huge line is refused without wedging anything."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from strobe.daemon.proxy import DAEMON_RESTARTED, INVALID_REQUEST, MAX_REQUEST_BYTES
from tests.conftest import poll
from tests.e2e.test_daemon import alive, daemon_pid

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

INITIALIZE = {"jsonrpc": "2.0", "method": "initialize", "params": {
    "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}


def tool_call(request_id: int, name: str, **arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}


class RawProxy:
    """`strobe mcp` as a subprocess, written to and read from one JSON-RPC line at a time."""

    def __init__(self, home: Path, stderr: Path) -> None:
        with open(stderr, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "strobe", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                env={**os.environ, "STROBE_HOME": str(home)},
            )
        self._buffer = b""

    def send(self, message: dict[str, Any] | bytes) -> int:
        line = message if isinstance(message, bytes) else json.dumps(message).encode() + b"\n"
        assert self.proc.stdin is not None
        self.proc.stdin.write(line)
        self.proc.stdin.flush()
        return len(line)

    def replies(self, count: int, timeout: float = 30) -> dict[Any, dict[str, Any]]:
        """The next `count` lines it writes, by id; fails after `timeout` seconds."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        found: dict[Any, dict[str, Any]] = {}
        while len(found) < count:
            if b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                reply = json.loads(line)
                found[reply.get("id")] = reply
                continue
            left = deadline - time.monotonic()
            readable, _, _ = select.select([fd], [], [], max(0.0, left))
            if not readable:
                raise AssertionError(f"timed out after {timeout}s waiting for replies; got {found}")
            chunk = os.read(fd, 1 << 20)
            assert chunk, f"the proxy closed its stdout; got {found}"
            self._buffer += chunk
        return found

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(message)
        return self.replies(1)[message.get("id")]

    def initialize(self, request_id: int = 1) -> dict[str, Any]:
        reply = self.call({**INITIALIZE, "id": request_id})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            assert self.proc.stdout is not None
            self.proc.stdout.close()


@contextmanager
def raw_proxy(home: Path, tmp_path: Path) -> Iterator[RawProxy]:
    proxy = RawProxy(home, tmp_path / "proxy.stderr")
    try:
        yield proxy
    finally:
        proxy.close()


@contextmanager
def stopped_daemon(home: Path) -> Iterator[int]:
    """SIGSTOP this home's daemon: what is sent to it now stays unanswered. Killed (-9) on the way out."""
    pid = daemon_pid(home)
    os.kill(pid, signal.SIGSTOP)
    try:
        yield pid
    finally:
        os.kill(pid, signal.SIGKILL)


def daemon_ends(home: Path) -> list[int]:
    """Bytes waiting, unread, in each accepted connection of the daemon (`ss`: Recv-Q of the socket's peers)."""
    listing = subprocess.run(["ss", "-xnH"], capture_output=True, text=True, check=True).stdout
    path = str(home / "strobe.sock")
    return [int(fields[2]) for fields in (line.split() for line in listing.splitlines())
            if len(fields) >= 5 and fields[1] == "ESTAB" and fields[4] == path]


def queued_for_daemon(home: Path) -> int:
    return sum(daemon_ends(home))


async def until_sent(home: Path, size: int) -> None:
    """Wait until `size` bytes sit unread in the stopped daemon's socket: the proxy sent the requests."""

    async def sent() -> bool | None:
        return True if queued_for_daemon(home) >= size else None

    await poll(sent, 10, "the proxy to write the requests to the daemon")


def sessions(proxy: RawProxy, request_id: int) -> list[dict[str, Any]]:
    reply = proxy.call(tool_call(request_id, "debug_list_sessions"))
    return json.loads(reply["result"]["content"][0]["text"])["sessions"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("tool", ["debug_launch", "debug_test"])
async def test_a_call_in_flight_when_the_daemon_dies_is_not_sent_again(
    strobe_home: Path, tmp_path: Path, c_target: Callable[[str], Path], project: Path, tool: str
) -> None:
    hello = str(c_target("hello"))
    arguments = ({"command": hello, "projectRoot": str(project)} if tool == "debug_launch"
                 else {"projectRoot": str(project), "framework": "generic", "command": hello})
    with raw_proxy(strobe_home, tmp_path) as proxy:
        proxy.initialize()
        assert sessions(proxy, 2) == []
        with stopped_daemon(strobe_home) as first:
            size = proxy.send(tool_call(3, tool, **arguments))
            size += proxy.send(tool_call(4, "debug_list_sessions"))  # read-only: repeated
            await until_sent(strobe_home, size)
        replies = proxy.replies(2)
        assert not alive(first) and daemon_pid(strobe_home) != first
        error = replies[3]["error"]
        assert error["code"] == DAEMON_RESTARTED
        assert f"daemon restarted while {tool} was in flight" in error["message"]
        assert "may or may not have run" in error["message"] and "debug_list_sessions" in error["message"]
        assert json.loads(replies[4]["result"]["content"][0]["text"]) == {"sessions": []}
        # Never run twice: the stopped daemon never got to it, and the new one was not asked.
        assert sessions(proxy, 5) == []


async def test_an_initialize_in_flight_when_the_daemon_dies_is_answered(strobe_home: Path, tmp_path: Path) -> None:
    with raw_proxy(strobe_home, tmp_path) as starter:
        starter.initialize()
        with raw_proxy(strobe_home, tmp_path) as proxy:

            async def accepted() -> bool | None:  # a connection still in the backlog is not listed by `ss`
                return True if len(daemon_ends(strobe_home)) >= 2 else None

            await poll(accepted, 10, "the daemon to accept the second proxy's connection")
            with stopped_daemon(strobe_home):
                await until_sent(strobe_home, proxy.send({**INITIALIZE, "id": "hello"}))
            reply = proxy.replies(1)["hello"]
            assert reply["result"]["protocolVersion"] == "2024-11-05"
            proxy.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert sessions(proxy, 2) == []


@pytest.mark.parametrize(("megabytes", "id_first"), [(20, True), (70, False)])
async def test_a_request_over_the_size_limit_is_refused_and_the_next_one_works(
    strobe_home: Path, tmp_path: Path, megabytes: int, id_first: bool
) -> None:
    with raw_proxy(strobe_home, tmp_path) as proxy:
        proxy.initialize()
        assert sessions(proxy, 2) == []
        daemon = daemon_pid(strobe_home)
        pad = "x" * (megabytes * 1024 * 1024)
        params = {"name": "debug_list_sessions", "arguments": {"pad": pad}}
        huge = ({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params} if id_first
                else {"jsonrpc": "2.0", "method": "tools/call", "params": params, "id": 3})
        line = json.dumps(huge).encode() + b"\n"
        del pad, params, huge
        assert len(line) > MAX_REQUEST_BYTES
        proxy.send(line)
        expected_id = 3 if id_first else None  # an id after the huge params is not looked for
        error = proxy.replies(1)[expected_id]["error"]
        assert error["code"] == INVALID_REQUEST
        assert "Request too large" in error["message"] and f"{len(line) - 1} bytes" in error["message"]
        assert sessions(proxy, 4) == []
        assert daemon_pid(strobe_home) == daemon and alive(daemon)  # the daemon never saw it


async def test_patterns_staged_before_a_daemon_restart_still_apply_to_the_next_launch(
    strobe_home: Path, tmp_path: Path, c_target: Callable[[str], Path], project: Path
) -> None:
    traced = str(c_target("hello"))
    with raw_proxy(strobe_home, tmp_path) as proxy:
        proxy.initialize()
        staged = proxy.call(tool_call(2, "debug_trace", add=["main", "nothing_*"], projectRoot=str(project)))
        assert "result" in staged and not staged["result"].get("isError"), staged
        proxy.call(tool_call(3, "debug_trace", remove=["nothing_*"], projectRoot=str(project)))
        first = daemon_pid(strobe_home)
        os.kill(first, signal.SIGKILL)

        async def gone() -> bool | None:
            return True if not alive(first) else None

        await poll(gone, 10, "the daemon to die")
        assert sessions(proxy, 6) == []  # read-only, so repeated if it went to the dead daemon: now reconnected
        reply = proxy.call(tool_call(4, "debug_launch", command=traced, projectRoot=str(project)))
        assert "result" in reply, reply
        launched = json.loads(reply["result"]["content"][0]["text"])
        assert daemon_pid(strobe_home) != first
        assert launched["pendingPatternsApplied"] == 1, launched  # 'main', staged on the daemon that died
        assert launched["hookedFunctions"] == 1
        proxy.call(tool_call(5, "debug_stop", sessionId=launched["sessionId"]))
