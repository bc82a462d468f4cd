"""Tool inputs as pydantic models: the JSON schemas clients see and the validation limits, in one place.

Models are strict (no "50" for 50) and forbid unknown keys, so a typo'd parameter is an error the
agent can fix rather than a silently ignored filter.
"""

from __future__ import annotations

import json
import os
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from strobe.store.query import parse_time

EVENT_TYPES = ("function_enter", "function_exit", "stdout", "stderr", "crash", "variable_snapshot", "pause",
               "logpoint")
MAX_QUERY_LIMIT = 500
MAX_STRING = 4096  # every string parameter unless said otherwise: a path (PATH_MAX), a name, a pattern
MAX_ARGUMENT = 131_072  # a command-line argument or environment value (Linux's MAX_ARG_STRLEN)
MAX_ID = 256  # a session or test-run id
MAX_STDIN_TEXT = 1_048_576  # characters of text for a program's stdin (debug_launch stdin, debug_input text)
MAX_INT64 = 2**63 - 1  # what SQLite stores: larger integers would fail deep inside instead of here


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain a NUL character (\\u0000): the operating system cannot pass one on")
    return value


def _env_name(value: str) -> str:
    if not value or "=" in value or "\x00" in value:
        raise ValueError("an environment variable's name must be non-empty, without '=' or a NUL character")
    return value


# Strings handed to the operating system (paths, argv, the environment): a NUL cannot be passed on, nor a name with '='.
OsString = Annotated[str, AfterValidator(_no_nul)]
Argument = Annotated[str, Field(max_length=MAX_ARGUMENT), AfterValidator(_no_nul)]
Environment = dict[Annotated[str, AfterValidator(_env_name)], Argument]


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, str_max_length=MAX_STRING)


def check_time(value: int | str | None) -> int | str | None:
    """A timeFrom/timeTo: nanoseconds in 64 bits, or a form parse_time reads ("2s", "-5s")."""
    if isinstance(value, int) and not -MAX_INT64 - 1 <= value <= MAX_INT64:
        raise ValueError("a time in nanoseconds is at most 64 bits")
    if value is not None:
        parse_time(value)
    return value


def _absolute_root(value: str | None) -> str | None:
    if value is not None and not os.path.isabs(value):
        raise ValueError(f"projectRoot must be an absolute path (got {value[:200]!r}): pass the project's full path")
    return value


