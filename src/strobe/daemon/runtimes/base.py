"""The runtime seam: what a kind of code in a traced process (native machine code, CPython, Node's V8, Bun's
JavaScriptCore) supplies so that session orchestration can trace it without knowing what it is.

A runtime supplies four things, and session orchestration (daemon/hooking.py, daemon/children.py,
daemon/launching.py) only ever goes through them:

- `index`: the functions patterns match against, for one process image (blocking; run in a thread);
- `apply_hooks` / `apply_watches`: how hooks and watches are set and removed in the target (through the
  process's agent, whose matching half lives in agent/src/<runtime>/);
- `ingest`: how the agent's records decode into the common event rows;
- `values`: how the captured arguments and return values render for a reader (used by mcp/wire).

Usage (a new runtime is one module plus one entry in `strobe.daemon.runtimes.RUNTIMES`):

    class CPythonRuntime(Runtime):
        kind = RuntimeKind.CPYTHON
        def index(self, binary, modules, cache_dir, preloaded=None): ...   # ast over the project's .py files
        ...
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, TypeVar

from strobe.daemon.ingest import SlotTable, TraceIngest
from strobe.daemon.symbols import SessionSymbols, TraceableFunction
from strobe.instrument.protocol import ModuleInfo, WatchesUpdated
from strobe.instrument.requests import HookOptions, StepPlan
from strobe.store.writer import Writer

T = TypeVar("T")
Run = Callable[[Callable[[], T]], Awaitable[T]]  # FridaWorker.run: a blocking call off the event loop


class RuntimeKind(StrEnum):
    """What a process runs, detected at spawn, exec and attach (see runtimes.detect_kind)."""

    NATIVE = "native"
    CPYTHON = "cpython"
    NODE = "node"
    BUN = "bun"
    DENO = "deno"


class AgentHandle(Protocol):
    """The agent in one process, as a runtime drives it (instrument.handle.ProcessHandle)."""

    pid: int
    modules: list[ModuleInfo]

    def update_hooks(self, action: Any, functions: list[tuple[int, int, int]], options: HookOptions) -> Any: ...

    def set_watches(self, watches: dict[str, object]) -> WatchesUpdated: ...

    def set_follow(self, funcs: list[dict[str, object]]) -> Any: ...

    def flush(self, timeout: float) -> None: ...

    def ack_crash(self) -> None: ...

    def read_memory(self, recipes: list[dict[str, object]], timeout: float,
                    poll: tuple[int, int, int] | None = None) -> Any: ...

    def py_setup(self, bootstrap: str) -> Any: ...

    def py_command(self, command: str) -> None: ...

    def set_breakpoints(self, add: list[Any], remove: list[str]) -> Any: ...

    def resume_thread(self, tid: int, plan: StepPlan | None = None) -> None: ...

    def write_memory(self, targets: list[Any]) -> Any: ...

    runtime_state: Any  # owned by the process's runtime (the CPython tracer's state)


class ValueRenderer(Protocol):
    """How a runtime's captured values show in an event whose function has no register plan (mcp/wire.py:
    arguments and return value in verbose debug_query, the return type always)."""

    def arguments(self, args: Any) -> Any:
        """Arguments as stored, without type information (native: the raw argument registers)."""
        ...

    def return_value(self, retval: Any) -> Any: ...

    def return_type(self, retval: Any) -> str: ...

    def argument_names(self, args: Any) -> list[str] | None:
        """The arguments' names when the stored arguments carry them (Python's), else None."""
        ...


class Runtime(ABC):
    kind: RuntimeKind

    @abstractmethod
    def preload(self, binary: str, cache_dir: Path) -> Any:
        """A head start on `index` for the launched binary while it is being spawned (blocking; None if none)."""

    @abstractmethod
    def index(self, binary: str, modules: list[ModuleInfo], cache_dir: Path, preloaded: Any = None,
              project_root: str | None = None) -> SessionSymbols:
        """The functions of a process image that patterns select from (blocking); `project_root`: the session's,
        whose source files an interpreter's runtime indexes."""

    @abstractmethod
    async def apply_hooks(
        self, run: Run[Any], handle: AgentHandle, add: Sequence[tuple[int, TraceableFunction]], remove: Sequence[int],
        options: HookOptions,
    ) -> dict[int, str]:
        """Unhook `remove` (function slots), then hook `add` ((slot, function) pairs). Returns the slots that
        could not be hooked, with why. Raises instrument.handle.ProcessGone if the process went away."""

    @abstractmethod
    async def flush(self, run: Run[Any], handle: AgentHandle, timeout: float) -> None:
        """Have the process send every event recorded so far (they are delivered, not yet ingested, on return).
        Raises FridaAttachFailed when the process is gone."""

    async def set_depth(self, run: Run[Any], handle: AgentHandle, depth: int) -> None:  # noqa: B027
        """serializationDepth changed: values rendered in the target from now on use it (native code's plans
        are the session's ArgumentTypes, so nothing here by default)."""

    async def prepare(self, run: Run[Any], handle: AgentHandle, depth: int) -> list[str]:
        """Once per new image (spawn, exec), after its hooks are planned and before it is resumed: what the runtime
        sets up in the process (CPython: installs the tracer, with the targets `apply_hooks` gave it so far).
        Returns warnings."""
        return []

    def launch_env(self, home: Path, env: dict[str, str],
                   argv: Sequence[str] = ()) -> tuple[dict[str, str], Path | None]:
        """The environment to spawn `argv` of this runtime with, and a directory the runtime keeps for its
        session (Node: the preload's options and its directory); by default `env` as it is and none."""
        return env, None

    def watch(self, directory: Path, deliver: Callable[[int, bytes], None]) -> Callable[[], None]:
        """Start delivering what the session's processes write to `directory` (a launch_env directory); returns
        what ends it once the session has ended. Only runtimes whose launch_env makes a directory are asked."""
        raise NotImplementedError(f"the {self.kind.value} runtime keeps no directory")

    @abstractmethod
    async def apply_watches(self, run: Run[Any], handle: AgentHandle, message: dict[str, object]) -> WatchesUpdated:
        """Replace the watches read at traced calls (message: daemon.watches.agent_watches)."""

    @abstractmethod
    def ingest(self, writer: Writer, session: int, pid: int, start_ns: int, table: SlotTable,
               peers: dict[int, TraceIngest]) -> TraceIngest:
        """The decoder of one process's trace records into event rows (one per process; `peers` are the
        session's others, whose loss counters are summed)."""

    @property
    @abstractmethod
    def values(self) -> ValueRenderer: ...
