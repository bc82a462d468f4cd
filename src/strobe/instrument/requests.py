"""Typed host -> agent requests: the shapes of agent/src/common/requests.ts's interfaces, for the builders here and in
handle.ProcessHandle (tests/instrument/test_protocol_contract.py holds both to the agent's interfaces). The agent's
answers and PROTOCOL_VERSION are in protocol.py."""

from __future__ import annotations

from typing import Literal, NamedTuple, NotRequired, TypedDict, cast


class ExitAck(TypedDict):
    type: Literal["exit_ack"]


class CrashAck(TypedDict):
    type: Literal["crash_ack"]


class FlushRequest(TypedDict):
    type: Literal["flush"]
    requestId: int


class HookTarget(TypedDict):
    id: int
    address: str  # hex
    size: int  # the function's bytes, 0 when unknown (then never the fast path: it patches 16 bytes and more)


class SamplingConfig(TypedDict):
    hotCallsPerSecond: int
    sampleEvery: int


class HooksRequest(TypedDict):
    type: Literal["hooks"]
    requestId: int
    action: Literal["add", "remove"]
    functions: list[HookTarget]
    sampling: SamplingConfig
    fastPath: bool  # native functions through Strobe's own trampolines where they may be (agent: fastpath.ts)


class HookOptions(NamedTuple):
    """How the agent hooks functions (the session's settings): sampling of hot functions, and the fast path."""

    hot_calls_per_second: int
    sample_every: int
    fast_path: bool = True


class Deref(TypedDict):
    offset: int
    label: str


class ReadRecipe(TypedDict):
    """Start at `address`, read a pointer at each deref's offset, add `offset`, copy `size` bytes; `strings`:
    offsets of char* in the copied bytes to read as C strings."""

    label: str
    address: str
    derefs: list[Deref]
    offset: int
    size: int
    strings: list[int]


class PollSpec(TypedDict):
    pollId: int
    intervalMs: int
    durationMs: int


class ReadMemoryRequest(TypedDict):
    type: Literal["read_memory"]
    requestId: int
    recipes: list[ReadRecipe]
    poll: NotRequired[PollSpec]


class NativeWatchSpec(TypedDict):
    slot: int
    address: str
    size: int
    funcs: list[int] | None  # None: every traced function


class JsWatchSpec(TypedDict):
    id: int
    label: str
    recipe: NotRequired[ReadRecipe]
    expr: NotRequired[str]
    funcs: list[int] | None


class WatchesRequest(TypedDict):
    type: Literal["watches"]
    requestId: int
    version: int
    native: list[NativeWatchSpec]
    js: list[JsWatchSpec]


class FollowNode(TypedDict):
    """daemon/follow.py's Node.wire: bytes, C strings, pointers, counted data (q), kind (t), cap, element."""

    n: int
    s: NotRequired[list[int]]
    p: NotRequired[list[tuple[int, int]]]
    q: NotRequired[list[tuple[int, int, int, int]]]
    t: NotRequired[int]
    m: NotRequired[int]
    e: NotRequired[int]


class FollowFunction(TypedDict):
    id: int
    version: int
    nodes: list[FollowNode]
    slots: list[tuple[str, int, int]]
    words: NotRequired[list[tuple[str, list[int], int]]]  # values held in registers, copied as a node's bytes
    capture: NotRequired[int]  # records.WATCH_CAPTURE_* bits its signature needs (float, stack, rdx/xmm returns)


class FollowRequest(TypedDict):
    type: Literal["follow"]
    requestId: int
    funcs: list[FollowFunction]


class WriteTarget(TypedDict):
    recipe: ReadRecipe
    data: str  # hex


class WriteMemoryRequest(TypedDict):
    type: Literal["write_memory"]
    requestId: int
    targets: list[WriteTarget]


class ConditionArg(TypedDict):
    name: str
    reg: str
    size: int
    signed: bool


ReadKind = Literal["int", "uint", "float", "bool", "pointer", "cstring"]


class ValueRead(TypedDict):
    """A program value a condition or message reads at each hit (daemon/break_values.py)."""

    reg: NotRequired[str]  # start at this register's value (rsp: the stack pointer at the site; xmm0-5: a float) ...
    address: NotRequired[str]  # ... or at this address (hex)
    add: int  # added to the register's value
    derefs: list[int]  # each: add the offset, read a pointer there, go on from it
    offset: int  # added last
    size: int
    kind: ReadKind
    load: bool  # read `size` bytes at the address found; false: the register's value is the value
    constant: NotRequired[int]  # a value the compiler folded: this, read nowhere


