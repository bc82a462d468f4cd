"""The CPython runtime: Python functions found from source (symbols/python_index.py), traced by the tracer the
agent runs inside the interpreter (src/strobe/instrument/pytracer/, carried by agent/src/cpython/), recorded as
JSON batches (daemon/runtimes/cpython_ingest.py) and shown as the Python values the tracer rendered.

A CPython process is native code too: the interpreter and its C extensions keep the native runtime's index and
hooks, so one session can trace `app.jobs.run` next to a C extension's `fastmath_dot`.

The tracer is installed once per new interpreter image (spawn or exec), before the process is resumed
(`prepare`): at Py_RunMain, so the hooks staged before launch are active before the first line of `__main__`.
Its targets go in the install config; later changes are `targets` commands on its control pipe.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strobe.daemon.ingest import SlotTable, TraceIngest
from strobe.daemon.runtimes.base import AgentHandle, Run, RuntimeKind, ValueRenderer
from strobe.daemon.runtimes.cpython_ingest import WATCH_ID_STRIDE, PythonIngest
from strobe.daemon.runtimes.native import NativeRuntime
from strobe.daemon.symbols import SessionSymbols, TraceableFunction
from strobe.instrument import pytracer
from strobe.instrument.protocol import ModuleInfo, WatchError, WatchesUpdated
from strobe.instrument.requests import HookOptions
from strobe.store.writer import Writer
from strobe.symbols.index import FunctionInfo
from strobe.symbols.patterns import Pattern
from strobe.symbols.python_index import HOST_VERSION, PythonFunction, PythonIndex, index_tree

log = logging.getLogger(__name__)

CPYTHON = RuntimeKind.CPYTHON.value
COMMAND_TIMEOUT_S = 5.0  # a command's reply: the tracer's thread reads its pipe within milliseconds
PYTHON_FLUSH_TIMEOUT_S = 1.0  # a query waits this long at most for the tracer's buffered events
_VERSION = re.compile(r"^(?:lib)?python(\d)\.(\d+)")


def interpreter_version(binary: str, modules: Sequence[ModuleInfo]) -> tuple[int, int] | None:
    """The interpreter's version from its executable's or libpython's name (python3.12, libpython3.12.so.1.0)."""
    for name in (os.path.basename(binary), *(module.name for module in modules)):
        found = _VERSION.match(name)
        if found:
            return int(found.group(1)), int(found.group(2))
    return None


def _traceable(function: PythonFunction) -> TraceableFunction:
    """A Python function as a hook target. Its key (file, first line, qualname) is what the tracer matches a code
    object by (co_filename, co_firstlineno, co_qualname)."""
    info = FunctionInfo(name=function.name, raw=function.qualname, signature=function.name,
                        address=function.first_line, size=0, file=function.file, line=function.line,
                        inlined_only=False, params=len(function.params))
    return TraceableFunction(info, function.file, function.first_line, CPYTHON)


@dataclass(frozen=True, eq=False)
class PythonScripts:
    """A project's Python functions, as plan_hooks selects from them (daemon/symbols.FunctionSource)."""

    index: PythonIndex
    dialect = "python"

    def positions(self, pattern: Pattern) -> list[int]:
        return pattern.positions(self.index)

    def functions_at(self, positions: Sequence[int]) -> list[TraceableFunction]:
        return [_traceable(function) for function in self.index.at(positions)]

    def __len__(self) -> int:
        return len(self.index)


class PythonValues:
    """Values as the tracer rendered them (JSON): arguments as [name, value] pairs, the return value as is."""

    def arguments(self, args: Any) -> Any:
        pairs = _loads(args)
        return [value for _, value in pairs] if isinstance(pairs, list) else pairs

    def argument_names(self, args: Any) -> list[str] | None:
        pairs = _loads(args)
        return [name for name, _ in pairs] if isinstance(pairs, list) else None

    def return_value(self, retval: Any) -> Any:
        return _loads(retval)

    def return_type(self, retval: Any) -> str:
        return python_type(_loads(retval))


def _loads(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


_JSON_TYPES: tuple[tuple[type, str], ...] = ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"),
                                              (list, "list"))


