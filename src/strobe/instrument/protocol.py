"""Typed agent -> host messages; the tags and shapes mirror agent/src/protocol.ts."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, TypeAdapter

PROTOCOL_VERSION = 1


class AgentLoaded(BaseModel):
    type: Literal["agent_loaded"]
    protocolVersion: int
    pid: int


class ProcessExit(BaseModel):
    type: Literal["process_exit"]
    code: int


class AgentLog(BaseModel):
    type: Literal["log"]
    level: Literal["info", "warning", "error"]
    message: str


AgentMessage = Annotated[AgentLoaded | ProcessExit | AgentLog, Field(discriminator="type")]
agent_message_adapter: TypeAdapter[AgentLoaded | ProcessExit | AgentLog] = TypeAdapter(AgentMessage)

EXIT_ACK = {"type": "exit_ack"}
