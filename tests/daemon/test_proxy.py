"""The proxy's pure parts: which calls may be repeated after a daemon restart, the size limit, and the id read
from the start of a line too large to parse."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import pytest

from strobe.daemon import server, transport
from strobe.daemon.proxy import MAX_REQUEST_BYTES, _classify, connect, leading_id
from strobe.paths import StrobePaths


def test_the_request_limit_is_under_what_the_daemon_reads() -> None:
    assert MAX_REQUEST_BYTES < server.MAX_MESSAGE_BYTES
    assert MAX_REQUEST_BYTES < transport.MAX_MESSAGE_BYTES


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def test_only_read_only_calls_are_safe_to_repeat() -> None:
    for name in ("debug_query", "debug_list_sessions", "debug_test_status"):
        assert _classify(call(name)) == (name, True)
    assert _classify(call("debug_read", sessionId="s", targets=[])) == ("debug_read", True)
    assert _classify(call("debug_read", sessionId="s", poll={"intervalMs": 50})) == ("debug_read", False)
    for name in ("debug_launch", "debug_test", "debug_stop", "debug_delete_session", "debug_trace", "nope"):
        assert _classify(call(name)) == (name, False)
    for method in ("initialize", "tools/list", "ping"):
        assert _classify({"id": 1, "method": method}) == (method, True)
    assert _classify({"id": 1, "method": "tools/call", "params": "junk"}) == ("None", False)
    assert _classify({"id": 1, "method": "sampling/createMessage"})[1] is False
    # a method or tool name that is not a string is never safe, and never an error in the proxy
    assert _classify({"id": 1, "method": ["tools/call"]}) == ("['tools/call']", False)
    assert _classify({"id": 1, "method": "tools/call", "params": {"name": {"x": 1}}}) == ("{'x': 1}", False)


def test_leading_id() -> None:
    head = json.dumps({"jsonrpc": "2.0", "id": 42, "method": "tools/call", "params": {"x": "y" * 100}}).encode()
    assert leading_id(head[:60]) == 42
    assert leading_id(b' { "id" : "abc" , "method": "x"') == "abc"
    assert leading_id(b'{"jsonrpc": "2.0", "method": "m", "id": -7}') == -7
    assert leading_id(b'{"id": 12') is None  # maybe 123...: cut short
    assert leading_id(b'{"params": {"id": 5, "pad": "xxxx') is None  # only a top-level id counts
    assert leading_id(b'{"params": {"id": 5}, "id": 6}') == 6
    assert leading_id(b'{"id": true}') is None
    assert leading_id(b'{"id": "' + b"z" * 300 + b'"}') is None  # a huge id is not echoed
    assert leading_id(b"[1, 2]") is None and leading_id(b"\xff\xfe") is None and leading_id(b"") is None


@pytest.mark.skipif(os.geteuid() != 0, reason="serving a socket as another user needs root")
def test_the_proxy_talks_only_to_a_daemon_of_its_own_user(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    paths = StrobePaths(home)
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:  # a process of another user listening on the daemon's socket path
        try:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(paths.socket))
            os.setgid(65534)
            os.setuid(65534)
            listener.listen(1)  # the credentials a client sees are the listener's at listen()
            os.write(ready_w, b"x")
            listener.accept()
            time.sleep(30)
        finally:
            os._exit(0)
    try:
        os.close(ready_w)
        assert os.read(ready_r, 1) == b"x"
        with pytest.raises(ConnectionError, match="served by a process of user 65534, not by your daemon"):
            connect(paths, deadline_s=5)
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
