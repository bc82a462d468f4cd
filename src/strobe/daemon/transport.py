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
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 64 * 1024 * 1024


PARSE_ERROR, INVALID_REQUEST = -32700, -32600  # JSON-RPC 2.0's codes
MAX_ECHOED_ID = 256


def malformed_reply(line: bytes) -> dict[str, Any]:
    """The JSON-RPC error answering a line that is not a message: a parse error when it is not JSON, an invalid
    request otherwise (with the request's id when it has a usable one, else null, as JSON-RPC says)."""
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
    return {"jsonrpc": "2.0", "id": request_id, "error": {
        "code": INVALID_REQUEST, "message": "Invalid request: not a JSON-RPC 2.0 message (it needs \"jsonrpc\": "
                                            "\"2.0\" and a \"method\" with an \"id\" for a request, or a "
                                            "\"result\"/\"error\" for a response)."}}


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
                except Exception:
                    reply = malformed_reply(line)
                    log.info("malformed message (%d bytes): %s", len(line), reply["error"]["message"])
                    try:
                        writer.write(json.dumps(reply).encode() + b"\n")  # one whole line: never interleaved
                        await writer.drain()
                    except ConnectionError:
                        return
                    continue
                await incoming_send.send(SessionMessage(message))

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