class LaunchRequest(StrictModel):
    command: OsString | None = Field(
        default=None, min_length=1,
        description="Path to the executable (absolute, or relative to cwd/projectRoot). Give either command or pid.")
    pid: int | None = Field(
        default=None, ge=1, le=2**31 - 1,
        description="Attach to this already running process instead of starting one (give either command or pid): "
                    "its output is captured from the attach on; debug_stop detaches and leaves it running.")
    args: list[Argument] = Field(default_factory=list, max_length=4096, description="Command-line arguments.")
    cwd: OsString | None = Field(default=None, description="Working directory; default: the executable's directory.")
    projectRoot: OsString = Field(min_length=1,
                                  description="Absolute path of the project (user-code detection, settings).")
    env: Environment = Field(default_factory=dict, max_length=4096,
                             description="Extra environment variables for the process.")
    symbolsPath: OsString | None = Field(
        default=None, min_length=1,
        description="Only for a stripped binary whose debug info is in a separate file: the absolute path of that "
                    "debug file (made by `objcopy --only-keep-debug`), or of a directory holding it (as "
                    ".build-id/xx/yyyy.debug or under the name its .gnu_debuglink gives). Not needed when the binary "
                    "has its own debug info, or its debug file is next to it, in its .debug/ directory or installed "
                    "under /usr/lib/debug (a -dbgsym package). Example: \"/home/me/app/build/server.debug\".")
    stdin: str | None = Field(
        default=None, max_length=MAX_STDIN_TEXT,
        description="Text fed to the program's standard input as it starts (UTF-8, up to 1 MiB; end each line with "
                    "\\n). Its stdin is then closed, so a program reading to end-of-file finishes, unless "
                    "keepStdinOpen is true. Without stdin, stdinFile and keepStdinOpen the program's stdin is a pipe "
                    "nobody writes to and never closed: a read from it waits. Example: \"3\\n4\\n\".")
    stdinFile: OsString | None = Field(
        default=None, min_length=1,
        description="Absolute path of a regular file (up to 16 MiB) whose bytes are fed to the program's standard "
                    "input, as `program < file` would; closed after it like stdin. Give stdin or stdinFile, not both.")
    keepStdinOpen: bool = Field(
        default=False,
        description="Leave the program's standard input open after stdin/stdinFile (or with neither: open and "
                    "empty), to send more with debug_input and close it there.")

    _root = field_validator("projectRoot")(_absolute_root)

    @model_validator(mode="after")
    def _one_stdin(self) -> LaunchRequest:
        if self.stdin is not None and self.stdinFile is not None:
            raise ValueError("give stdin (text) or stdinFile (a path), not both: the program has one standard input")
        return self

    @model_validator(mode="after")
    def _command_or_pid(self) -> LaunchRequest:
        if self.command is not None and self.pid is not None:
            raise ValueError("give exactly one of command (start a program) or pid (attach to a running process), "
                             "not both")
        if self.command is None and self.pid is None:
            raise ValueError("command is missing: give exactly one of command (start a program) or pid (attach to a "
                             "running process)")
        if self.pid is not None:
            given = [name for name in ("args", "cwd", "env", "stdin", "stdinFile", "keepStdinOpen")
                     if name in self.model_fields_set]
            if given:
                raise ValueError(f"{', '.join(given)} only apply when starting a program (command): an attached "
                                 "process keeps its own")
        return self


class FunctionMatch(StrictModel):
    equals: str | None = None
    contains: str | None = None
    matches: str | None = Field(default=None, description="Regular expression, searched anywhere in the name.")

    @field_validator("matches")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from exc
        return value


class SourceFileMatch(StrictModel):
    equals: str | None = None
    contains: str | None = None


