"""Typed agent <-> host messages; the tags and shapes mirror agent/src/protocol.ts."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, TypeAdapter

PROTOCOL_VERSION = 2


class ModuleInfo(BaseModel):
    name: str
    path: str
    base: str
    size: int


class AgentLoaded(BaseModel):
    type: Literal["agent_loaded"]
    protocolVersion: int
    pid: int
    recordSize: int
    modules: list[ModuleInfo]


class ProcessExit(BaseModel):
    type: Literal["process_exit"]
    code: int


class AgentLog(BaseModel):
    type: Literal["log"]
    level: Literal["info", "warning", "error"]
    message: str


class HookFailure(BaseModel):
    id: int
    error: str


class HooksUpdated(BaseModel):
    type: Literal["hooks_updated"]
    requestId: int
    activeCount: int
    failed: list[HookFailure]


class TraceBatch(BaseModel):
    type: Literal["trace_batch"]
    count: int
    firstSeq: int
    dropped: int
    sampledOut: int
    threads: list[tuple[int, str]]


class SamplingStateChange(BaseModel):
    type: Literal["sampling_state_change"]
    funcId: int
    enabled: bool
    sampleRate: float
    sampledOut: int


class Flushed(BaseModel):
    type: Literal["flushed"]
    requestId: int


AnyAgentMessage = AgentLoaded | ProcessExit | AgentLog | HooksUpdated | TraceBatch | SamplingStateChange | Flushed
AgentMessage = Annotated[AnyAgentMessage, Field(discriminator="type")]
agent_message_adapter: TypeAdapter[AnyAgentMessage] = TypeAdapter(AgentMessage)

EXIT_ACK = {"type": "exit_ack"}


def hooks_request(
    request_id: int, action: Literal["add", "remove"], functions: list[tuple[int, int]],
    hot_calls_per_second: int, sample_every: int,
) -> dict[str, object]:
    """`functions`: (function id, runtime address)."""
    return {
        "type": "hooks",
        "requestId": request_id,
        "action": action,
        "functions": [{"id": fid, "address": hex(address)} for fid, address in functions],
        "sampling": {"hotCallsPerSecond": hot_calls_per_second, "sampleEvery": sample_every},
    }
