"""Typed agent <-> host messages; the tags and shapes mirror agent/src/common/protocol.ts."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

PROTOCOL_VERSION = 5


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
    watchValues: list[tuple[int, dict[str, dict[str, Any]]]] | None = None  # (sequence number, {watch id: value})
    # (sequence number, follow plan version, {argument index or "r": followed value}); see daemon/follow.py
    followValues: list[tuple[int, int, dict[str, Any]]] | None = None


class SamplingStateChange(BaseModel):
    type: Literal["sampling_state_change"]
    funcId: int
    enabled: bool
    sampleRate: float
    sampledOut: int


class Flushed(BaseModel):
    type: Literal["flushed"]
    requestId: int


class WatchError(BaseModel):
    id: int
    error: str


class WatchesUpdated(BaseModel):
    type: Literal["watches_updated"]
    requestId: int
    activeCount: int
    errors: list[WatchError]


class FollowUpdated(BaseModel):
    type: Literal["follow_updated"]
    requestId: int


class ReadResult(BaseModel):
    """One target of a memory read; its bytes are at [dataOffset, dataOffset + size) of the binary payload."""

    label: str
    address: str | None = None
    dataOffset: int | None = None
    size: int | None = None
    strings: dict[str, str | None] | None = None
    error: str | None = None


class ReadResponse(BaseModel):
    type: Literal["read_response"]
    requestId: int
    results: list[ReadResult]


class VariableSnapshot(BaseModel):
    type: Literal["variable_snapshot"]
    pollId: int
    sec: int
    nsec: int
    results: list[ReadResult]


class PollComplete(BaseModel):
    type: Literal["poll_complete"]
    pollId: int
    sampleCount: int


class CrashFrame(BaseModel):
    address: str
    module: str
    base: str
    returnAddress: bool
    scanned: bool = False  # found by scanning the stack for return addresses, not by unwinding


class CrashMemory(BaseModel):
    operation: str
    address: str


class CrashReport(BaseModel):
    """A fatal signal (agent/src/common/crash.ts); the binary payload is the stack dumped at `stackBase`. The crashing
    thread waits for CRASH_ACK before the signal goes on to the target's handler or its default action."""

    type: Literal["crash"]
    tid: int
    kind: str
    signal: str
    address: str
    memory: CrashMemory | None = None
    registers: dict[str, str]
    frames: list[CrashFrame]
    stackBase: str
    stackSize: int
    sec: int
    nsec: int


AnyAgentMessage = (
    AgentLoaded | ProcessExit | AgentLog | HooksUpdated | TraceBatch | SamplingStateChange | Flushed
    | ReadResponse | VariableSnapshot | PollComplete | WatchesUpdated | FollowUpdated | CrashReport
)
AgentMessage = Annotated[AnyAgentMessage, Field(discriminator="type")]
agent_message_adapter: TypeAdapter[AnyAgentMessage] = TypeAdapter(AgentMessage)

EXIT_ACK = {"type": "exit_ack"}
CRASH_ACK = {"type": "crash_ack"}


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


def read_memory_request(
    request_id: int, recipes: list[dict[str, object]], poll: tuple[int, int, int] | None = None
) -> dict[str, object]:
    """`recipes` in the agent's ReadRecipe shape; `poll`: (poll id, interval ms, duration ms)."""
    message: dict[str, object] = {"type": "read_memory", "requestId": request_id, "recipes": recipes}
    if poll is not None:
        message["poll"] = {"pollId": poll[0], "intervalMs": poll[1], "durationMs": poll[2]}
    return message