class ReturnValueMatch(StrictModel):
    equals: Any = Field(default=None, description="Match return values equal to this JSON value.")
    isNull: bool | None = Field(default=None, description="true: only null returns; false: only non-null.")

    @field_validator("equals")
    @classmethod
    def _bounded(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and not -MAX_INT64 - 1 <= value <= MAX_INT64:
            raise ValueError("an integer return value is at most 64 bits")
        if len(json.dumps(value)) > MAX_STRING:
            raise ValueError(f"a return value to match is at most {MAX_STRING} characters of JSON")
        return value


class ThreadNameMatch(StrictModel):
    contains: str


class QueryRequest(StrictModel):
    sessionId: str = Field(min_length=1, max_length=MAX_ID)
    eventType: Literal[
        "function_enter", "function_exit", "stdout", "stderr", "crash", "variable_snapshot", "pause", "logpoint"
    ] | None = None
    function: FunctionMatch | None = None
    sourceFile: SourceFileMatch | None = None
    returnValue: ReturnValueMatch | None = None
    threadName: ThreadNameMatch | None = None
    timeFrom: int | str | None = Field(
        default=None, description='Nanoseconds since session start, "2s" since start, or "-5s" before the latest event.'
    )
    timeTo: int | str | None = Field(default=None, description="Same forms as timeFrom.")
    minDurationNs: int | None = Field(default=None, ge=0, le=MAX_INT64)
    pid: int | None = Field(default=None, ge=1, le=2**31 - 1)
    limit: int = Field(default=50, ge=1, le=MAX_QUERY_LIMIT, description="Events per page, 1-500 (default 50).")
    offset: int = Field(default=0, ge=0, le=MAX_INT64)
    verbose: bool = False

    _time = field_validator("timeFrom", "timeTo")(check_time)

    @model_validator(mode="after")
    def _non_empty_matchers(self) -> QueryRequest:
        # An empty (or all-null) matcher would silently filter nothing: say so instead.
        if self.function is not None and all(v is None for v in self.function.model_dump().values()):
            raise ValueError("function needs one of equals, contains, matches (not null)")
        if self.sourceFile is not None and all(v is None for v in self.sourceFile.model_dump().values()):
            raise ValueError("sourceFile needs equals or contains (not null)")
        if self.returnValue is not None and "equals" not in self.returnValue.model_fields_set \
                and self.returnValue.isNull is None:
            raise ValueError("returnValue needs equals or isNull (equals: null matches null returns)")
        return self


RAW_TYPES = ("i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f32", "f64", "pointer")
RawType = Literal["i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f32", "f64", "pointer"]
ReadType = Literal["i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f32", "f64", "pointer", "bytes"]
MAX_EXPRESSION = 256
MAX_WATCHES = 32
_HEX_ADDRESS = re.compile(r"0[xX][0-9a-fA-F]{1,16}")


def _check_address(value: str | None) -> str | None:
    if value is not None and not _HEX_ADDRESS.fullmatch(value):
        raise ValueError("address must be a hex string such as '0x7ffd5e3c10a0'")
    return value


class WatchTarget(StrictModel):
    variable: str | None = Field(
        default=None, min_length=1, max_length=MAX_EXPRESSION,
        description="Global/static variable or pointer chain: 'gTempo', 'gClock->counter', 'ns::cfg.limits.max'.",
    )
    address: str | None = Field(default=None, description="Hex address of raw memory, e.g. '0x55d0c0ffe010'.")
    type: RawType | None = Field(default=None, description="Type of the raw address: i8..u64, f32, f64, pointer.")
    label: str | None = Field(default=None, min_length=1, max_length=64, description="Name shown in watchValues.")
    expr: str | None = Field(
        default=None, min_length=1, max_length=MAX_EXPRESSION,
        description="JavaScript evaluated in the agent at each event, e.g. \"ptr('0x5678').readU32()\".",
    )
    on: list[str] | None = Field(
        default=None, min_length=1, max_length=16,
        description="Only read during these functions (patterns, '*' and '**' allowed); default: every traced call.",
    )

    _address = field_validator("address")(_check_address)

    @model_validator(mode="after")
    def _one_source(self) -> WatchTarget:
        given = [name for name in ("variable", "address", "expr") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError("a watch needs exactly one of variable, address or expr")
        if self.address is not None and self.type is None:
            raise ValueError("a watch on a raw address needs its type (i8..u64, f32, f64, pointer)")
        if self.type is not None and self.address is None:
            raise ValueError("type is only for raw addresses; a variable's type comes from the debug info")
        return self


class WatchChanges(StrictModel):
    add: list[WatchTarget] = Field(default_factory=list, max_length=MAX_WATCHES)
    remove: list[str] = Field(default_factory=list, max_length=MAX_WATCHES, description="Labels of watches to remove.")


class TraceRequest(StrictModel):
    sessionId: str | None = Field(
        default=None, min_length=1, max_length=MAX_ID,
        description="A running session; omit to stage patterns for the next launch.",
    )
    add: list[str] = Field(default_factory=list, max_length=100, description="Patterns to start tracing.")
    remove: list[str] = Field(default_factory=list, max_length=100, description="Active patterns to stop tracing.")
    projectRoot: OsString | None = Field(
        default=None, description="Project root for settings and @usercode in pending mode."
    )
    serializationDepth: int | None = Field(
        default=None, ge=1, le=10,
        description="Struct levels shown when pointer arguments and return values are followed at call time "
        "(1-10, default 3: head, head->next, head->next->next), and in watch values. Applies to calls from now on "
        "(watch values: to watches added from now on).",
    )
    watches: WatchChanges | None = Field(
        default=None, description="Variables to read at each traced call (max 32 per session)."
    )

    _root = field_validator("projectRoot")(_absolute_root)


class StopRequest(StrictModel):
    sessionId: str = Field(min_length=1, max_length=MAX_ID)
    retain: bool = Field(default=False, description="Keep the session's events for later queries.")
    kill: bool = Field(default=False, description="Only for a session attached to a running process (debug_launch "
                                                  "{pid}): kill it instead of detaching and leaving it running.")


class ListSessionsRequest(StrictModel):
    pass


class DeleteSessionRequest(StrictModel):
    sessionId: str = Field(min_length=1, max_length=MAX_ID)


MAX_FRAME = 63  # a backtrace has at most 64 frames (agent/src/common/crash.ts)
_THREAD_ID = ("With `variable`: the paused thread whose frame holds it (needed only when several threads are "
              "paused; debug_list_sessions lists them).")
_FRAME = ("With `variable`: which frame of the paused thread it is a parameter or local of: 0 the innermost, 1 its "
          "caller... (the pause event's backtrace order). Omitted with threadId: 0.")


def _check_frame_selection(variable: str | None, thread: int | None, frame: int | None) -> None:
    if variable is None and (thread is not None or frame is not None):
        raise ValueError("threadId and frame name a paused thread's frame to find `variable` in: give a variable")


class ReadTarget(StrictModel):
    variable: str | None = Field(
        default=None, min_length=1, max_length=MAX_EXPRESSION,
        description=("Global/static variable or chain: 'gTempo', 'gClock->counter', 'cfg.limits[2]'; while a thread "
                     "is paused, also a parameter or local of its frames ('qty', 'cart->total'; see frame)."),
    )
    threadId: int | None = Field(default=None, ge=1, le=MAX_INT64, description=_THREAD_ID)
    frame: int | None = Field(default=None, ge=0, le=MAX_FRAME, description=_FRAME)
    address: str | None = Field(default=None, description="Hex address for a raw read, e.g. '0x7ffd5e3c10a0'.")
    size: int | None = Field(default=None, ge=1, le=65536, description="Bytes to read at address (1-65536).")
    type: ReadType | None = Field(
        default=None,
        description="How to show a raw read: i8..u64, f32, f64, pointer, or bytes (written to a file).",
    )

    _address = field_validator("address")(_check_address)

    @model_validator(mode="after")
    def _one_source(self) -> ReadTarget:
        if (self.variable is None) == (self.address is None):
            raise ValueError("a target needs exactly one of variable or address (with size and type)")
        if self.variable is not None and (self.size is not None or self.type is not None):
            raise ValueError("size and type are only for raw addresses; a variable's come from the debug info")
        if self.address is not None and (self.size is None or self.type is None):
            raise ValueError("a raw address needs size and type, e.g. {address: '0x…', size: 4, type: 'u32'}")
        _check_frame_selection(self.variable, self.threadId, self.frame)
        return self


class PollRequest(StrictModel):
    intervalMs: int = Field(ge=50, le=5000, description="Milliseconds between samples (50-5000).")
    durationMs: int = Field(ge=100, le=30000, description="How long to sample (100-30000 ms).")

    @model_validator(mode="after")
    def _at_least_one_sample(self) -> PollRequest:
        if self.durationMs < self.intervalMs:
            raise ValueError("durationMs must be at least intervalMs (one sample)")
        return self


class ReadRequest(StrictModel):
    sessionId: str = Field(min_length=1, max_length=MAX_ID)
    targets: list[ReadTarget] = Field(min_length=1, max_length=16, description="1-16 things to read.")
    depth: int = Field(default=1, ge=1, le=5, description="Struct levels expanded (1-5, default 1).")
    poll: PollRequest | None = Field(
        default=None, description="Sample repeatedly into the timeline instead of reading once."
    )


class TestRequest(StrictModel):
    __test__ = False  # not a pytest test class

    projectRoot: OsString = Field(min_length=1,
                                  description="Absolute path of the project; its files pick the framework.")
    framework: str | None = Field(
        default=None, min_length=1,
        description="Override detection: cargo, go, pytest, unittest, catch2, gtest, jest, vitest, mocha, nodetest, "
        "bun, deno, generic.",
    )
    level: Literal["unit", "integration", "e2e"] | None = Field(default=None, description="Omit for all tests.")
    test: OsString | None = Field(default=None, min_length=1,
                                  description="Run only the tests whose name contains this.")
    command: OsString | None = Field(
        default=None, min_length=1,
        description="The test binary (Catch2, GoogleTest) or, for framework 'generic', the test command.",
    )
    tracePatterns: list[str] | None = Field(default=None, max_length=100,
                                            description="Run the tests under Frida with these traced.")
    watches: WatchChanges | None = Field(default=None, description="Run the tests under Frida with these watches.")
    env: Environment = Field(default_factory=dict, max_length=4096,
                             description="Extra environment variables for the tests.")
    timeoutMs: int | None = Field(default=None, ge=1_000, le=86_400_000, description=(
        "Stop the run after this long (1000 ms to 86400000 ms = 24 h), its threads' stacks captured, with the "
        "results so far; default: the level's limit (unit 5 min, integration 10 min, others 30 min)."))

    _root = field_validator("projectRoot")(_absolute_root)


class TestStatusRequest(StrictModel):
    __test__ = False  # not a pytest test class

    testRunId: str = Field(min_length=1, max_length=MAX_ID, description="The id debug_test returned.")


class BreakpointAdd(StrictModel):
    function: str | None = Field(default=None, min_length=1, max_length=MAX_STRING, description=(
        "A pattern as debug_trace takes ('audio::process_block', 'Parser::*', '**::validate'): the entry of each "
        "native function it selects (at most 64)."))
    file: str | None = Field(default=None, min_length=1, max_length=MAX_STRING, description=(
        "A source file as the program was built from it: a base name 'main.c', a path suffix 'src/main.c' or "
        "absolute; with `line`."))
    line: int | None = Field(default=None, ge=1, le=10_000_000, description=(
        "The source line: the thread stops at the first instruction of each copy of its code."))
    condition: str | None = Field(default=None, min_length=1, max_length=1000, description=(
        "Stop only when this JavaScript expression is true. It reads the program's values by name: a function's "
        "parameters at its entry (args[i] too), a line's parameters and locals, globals; with .field, ->field, "
        "[i] steps ('n > 100', 'id === 7 && flags', 'acc->total >= 150 && acc->owner == \"ada\"')."))
    hitCount: int | None = Field(default=None, ge=1, le=1_000_000_000, description=(
        "Stop at this hit only (1: the first); counted among the hits whose condition held."))
    allThreads: bool | None = Field(default=None, description=(
        "true: a stop also stops the program's other threads until it is continued (default: only the thread "
        "that hits it stops; the others run on)."))


class BreakpointRequest(StrictModel):
    sessionId: str | None = Field(default=None, min_length=1, max_length=MAX_ID, description=(
        "A running session; omitted: staged for this connection's next launches (armed before the first "
        "instruction)."))
    projectRoot: str | None = Field(default=None, max_length=MAX_STRING, description=(
        "When staging: the project whose files @file:/@usercode patterns mean."))
    add: list[BreakpointAdd] = Field(default_factory=list, max_length=16)
    remove: list[str] = Field(default_factory=list, max_length=100, description="Breakpoint ids to remove.")

    _root = field_validator("projectRoot")(_absolute_root)


class ContinueRequest(StrictModel):
    sessionId: str = Field(min_length=1, max_length=MAX_ID)
    action: Literal["continue", "step-over", "step-into", "step-out"] = Field(default="continue", description=(
        "continue: the thread goes on until a breakpoint stops it again. step-over: to the next source line of "
        "its function (calls run through). step-into: into the function the current line calls, if it has "
        "debug info, else as step-over. step-out: until its function returns (it stops in the caller, in the "
        "middle of the calling line). Steps answer where the thread stopped."))
    threadId: int | None = Field(default=None, ge=1, description=(
        "The paused thread; omitted: every paused thread (continue), the only paused one (steps)."))
    waitMs: int = Field(default=10_000, ge=0, le=60_000, description=(
        "Steps: how long to wait for the thread to stop before answering that it is still running."))


class LogpointAdd(StrictModel):
    function: str | None = Field(default=None, min_length=1, max_length=MAX_STRING, description=(
        "A pattern as debug_trace takes: a line at the entry of each native function it selects (at most 64)."))
    file: str | None = Field(default=None, min_length=1, max_length=MAX_STRING, description="With `line`.")
    line: int | None = Field(default=None, ge=1, le=10_000_000, description="A source line.")
    message: str = Field(min_length=1, max_length=1000, description=(
        "The line to record: text with {expressions} reading values as a condition does ('n={n} "
        "total={acc->total}')."))
    condition: str | None = Field(default=None, min_length=1, max_length=1000, description=(
        "Record only when this JavaScript expression is true (names as in the message)."))


class LogpointRequest(StrictModel):
    sessionId: str | None = Field(default=None, min_length=1, max_length=MAX_ID, description=(
        "A running session; omitted: staged for this connection's next launches."))
    projectRoot: str | None = Field(default=None, max_length=MAX_STRING, description=(
        "When staging: the project whose files @file:/@usercode patterns mean."))
    add: list[LogpointAdd] = Field(default_factory=list, max_length=16)
    remove: list[str] = Field(default_factory=list, max_length=100, description="Logpoint ids to remove.")

    _root = field_validator("projectRoot")(_absolute_root)


class WriteTarget(StrictModel):
    variable: str | None = Field(default=None, min_length=1, max_length=MAX_EXPRESSION, description=(
        "A global/static scalar, as debug_read names it: 'gTempo', 'gClock->counter', 'cfg.limits[2]'; while a "
        "thread is paused, also a parameter or local of its frames ('qty'; see frame)."))
    threadId: int | None = Field(default=None, ge=1, le=MAX_INT64, description=_THREAD_ID)
    frame: int | None = Field(default=None, ge=0, le=MAX_FRAME, description=_FRAME)
    address: str | None = Field(default=None, description="A hex address, with `type`.")
    type: RawType | None = Field(default=None, description="A raw address's type: i8..u64, f32, f64, pointer.")
    value: int | float | bool | str = Field(description=(
        "The new value: a number (or a numeric string such as '0x10'), true/false for a bool."))

    _address = field_validator("address")(_check_address)

    @model_validator(mode="after")
    def _one_source(self) -> WriteTarget:
        if (self.variable is None) == (self.address is None):
            raise ValueError("a target needs exactly one of variable or address (with type)")
        if self.address is not None and self.type is None:
            raise ValueError("a raw address needs a type, e.g. {address: '0x…', type: 'i32', value: 7}")
        if self.variable is not None and self.type is not None:
            raise ValueError("a variable's type comes from the debug info: give no type")
        _check_frame_selection(self.variable, self.threadId, self.frame)
        return self


class WriteRequest(StrictModel):
    sessionId: str = Field(min_length=1, max_length=MAX_ID)
    targets: list[WriteTarget] = Field(min_length=1, max_length=16, description="1-16 things to write.")


class InputRequest(StrictModel):
    sessionId: str = Field(min_length=1, max_length=MAX_ID)
    text: str | None = Field(
        default=None, max_length=MAX_STDIN_TEXT,
        description="Text written to the program's standard input (UTF-8, up to 1 MiB; end each line with \\n).")
    close: bool = Field(default=False, description="Close its standard input after the text: the program reads "
                                                   "end-of-file.")

    @model_validator(mode="after")
    def _something(self) -> InputRequest:
        if self.text is None and not self.close:
            raise ValueError("give text to send, close: true to end the program's input, or both")
        return self
