"""Typed agent -> host messages (pydantic models the host parses them with) and PROTOCOL_VERSION; the tags and
shapes mirror agent/src/common/protocol.ts. The host -> agent requests are in requests.py."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

PROTOCOL_VERSION = 8


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
    watchVersion: int  # of the watches its records were made under (WatchesRequest.version; 0: none)
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


class Siginfo(BaseModel):
    """The kernel's siginfo of a crash's signal: si_signo, si_code (> 0 a fault the kernel raised, <= 0 a signal
    sent), and the sender's pid and uid for SI_USER, SI_QUEUE and SI_TKILL."""

    signo: int
    code: int
    pid: int | None = None
    uid: int | None = None


class CrashReport(BaseModel):
    """A fatal signal (agent/src/common/crash.ts); the binary payload is the stack dumped at `stackBase`. The crashing
    thread waits for CRASH_ACK before the signal goes on to the target's handler or its default action. `siginfo`
    says what caused the signal ("unknown": the agent could not read or verify it; absent: the report says nothing
    of its cause); `memory` comes only with a fault the kernel raised."""

    type: Literal["crash"]
    tid: int
    kind: str
    signal: str
    address: str
    memory: CrashMemory | None = None
    siginfo: Siginfo | Literal["unknown"] | None = None
    registers: dict[str, str]
    frames: list[CrashFrame]
    stackBase: str
    stackSize: int
    sec: int
    nsec: int


class PySetupDone(BaseModel):
    """The agent's answer to py_setup: the Python tracer is waiting for Py_RunMain, installed, or cannot be."""

    type: Literal["py_setup_done"]
    requestId: int
    state: Literal["waiting", "installed", "unsupported"]
    error: str | None = None


class PyState(BaseModel):
    """The Python tracer's state when it changes after py_setup (installed at Py_RunMain, or failed)."""

    type: Literal["py_state"]
    state: Literal["waiting", "installed", "unsupported"]
    error: str | None = None


class PyBatch(BaseModel):
    """A batch of the Python tracer: UTF-8 JSON in the message's data (src/strobe/instrument/pytracer/)."""

    type: Literal["py_batch"]


class LifelineState(BaseModel):
    """The agent's answer to lifeline and release: what the kernel kills when the daemon ends, however it ends (this
    process, its whole process group, or nothing: released, or not tied, and `error` says why)."""

    type: Literal["lifeline_state"]
    requestId: int
    scope: Literal["process", "group", "none"]
    error: str | None = None


class StdinState(BaseModel):
    """The agent's answer to stdin: the daemon's pipe is the program's descriptor 0, or `error` says why not."""

    type: Literal["stdin_state"]
    requestId: int
    error: str | None = None


class OutputCapture(BaseModel):
    """The agent's answer to capture_output: the libc functions hooked to see fds 1 and 2 (none: `error` says why)."""

    type: Literal["output_capture"]
    requestId: int
    hooked: list[str]
    error: str | None = None


class OutputChunk(BaseModel):
    """Bytes a process Strobe attached to wrote to `fd` (1 or 2); the bytes are the message's data."""

    type: Literal["output"]
    fd: int


class PauseReport(BaseModel):
    """A thread stopped at a breakpoint (agent/src/native/breakpoints.ts), waiting for `resume:<tid>`; the binary
    payload is its stack dumped at `stackBase`, as for a crash."""

    type: Literal["paused"]
    breakpointId: str
    tid: int
    hit: int
    registers: dict[str, str]
    frames: list[CrashFrame]
    stackBase: str
    stackSize: int
    conditionError: str | None = None
    entry: bool  # at a function's first instruction: its frame is not set up yet
    step: Literal["over", "into", "out"] | None = None  # the end of a step (a StepKind) (breakpointId is then "")
    stepError: str | None = None  # the step could not be taken: the thread is still where it was
    skipped: list[str] = []  # line starts the step could not stop at (inside a hook's relocated code)
    allThreads: bool = False  # the breakpoint stops every thread (or a step from such a stop ended)
    others: list[int] | None = None  # then: the program's other threads (Frida's own left out), to stop
    sec: int
    nsec: int


class WriteResult(BaseModel):
    label: str
    address: str | None = None
    previous: str | None = None  # hex
    current: str | None = None  # hex
    error: str | None = None


class MemoryWritten(BaseModel):
    """debug_write's answer (agent/src/common/memory.ts): per target, its bytes before and after, or why not."""

    type: Literal["memory_written"]
    requestId: int
    results: list[WriteResult]


class LogpointHit(BaseModel):
    id: str
    tid: int
    threadName: str | None = None
    text: str
    sec: int
    nsec: int


class LogpointBatch(BaseModel):
    """Lines of logpoints (agent/src/native/breakpoints.ts), sent in batches; `dropped`: lines it could not queue."""

    type: Literal["logpoints"]
    hits: list[LogpointHit]
    dropped: int


class BreakpointFailure(BaseModel):
    id: str
    error: str


class BreakpointsUpdated(BaseModel):
    type: Literal["breakpoints_updated"]
    requestId: int
    failed: list[BreakpointFailure]


AnyAgentMessage = (
    AgentLoaded | ProcessExit | AgentLog | HooksUpdated | TraceBatch | SamplingStateChange | Flushed
    | ReadResponse | VariableSnapshot | PollComplete | WatchesUpdated | FollowUpdated | CrashReport
    | PySetupDone | PyState | PyBatch | LifelineState | PauseReport | BreakpointsUpdated | LogpointBatch
    | MemoryWritten | StdinState | OutputCapture | OutputChunk
)
AgentMessage = Annotated[AnyAgentMessage, Field(discriminator="type")]
agent_message_adapter: TypeAdapter[AnyAgentMessage] = TypeAdapter(AgentMessage)
