"""MCP over one unix-socket connection: newline-delimited JSON-RPC, the same framing as stdio."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pydantic
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 64 * 1024 * 1024


PARSE_ERROR, INVALID_REQUEST = -32700, -32600  # JSON-RPC 2.0's codes
MAX_ECHOED_ID = 256


def malformed_reply(line: bytes, reason: str | None = None) -> dict[str, Any]:
    """The JSON-RPC error answering a line that is not a message: a parse error when it is not JSON, an invalid
    request otherwise (with the request's id when it has a usable one, else null, as JSON-RPC says). `reason`: why
    the MCP parser refused JSON that Python's accepted (a lone surrogate escape), said instead of the generic advice."""
    try:
        value = json.loads(line)
    except ValueError as exc:  # UnicodeDecodeError too
        return {"jsonrpc": "2.0", "id": None, "error": {
            "code": PARSE_ERROR, "message": f"Parse error: the line is not JSON ({str(exc)[:120]}). Send one JSON-RPC "
                                           "2.0 message per line."}}
    raw_id = value.get("id") if isinstance(value, dict) else None
    usable = (isinstance(raw_id, str) and len(raw_id) <= MAX_ECHOED_ID) or (
        isinstance(raw_id, int) and not isinstance(raw_id, bool) and -(2**63) <= raw_id < 2**63)
    request_id = raw_id if usable else None  # never echo a huge id back
    if reason is not None:
        message = (f"Invalid request: the line is JSON this server cannot read ({reason[:160]}). Strings must be valid "
                   "Unicode: no lone surrogate escapes such as \\udcff.")
    else:
        message = ("Invalid request: not a JSON-RPC 2.0 message (it needs \"jsonrpc\": \"2.0\" and a \"method\" with "
                   "an \"id\" for a request, or a \"result\"/\"error\" for a response).")
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": INVALID_REQUEST, "message": message}}


def invalid_id_reply() -> dict[str, Any]:
    """The answer to a request whose id is of a type MCP does not allow: it would otherwise pass for a notification
    (which gets no answer) and its caller would wait forever."""
    return {"jsonrpc": "2.0", "id": None, "error": {
        "code": INVALID_REQUEST, "message": "Invalid request: \"id\" must be a string or an integer (MCP allows no "
                                            "null, fraction, boolean, list or object id). A notification has no "
                                            "\"id\" member at all."}}


def _carries_id(line: bytes) -> bool:
    """Whether a line the MCP parser read as a notification has an "id" member all the same."""
    try:
        value = json.loads(line)
    except ValueError:
        return False
    return isinstance(value, dict) and "id" in value


def _json_problem(exc: Exception) -> str | None:
    """pydantic's reason when it refused the line as JSON (its parser is stricter than Python's), else None."""
    if isinstance(exc, pydantic.ValidationError):
        errors = exc.errors(include_url=False)
        if errors and errors[0]["type"] == "json_invalid":
            return str(errors[0]["msg"])
    return None


Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


@asynccontextmanager
async def socket_streams(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> AsyncIterator[Streams]:
    incoming_send, incoming_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing_send, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_lines() -> None:
        async with incoming_send:
            while True:
                try:
                    line = await reader.readline()
                except (ConnectionError, asyncio.LimitOverrunError, ValueError) as exc:
                    log.warning("connection read failed: %s", exc)
                    return
                if not line:
                    return
                if not line.strip():
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except Exception as exc:
                    reply = malformed_reply(line, _json_problem(exc))
                else:
                    if not isinstance(message, types.JSONRPCNotification) or not _carries_id(line):
                        await incoming_send.send(SessionMessage(message))
                        continue
                    reply = invalid_id_reply()
                log.info("malformed message (%d bytes): %s", len(line), reply["error"]["message"])
                try:
                    writer.write(json.dumps(reply).encode() + b"\n")  # one whole line: never interleaved
                    await writer.drain()
                except ConnectionError:
                    return

    async def write_lines() -> None:
        async with outgoing_receive:
            async for session_message in outgoing_receive:
                data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    writer.write(data.encode() + b"\n")
                    await writer.drain()
                except ConnectionError:
                    return

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_lines)
        tg.start_soon(write_lines)
        try:
            yield incoming_receive, outgoing_send
        finally:
            tg.cancel_scope.cancel()