class BreakpointSpec(TypedDict):
    id: str
    kind: Literal["entry", "line"]
    address: str  # hex
    condition: NotRequired[str]
    args: list[ConditionArg]
    values: list[ValueRead]  # what $v(i) in the condition and the message reads
    hitCount: NotRequired[int]
    allThreads: NotRequired[bool]  # a stop also stops the program's other threads (the daemon does it)
    log: NotRequired[str]


class BreakpointsRequest(TypedDict):
    type: Literal["breakpoints"]
    requestId: int
    add: list[BreakpointSpec]
    remove: list[str]


StepKind = Literal["over", "into", "out"]


class StepPlan(TypedDict):
    """Where a step may end (agent/src/native/stepping.ts): runtime addresses as hex, from the line tables."""

    kind: StepKind
    stops: list[str]  # the first instruction of every other line of the paused function
    returnTo: NotRequired[str]  # the paused frame's return address, as the stack holds it ...
    unwoundReturn: NotRequired[str]  # ... and as the unwinder gave it (for when the stack holds Frida's trampoline's)
    fromEntry: bool  # paused at a function's first instruction
    entry: NotRequired[str]  # the paused function's start ...
    entryCode: NotRequired[str]  # ... and its first bytes as built (hex), for where a hook's jump covers them
    callRanges: list[tuple[str, str]]  # step into: the current line's code, whose calls are looked at
    intoRanges: list[tuple[str, str]]  # step into: the code with line information


class ResumeRequest(TypedDict):
    """Posted with the type `resume:<tid>`: the thread paused there goes on, or takes a step (`plan`)."""

    type: Literal["resume"]
    action: Literal["continue", "step"]
    plan: NotRequired[StepPlan]


EXIT_ACK: ExitAck = {"type": "exit_ack"}
CRASH_ACK: CrashAck = {"type": "crash_ack"}


def hooks_request(
    request_id: int, action: Literal["add", "remove"], functions: list[tuple[int, int, int]], options: HookOptions,
) -> HooksRequest:
    """`functions`: (function id, runtime address, size in bytes or 0)."""
    return {
        "type": "hooks",
        "requestId": request_id,
        "action": action,
        "functions": [{"id": fid, "address": hex(address), "size": size} for fid, address, size in functions],
        "sampling": {"hotCallsPerSecond": options.hot_calls_per_second, "sampleEvery": options.sample_every},
        "fastPath": options.fast_path,
    }


def read_memory_request(
    request_id: int, recipes: list[dict[str, object]], poll: tuple[int, int, int] | None = None
) -> ReadMemoryRequest:
    """`recipes` in the agent's ReadRecipe shape; `poll`: (poll id, interval ms, duration ms)."""
    message: ReadMemoryRequest = {
        "type": "read_memory", "requestId": request_id, "recipes": cast(list[ReadRecipe], recipes)
    }
    if poll is not None:
        message["poll"] = {"pollId": poll[0], "intervalMs": poll[1], "durationMs": poll[2]}
    return message


class PySetupRequest(TypedDict):
    type: Literal["py_setup"]
    requestId: int
    bootstrap: str


class PyCommandRequest(TypedDict):
    type: Literal["py_command"]
    command: str


class LifelineRequest(TypedDict):
    """Tie the process's life to the daemon's: `fd` is the read end of the pipe the daemon (`pid`) holds."""

    type: Literal["lifeline"]
    requestId: int
    pid: int
    fd: int


class StdinRequest(TypedDict):
    """Make the read end `fd` of a pipe the daemon (`pid`) holds the program's standard input, before it runs."""

    type: Literal["stdin"]
    requestId: int
    pid: int
    fd: int


class CaptureOutputRequest(TypedDict):
    """Capture what the process writes to fds 1 and 2 from now on (a process Strobe attached to)."""

    type: Literal["capture_output"]
    requestId: int


class ReleaseRequest(TypedDict):
    """Untie it before a deliberate detach: the process keeps running after the daemon lets go of it."""

    type: Literal["release"]
    requestId: int