def python_type(value: Any) -> str:
    """The Python type of a rendered value, as far as its rendering tells (reprs.py marks objects with __type__)."""
    if value is None:
        return "None"
    for json_type, name in _JSON_TYPES:  # bool before int: a bool is an int
        if isinstance(value, json_type):
            return name
    if isinstance(value, dict):
        marked = value.get("__type__")
        if isinstance(marked, str):
            return marked
        return "bytes" if set(value) == {"bytes", "len"} else "dict"
    return "object"


_BATCH_SIZE = re.compile(rb'\{"v":1,"n":(\d+),')


def batch_size(data: bytes) -> int:
    """How many events a tracer batch carries, from its head (outbox.py writes "n" first after "v")."""
    found = _BATCH_SIZE.match(data)
    return int(found.group(1)) if found else 0


def is_reply(data: bytes) -> bool:
    """Whether a tracer message is a command's reply (`{"v":1,"pid":N,"reply":...`), not a batch."""
    return data.find(b'"reply":', 0, 48) != -1


def breaks_message(data: bytes) -> dict[str, Any] | None:
    """A thread's pause report (`{"v":1,"pid":N,"pause":{...}}`) or a batch of logpoint lines
    (`{"v":1,"pid":N,"logpoints":[...]}`) from the tracer's breakpoints, decoded; None for anything else."""
    if data.find(b'"pause":', 0, 48) == -1 and data.find(b'"logpoints":', 0, 48) == -1:
        return None
    try:
        message = json.loads(data)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


