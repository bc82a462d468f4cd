"""MCP over one unix-socket connection: newline-delimited JSON-RPC, the same framing as stdio."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 64 * 1024 * 1024


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
                    await incoming_send.send(exc)
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
