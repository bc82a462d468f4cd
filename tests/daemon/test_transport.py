"""The socket transport's answer to lines that are not JSON-RPC messages, through a real daemon."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from tests.conftest import connect

from strobe.daemon.transport import INVALID_REQUEST, PARSE_ERROR, malformed_reply

pytestmark = [pytest.mark.anyio]

INITIALIZE = {"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {
    "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}


def test_malformed_reply_codes_and_ids() -> None:
    assert malformed_reply(b"{nope")["error"]["code"] == PARSE_ERROR
    assert malformed_reply(b"\xff\xfe")["id"] is None  # not UTF-8: a parse error too
    assert malformed_reply(b'{"jsonrpc": "2.0", "id": 7, "method": 5}')["id"] == 7
    assert malformed_reply(b'{"id": "x' + b"y" * 300 + b'"}')["id"] is None  # a huge id is not echoed
    assert malformed_reply(b'{"id": true}')["id"] is None
    assert malformed_reply(b"[1, 2]")["error"]["code"] == INVALID_REQUEST


async def test_every_malformed_line_gets_an_error_and_the_connection_goes_on(strobe_home: Path) -> None:
    async with connect(strobe_home) as client:  # starts the daemon
        await client.call("debug_list_sessions")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30)
            sock.connect(str(strobe_home / "strobe.sock"))
            lines = [b"not json at all", b'{"hello": "world"}', b'{"jsonrpc": "2.0", "id": 7, "method": 5}',
                     json.dumps(INITIALIZE).encode()]
            sock.sendall(b"\n".join(lines) + b"\n")
            reader = sock.makefile("rb")
            replies = [json.loads(reader.readline()) for _ in lines]
    assert [(r.get("id"), r.get("error", {}).get("code")) for r in replies] == [
        (None, PARSE_ERROR), (None, INVALID_REQUEST), (7, INVALID_REQUEST), (9, None)]
    assert "Send one JSON-RPC 2.0 message per line" in replies[0]["error"]["message"]
    assert replies[3]["result"]["serverInfo"]["name"]