@dataclass
class PythonTracerState:
    """What the host knows of one interpreter's tracer (kept on its agent handle, `runtime_state`), and the
    commands waiting for their reply (resolved on Frida's thread, by `resolve`)."""

    targets: dict[int, dict[str, object]] = field(default_factory=dict)  # slot -> the tracer's target
    watches: list[dict[str, object]] = field(default_factory=list)  # for the install config
    breakpoints: dict[str, dict[str, object]] = field(default_factory=dict)  # by id: for the install config
    state: str = "new"  # new (not set up yet) | waiting (for Py_RunMain) | installed | unsupported
    error: str | None = None
    commands: int = 0
    waiting: dict[int, Future[dict[str, Any]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def command(self, name: str, reply: Future[dict[str, Any]] | None = None, **fields: object) -> tuple[int, str]:
        """A numbered command line; its reply resolves `reply` when given (see `request`)."""
        with self.lock:
            self.commands += 1
            number = self.commands
            if reply is not None:
                self.waiting[number] = reply
        return number, json.dumps({"cmd": name, "id": number, **fields}, separators=(",", ":"))

    async def request(self, run: Run[Any], handle: AgentHandle, timeout: float, name: str,
                      **fields: object) -> dict[str, Any]:
        """Send a command and wait for its reply. Raises TimeoutError when none came in time (the tracer is
        not installed yet, or the interpreter holds its GIL elsewhere for that long)."""
        reply: Future[dict[str, Any]] = Future()
        number, line = self.command(name, reply, **fields)
        try:
            await run(lambda: handle.py_command(line))
            return await asyncio.wait_for(asyncio.wrap_future(reply), timeout)
        finally:
            with self.lock:
                self.waiting.pop(number, None)

    def resolve(self, data: bytes) -> None:
        try:
            message = json.loads(data)
        except ValueError:
            return
        number = message.get("reply") if isinstance(message, dict) else None
        with self.lock:
            reply = self.waiting.pop(number, None) if isinstance(number, int) else None
        if reply is not None and not reply.done():
            reply.set_result(message)
        elif isinstance(message, dict) and "error" in message:
            log.warning("pid %s: the Python tracer refused a command: %s", message.get("pid"), message["error"])


def tracer_state(handle: AgentHandle) -> PythonTracerState:
    state = getattr(handle, "runtime_state", None)
    if not isinstance(state, PythonTracerState):
        state = PythonTracerState()
        handle.runtime_state = state
    return state


class CPythonRuntime(NativeRuntime):
    kind = RuntimeKind.CPYTHON

    def __init__(self) -> None:
        super().__init__()
        self._python_values = PythonValues()

    @property
    def values(self) -> ValueRenderer:
        """The values of Python functions (a native function's, even in this process, render as native)."""
        return self._python_values

    def preload(self, binary: str, cache_dir: Path) -> Any:
        return None  # the interpreter's own index is small; the project's is read in `index`

    def index(self, binary: str, modules: list[ModuleInfo], cache_dir: Path, preloaded: Any = None,
              project_root: str | None = None) -> SessionSymbols:
        native = super().index(binary, modules, cache_dir, preloaded)
        if project_root is None:
            return native
        version = interpreter_version(binary, modules) or HOST_VERSION
        scripts = index_tree(project_root, python=version)
        for warning in scripts.warnings:
            log.info("python index of %s: %s", project_root, warning)
        log.info("indexed %d Python functions in %d files under %s", len(scripts), scripts.files, project_root)
        return SessionSymbols(native.main_binary, native.main_has_dwarf, native.indexes, PythonScripts(scripts))

    async def apply_hooks(
        self, run: Run[Any], handle: AgentHandle, add: Sequence[tuple[int, TraceableFunction]], remove: Sequence[int],
        options: HookOptions,
    ) -> dict[int, str]:
        tracer = tracer_state(handle)
        python_add = [(slot, f) for slot, f in add if f.runtime == CPYTHON]
        python_remove = [slot for slot in remove if slot in tracer.targets]
        native_add = [(slot, f) for slot, f in add if f.runtime != CPYTHON]
        native_remove = [slot for slot in remove if slot not in tracer.targets]
        failed = await super().apply_hooks(run, handle, native_add, native_remove,
                                           options) if native_add or native_remove else {}
        if not (python_add or python_remove):
            return failed
        if tracer.state == "unsupported":
            return failed | {slot: f"Python functions cannot be traced here: {tracer.error}" for slot, _ in python_add}
        for slot in python_remove:
            del tracer.targets[slot]
        for slot, function in python_add:
            tracer.targets[slot] = {"id": slot, "file": function.module, "line": function.runtime_address,
                                    "qualname": function.info.raw}
        targets = list(tracer.targets.values())
        if tracer.state == "waiting":  # queued by the agent until the tracer is installed
            _, command = tracer.command("targets", targets=targets)
            await run(lambda: handle.py_command(command))
        elif tracer.state == "installed":  # in force when this returns: the next call sees the new targets
            try:
                reply = await tracer.request(run, handle, COMMAND_TIMEOUT_S, "targets", targets=targets)
            except TimeoutError:
                reply = {"error": f"the Python tracer did not confirm within {COMMAND_TIMEOUT_S:.0f} s (the "
                                  "interpreter may hold its GIL in a long C call); it applies them when it can"}
            if "error" in reply:
                failed |= {slot: str(reply["error"]) for slot, _ in python_add}
        return failed  # state "new": they go in the install config (prepare)

    async def apply_watches(self, run: Run[Any], handle: AgentHandle, message: dict[str, object]) -> WatchesUpdated:
        """Python watches (entries with "python") go to the tracer, read at every traced Python call; the others
        to the native hooks."""
        entries = message.get("js")
        js = entries if isinstance(entries, list) else []
        python = [e for e in js if "python" in e]
        native = await super().apply_watches(run, handle, {**message, "js": [e for e in js if "python" not in e]})
        tracer = tracer_state(handle)
        if not python and tracer.state != "installed":
            return native
        version = message.get("version")
        stride_base = (version if isinstance(version, int) else 0) * WATCH_ID_STRIDE
        wanted = [{"id": stride_base + int(e["id"]), "expr": e["python"]} for e in python]
        errors = list(native.errors)
        if tracer.state == "new":  # set up with the tracer (prepare)
            tracer.watches = wanted
        elif tracer.state == "unsupported":
            errors += [WatchError(id=int(e["id"]), error=f"Python values cannot be read: {tracer.error}")
                       for e in python]
        else:
            try:
                reply = await tracer.request(run, handle, COMMAND_TIMEOUT_S, "watches", watches=wanted)
                errors += [WatchError(id=int(wid) % WATCH_ID_STRIDE, error=str(why))
                           for wid, why in reply.get("errors", [])]
            except TimeoutError:
                errors += [WatchError(id=int(e["id"]), error="the Python tracer did not answer; retry")
                           for e in python]
        return native.model_copy(update={"errors": errors, "activeCount": native.activeCount + len(python)})

    async def flush(self, run: Run[Any], handle: AgentHandle, timeout: float) -> None:
        await super().flush(run, handle, timeout)
        tracer = tracer_state(handle)
        if tracer.state == "installed":  # its thread needs the GIL: a program inside a long C call delays it
            wait = min(timeout, PYTHON_FLUSH_TIMEOUT_S)
            try:
                await tracer.request(run, handle, wait, "flush")
            except TimeoutError:
                log.info("pid %d: the Python tracer did not flush within %.1f s", handle.pid, wait)

    async def set_depth(self, run: Run[Any], handle: AgentHandle, depth: int) -> None:
        tracer = tracer_state(handle)
        if tracer.state in ("waiting", "installed"):
            _, command = tracer.command("depth", depth=depth)
            await run(lambda: handle.py_command(command))

    async def prepare(self, run: Run[Any], handle: AgentHandle, depth: int) -> list[str]:
        tracer = tracer_state(handle)
        if tracer.state != "new":
            return []
        config = {"targets": list(tracer.targets.values()), "depth": depth, "watches": tracer.watches,
                  "breakpoints": list(tracer.breakpoints.values())}
        reply = await run(lambda: handle.py_setup(pytracer.bootstrap(config)))
        tracer.state, tracer.error = reply.state, reply.error
        if reply.state == "unsupported":
            return [f"Python functions cannot be traced in pid {handle.pid}: {reply.error}. Its output, crashes and "
                    "native functions (with debug info) are still traced."]
        return []

    async def set_python_breakpoints(self, run: Run[Any], handle: AgentHandle, add: list[dict[str, object]],
                                     remove: list[str]) -> dict[str, str]:
        """Arm breakpoints and logpoints in the interpreter's tracer (instrument/pytracer/breaks.py) and disarm
        others (by id); {id: why} for those that could not be armed. Before the tracer is installed they go in its
        install config (armed before the program's first line)."""
        tracer = tracer_state(handle)
        for bid in remove:
            tracer.breakpoints.pop(bid, None)
        tracer.breakpoints.update({str(spec["id"]): spec for spec in add})
        if tracer.state == "unsupported":
            return {str(spec["id"]): f"Python code cannot be stopped here: {tracer.error}" for spec in add}
        if tracer.state == "new":  # set up with the tracer (prepare)
            return {}
        if tracer.state == "waiting":  # queued by the agent until the tracer is installed
            _, command = tracer.command("breakpoints", set=add, remove=remove)
            await run(lambda: handle.py_command(command))
            return {}
        try:
            reply = await tracer.request(run, handle, COMMAND_TIMEOUT_S, "breakpoints", set=add, remove=remove)
        except TimeoutError:
            return {str(spec["id"]): "the Python tracer did not answer in time (the interpreter may hold its GIL in "
                                     "a long C call); retry" for spec in add}
        if "error" in reply:
            return {str(spec["id"]): str(reply["error"]) for spec in add}
        failed = {str(f.get("id")): str(f.get("error")) for f in reply.get("failed", []) if isinstance(f, dict)}
        for bid in failed:
            tracer.breakpoints.pop(bid, None)
        return failed

    async def resume_python(self, run: Run[Any], handle: AgentHandle, tid: int, action: str) -> None:
        """Let a thread paused in Python code go on (`continue`) or step (`over`, `into`, `out`); ValueError with
        the tracer's reason when it is not paused."""
        reply = await tracer_state(handle).request(run, handle, COMMAND_TIMEOUT_S, "resume", tid=tid, action=action)
        if "error" in reply:
            raise ValueError(str(reply["error"]))

    def ingest(self, writer: Writer, session: int, pid: int, start_ns: int, table: SlotTable,
               peers: dict[int, TraceIngest]) -> TraceIngest:
        return PythonIngest(writer, session, pid, start_ns, table, peers)
