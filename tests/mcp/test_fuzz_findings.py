"""What the fuzz test of every tool (tests/e2e/test_fuzz_tools.py) found, each pinned where it was fixed.

- A request whose id MCP does not allow (null, a fraction, a boolean, a list, an object) passed for a notification
  and got no answer at all: its caller waited forever. It now gets an invalid-request error with id null.
- A string with a lone surrogate escape ("\\udcff": JSON, but not Unicode) was refused as "not a JSON-RPC 2.0 message
  (it needs jsonrpc and a method…)", which it had: the error now says what is wrong with it.
- A validation message echoed every problem and every unknown key whole: 10 kB for one 5,000-character key, and a
  line per item of a 4,096-item array. It lists ten problems with names cut to 64 characters.
- debug_test with a NUL in an environment value (or `test`), or an environment name that is empty or holds '=', was an
  INTERNAL_ERROR (subprocess's ValueError), and the half-started run then held up the daemon's shutdown for good;
  debug_launch passed such arguments to the program truncated at the NUL. Both refuse them as VALIDATION_ERROR now.
- A path the kernel will not look up (a name over 255 bytes, a path over 4,095: ENAMETOOLONG) as debug_launch's
  command, cwd or projectRoot, or debug_test's projectRoot or command, was an INTERNAL_ERROR (Path.exists/is_dir raise
  it); it is a VALIDATION_ERROR naming the path, wherever the lookup happens.
"""

from __future__ import annotations

import asyncio
import errno
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pydantic
import pytest
from tests.conftest import StrobeClient

from strobe.daemon.transport import INVALID_REQUEST, socket_streams
from strobe.mcp.app import MAX_PROBLEMS, describe_too_long, describe_validation_error
from strobe.mcp.models import LaunchRequest, QueryRequest, TestRequest, TraceRequest


def rejected(model: type[pydantic.BaseModel], data: dict[str, Any]) -> str:
    with pytest.raises(pydantic.ValidationError) as info:
        model.model_validate(data)
    return describe_validation_error(info.value)


# ---- the socket transport ------------------------------------------------------------------------------------


@asynccontextmanager
async def transport() -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter,
                                             Any]]:
    """The daemon's side of one connection (socket_streams) and a raw peer: (peer reader, peer writer, incoming)."""
    ours, theirs = socket.socketpair()
    reader, writer = await asyncio.open_connection(sock=ours)
    peer_reader, peer_writer = await asyncio.open_connection(sock=theirs)
    try:
        async with socket_streams(reader, writer) as (incoming, _outgoing):
            yield peer_reader, peer_writer, incoming
    finally:
        peer_writer.close()
        writer.close()


async def answer(peer_reader: asyncio.StreamReader) -> dict[str, Any]:
    reply: dict[str, Any] = json.loads(await asyncio.wait_for(peer_reader.readline(), 10))
    return reply


@pytest.mark.anyio
@pytest.mark.parametrize("bad_id", [None, 1.5, True, [1], {"a": 1}])
async def test_a_request_whose_id_mcp_does_not_allow_is_answered(bad_id: Any) -> None:
    async with transport() as (peer_reader, peer_writer, incoming):
        request = {"jsonrpc": "2.0", "id": bad_id, "method": "tools/call", "params": {"name": "debug_list_sessions"}}
        peer_writer.write(json.dumps(request).encode() + b"\n")
        reply = await answer(peer_reader)
        assert reply["id"] is None and reply["error"]["code"] == INVALID_REQUEST
        assert '"id" must be a string or an integer' in reply["error"]["message"]
        # The connection goes on, and a real notification (no id member) still reaches the server.
        peer_writer.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        passed = await asyncio.wait_for(incoming.receive(), 10)
        assert isinstance(passed.message, types.JSONRPCNotification)
        assert passed.message.method == "notifications/initialized"


@pytest.mark.anyio
async def test_a_lone_surrogate_is_named_in_the_error() -> None:
    async with transport() as (peer_reader, peer_writer, _incoming):
        peer_writer.write(b'{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "debug_query", '
                          b'"arguments": {"sessionId": "\\udcff"}}}\n')
        reply = await answer(peer_reader)
    assert reply["id"] == 4 and reply["error"]["code"] == INVALID_REQUEST
    assert "surrogate" in reply["error"]["message"] and "it needs" not in reply["error"]["message"]


# ---- validation messages ---------------------------------------------------------------------------------------


def test_an_unknown_key_of_any_length_is_named_in_a_slice() -> None:
    message = rejected(QueryRequest, {"sessionId": "s", "a" * 5000: 1, "function": {"b" * 300: 2}})
    assert len(message) < 600
    assert "a" * 64 + "… (5,000 characters): unknown parameter" in message
    assert "function." + "b" * 64 + "… (300 characters): unknown parameter" in message


def test_a_message_lists_ten_problems_and_counts_the_rest() -> None:
    message = rejected(LaunchRequest, {"command": "x", "projectRoot": "/", "args": [1] * 4096})
    assert message.count("Input should be a valid string") == MAX_PROBLEMS
    assert message.endswith(f"and {4096 - MAX_PROBLEMS} more problems (fix these first).")
    assert len(message) < 2000


# ---- strings the operating system gets -------------------------------------------------------------------------

LAUNCH = {"command": "/bin/true", "projectRoot": "/tmp"}
TEST = {"projectRoot": "/tmp", "framework": "generic", "command": "true"}


@pytest.mark.parametrize(("model", "data", "where"), [
    (LaunchRequest, {**LAUNCH, "command": "/bin/true\x00x"}, "command"),
    (LaunchRequest, {**LAUNCH, "args": ["a\x00b"]}, "args.0"),
    (LaunchRequest, {**LAUNCH, "cwd": "/tmp\x00"}, "cwd"),
    (LaunchRequest, {**LAUNCH, "projectRoot": "/tmp\x00"}, "projectRoot"),
    (LaunchRequest, {**LAUNCH, "env": {"A": "b\x00"}}, "env.A"),
    (TestRequest, {**TEST, "env": {"A": "\x00"}}, "env.A"),
    (TestRequest, {**TEST, "test": "t\x00"}, "test"),
    (TestRequest, {**TEST, "command": "true\x00"}, "command"),
    (TestRequest, {**TEST, "projectRoot": "/tmp\x00"}, "projectRoot"),
    (TraceRequest, {"add": ["main"], "projectRoot": "/tmp\x00"}, "projectRoot"),
])
def test_a_nul_is_refused_where_the_os_would_get_it(model: type[pydantic.BaseModel], data: dict[str, Any],
                                                     where: str) -> None:
    message = rejected(model, data)
    assert message.startswith(f"Invalid parameters: {where}: ")
    assert "NUL character" in message


@pytest.mark.parametrize("model", [LaunchRequest, TestRequest])
@pytest.mark.parametrize("name", ["", "A=B", "=", "A\x00"])
def test_an_environment_name_the_os_cannot_take_is_refused(model: type[pydantic.BaseModel], name: str) -> None:
    data = LAUNCH if model is LaunchRequest else TEST
    message = rejected(model, {**data, "env": {name: "x"}})
    assert "an environment variable's name must be non-empty, without '='" in message


def test_ordinary_names_and_values_still_pass() -> None:
    launch = LaunchRequest.model_validate({**LAUNCH, "args": ["é", "a b", ""], "env": {"X_1": "", "é": "=v="}})
    assert launch.env == {"X_1": "", "é": "=v="}
    assert TestRequest.model_validate({**TEST, "env": {"PATH": "/bin"}, "test": "t"}).test == "t"


# ---- paths too long for the kernel ------------------------------------------------------------------------------


def test_a_path_too_long_is_shown_in_a_slice() -> None:
    message = describe_too_long(OSError(errno.ENAMETOOLONG, "File name too long", "/tmp/" + "b" * 5000))
    assert message.startswith("A path is longer than the system allows") and len(message) < 400
    assert "/tmp/bbb" in message and "(5,005 characters)" in message


@pytest.mark.anyio
async def test_a_path_too_long_for_the_kernel_is_a_validation_error(strobe: StrobeClient, tmp_path: Path) -> None:
    project = str(tmp_path)
    long_name, long_path = f"{tmp_path}/{'b' * 300}/x", "a/" * 2040  # the second is joined to projectRoot
    cases: list[tuple[str, dict[str, Any]]] = [
        ("debug_launch", {"command": long_name, "projectRoot": project}),
        ("debug_launch", {"command": long_path, "projectRoot": project}),
        ("debug_launch", {"command": "/bin/true", "projectRoot": project, "cwd": long_name}),
        ("debug_launch", {"command": "/bin/true", "projectRoot": long_name}),
        ("debug_test", {"projectRoot": long_name, "framework": "generic", "command": "true"}),
        ("debug_test", {"projectRoot": project, "framework": "generic", "command": long_path}),
    ]
    for tool, arguments in cases:
        error = await strobe.error(tool, **arguments)
        assert error.code == "VALIDATION_ERROR", (tool, arguments, error)
        assert "longer than the system allows" in error.message, (tool, error.message)
