"""The Node runtime: JavaScript functions found from source (symbols/js_index.py), traced by rewriting the
modules that define them as Node loads them, recorded by a preload inside the process
(src/strobe/instrument/nodetracer/) in the Python tracer's batch format (so daemon/runtimes/cpython_ingest.py
stores them) and shown as the JSON values the preload rendered.

How it fits together, for one session:

- at launch (`launch_env`) the daemon makes a private directory and starts Node with
  `NODE_OPTIONS=--require <preload.cjs>` and `STROBE_NODE_DIR=<dir>` (child Node processes inherit both);
- `apply_hooks` decides which functions are wrapped; the session's `NodePlan` (node_plan.py) rewrites each file that
  defines one (symbols/js_transform.py: line and column kept) into `<dir>/src/`, and writes `<dir>/plan.json` (which
  file is replaced by which rewrite, checked by its sha1, and the ids that record) before the process runs;
- the preload substitutes those files when Node loads them (CommonJS and ESM), and appends batches of events to
  `<dir>/events-<pid>.jsonl`; `NodeEvents` (node_events.py, one daemon thread) reads new lines and hands them to the
  session.

TypeScript runs through tsx (`node --import tsx app.ts`): the rewritten .ts text is what tsx compiles (its ES module
hook runs above the preload's; its require hook reads the file, and that read is substituted), so events carry the
.ts file and the indexed line, and tsx's source maps keep the lines of stack traces.

A Node process is native code too (Node's C++ and addons keep the native runtime's index and hooks).

Bun (`BunRuntime`) is the same runtime with `BUN_OPTIONS=--preload` (set for both: either may start the other);
instrument/nodetracer/bun.cjs substitutes sources there.

A function added while the program runs: the plan's `live` number goes up, and each thread of each running process
replaces the code of the modules it has loaded (V8's live edit, instrument/nodetracer/live.cjs) and answers in
`<dir>/edits-<pid>-<thread>.json`; `apply_hooks` waits for the main thread's answer (a module not loaded yet is
substituted when it loads) and works out from the text each script ran which added functions V8 left with their old
code (symbols/js_liveedit.py): those are refused with why. Removing works at once (the recorder's ids). Generator
functions are not traced. TypeScript is traced through tsx, Bun, or compiled to JavaScript (shown at its .ts lines
through the compiled files' source maps); run by ts-node it runs untraced (the preload's reason goes to the daemon's
log).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strobe.daemon.ingest import SlotTable, TraceIngest
from strobe.daemon.runtimes.base import AgentHandle, Run, RuntimeKind, ValueRenderer
from strobe.daemon.runtimes.cpython import PythonValues
from strobe.daemon.runtimes.cpython_ingest import PythonIngest
from strobe.daemon.runtimes.native import NativeRuntime
from strobe.daemon.runtimes.node_events import EVENTS, Deliver
from strobe.daemon.runtimes.node_plan import NodePlan, forget_plan, plan_for
from strobe.daemon.symbols import SessionSymbols, TraceableFunction
from strobe.instrument import nodetracer
from strobe.instrument.protocol import ModuleInfo
from strobe.instrument.requests import HookOptions
from strobe.paths import private_dir
from strobe.store.writer import Writer
from strobe.symbols.index import FunctionInfo
from strobe.symbols.js_index import JsFunction, dialect_of
from strobe.symbols.js_project import JsIndex, find_package, index_package, index_project
from strobe.symbols.patterns import Pattern

log = logging.getLogger(__name__)

NODE = RuntimeKind.NODE.value
FLUSH_WAIT_S = 0.03  # the preload writes its buffer every 10 ms: a query waits this long for the last of it
NO_TRACER = ("this Node process has no Strobe tracer in it: debug_launch adds one when its command is node itself "
             "(TypeScript: command 'node', args ['--import', 'tsx', 'app.ts']) or bun running a file ('bun app.ts', "
             "not 'bun run'/'bun test'); a process attached to, or started through another command, has none")
LIVE_WAIT_S = 3.0  # how long apply_hooks waits for a running process's main thread to replace loaded modules' code
LIVE_POLL_S = 0.01


@dataclass(frozen=True, slots=True)
class JsTarget(TraceableFunction):
    """A JavaScript function as a hook target (its key: file, body start, name), with what rewriting it needs."""

    js: JsFunction | None = None


def _traceable(function: JsFunction) -> JsTarget:
    qualified = f"{function.module}.{function.name}"
    info = FunctionInfo(name=qualified, raw=function.name, signature=function.name, address=function.body_start,
                        size=0, file=function.source or function.file, line=function.source_line or function.line,
                        inlined_only=False,
                        params=len(function.params or ()))
    return JsTarget(info, function.file, function.body_start, NODE, function)


@dataclass(eq=False)
class JsScripts:
    """A project's JavaScript functions as plan_hooks selects from them (symbols/js_project.py: a glob matches
    `Class.method`, `func` or the module-qualified `auth.login`), then the installed packages patterns name:
    a pattern whose first part is a package Node finds from the project root (`semver.compare`, `ms.*`), or an
    `@file:` inside `node_modules/<package>/`, indexes that package the first time (its functions' module is its
    name). Positions count across the project, then the packages in the order they were indexed."""

    index: JsIndex
    root: Path | None = None
    packages: dict[str, JsIndex | None] = field(default_factory=dict)  # name -> its index, None: not installed
    _parts: list[JsIndex] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    dialect = "javascript"

    def __post_init__(self) -> None:
        self._parts.append(self.index)

    def positions(self, pattern: Pattern) -> list[int]:
        with self._lock:
            for name in _package_names(pattern):
                self._package(name)
            found: list[int] = []
            base = 0
            for part in self._parts:
                found += (base + position for position in pattern.positions(part))
                base += len(part)
            return found

    def functions_at(self, positions: Sequence[int]) -> list[TraceableFunction]:
        with self._lock:
            parts = list(self._parts)
        functions: list[TraceableFunction] = []
        for position in positions:
            for part in parts:
                if position < len(part):
                    functions.append(_traceable(part.functions[position]))
                    break
                position -= len(part)
        return functions

    def _package(self, name: str) -> None:
        if self.root is None or name in self.packages:
            return
        directory = find_package(self.root, name)
        index = index_package(directory, name) if directory is not None else None
        self.packages[name] = index
        if index is not None:
            log.info("indexed %d functions of package %s (%s)", len(index), name, directory)
            self._parts.append(index)

    def __len__(self) -> int:
        with self._lock:
            return sum(map(len, self._parts))


_IN_PACKAGE = re.compile(r"node_modules/((?:@[^/]+/)?[^/@][^/]*)")


def _package_names(pattern: Pattern) -> list[str]:
    """The packages a pattern may name: its first name part, or the package of an @file: path in node_modules."""
    if pattern.text.startswith("@file:"):
        return _IN_PACKAGE.findall(pattern.text)
    if pattern.name_regex is None or "." not in pattern.text:
        return []
    first = pattern.text.split(".", 1)[0]
    return [] if "*" in first else [first]


class JsValues(PythonValues):
    """Values as the preload rendered them (JSON; arguments as [name, value] pairs), typed as JavaScript names
    them."""

    def return_type(self, retval: Any) -> str:
        return js_type(self.return_value(retval))


def js_type(value: Any) -> str:
    """The JavaScript type of a rendered value, as far as its rendering tells (the preload marks what JSON cannot
    say with __type__)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "Array"
    if isinstance(value, dict):
        marked = value.get("__type__")
        return marked if isinstance(marked, str) else "Object"
    return "unknown"


class NodeRuntime(NativeRuntime):
    kind = RuntimeKind.NODE

    def __init__(self) -> None:
        super().__init__()
        self._js_values = JsValues()

    @property
    def values(self) -> ValueRenderer:
        return self._js_values

    def launch_env(self, home: Path, env: dict[str, str],
                   argv: Sequence[str] = ()) -> tuple[dict[str, str], Path | None]:
        directory = private_dir(private_dir(home / "node") / uuid.uuid4().hex)
        options = env.get("NODE_OPTIONS", os.environ.get("NODE_OPTIONS"))
        return {**env, **nodetracer.environment(directory, options)}, directory

    def watch(self, directory: Path, deliver: Deliver) -> Callable[[], None]:
        EVENTS.watch(directory, deliver)

        def forget() -> None:
            EVENTS.forget(directory)
            forget_plan(directory)
            shutil.rmtree(directory, ignore_errors=True)

        return forget

    def preload(self, binary: str, cache_dir: Path) -> Any:
        return None

    def index(self, binary: str, modules: list[ModuleInfo], cache_dir: Path, preloaded: Any = None,
              project_root: str | None = None) -> SessionSymbols:
        native = super().index(binary, modules, cache_dir, preloaded)
        if project_root is None:
            return native
        found = index_project(Path(project_root))
        for path, why in found.skipped:
            log.info("javascript index of %s: %s skipped (%s)", project_root, path, why)
        for note in found.notes:
            log.info("javascript index of %s: %s", project_root, note)
        log.info("indexed %d JavaScript functions under %s", len(found.functions), project_root)
        return SessionSymbols(native.main_binary, native.main_has_dwarf, native.indexes,
                              JsScripts(found, Path(project_root)))

    async def apply_hooks(
        self, run: Run[Any], handle: AgentHandle, add: Sequence[tuple[int, TraceableFunction]], remove: Sequence[int],
        options: HookOptions,
    ) -> dict[int, str]:
        js_add = [(slot, f) for slot, f in add if f.runtime == NODE]
        native_add = [(slot, f) for slot, f in add if f.runtime != NODE]
        plan = plan_for(handle)
        js_remove = [slot for slot in remove if plan is not None and slot in plan.targets]
        native_remove = [slot for slot in remove if slot not in js_remove]
        failed = await super().apply_hooks(run, handle, native_add, native_remove,
                                           options) if native_add or native_remove else {}
        if not (js_add or js_remove):
            return failed
        if plan is None:
            return failed | {slot: NO_TRACER for slot, _ in js_add}
        for slot in js_remove:
            plan.targets.pop(slot, None)
        added: list[tuple[int, JsFunction]] = []
        for slot, function in js_add:
            js = getattr(function, "js", None)
            if js is None:
                failed[slot] = "its source is not indexed"
                continue
            plan.targets[slot] = js  # a module loaded from now on is wrapped
            added.append((slot, js))
        running = handle.pid in plan.running and bool(added)
        if running:
            plan.live += 1
        live = plan.live
        for warning in await asyncio.to_thread(plan.write):
            log.info("pid %d: %s", handle.pid, warning)
        if running:
            refused = await self._await_edits(plan, handle.pid, live, added)
            for slot, why in refused.items():
                plan.targets.pop(slot, None)  # not traced: the pattern can be added again later
                failed[slot] = why
            if refused:
                await asyncio.to_thread(plan.write)
        return failed

    async def _await_edits(self, plan: NodePlan, pid: int, live: int,
                           added: list[tuple[int, JsFunction]]) -> dict[int, str]:
        """Wait for process `pid` to replace the code of the modules it loaded (the preload's live edit); returns
        the added slots whose module it could not give the new code, with why."""
        deadline = time.monotonic() + LIVE_WAIT_S
        while (answer := await asyncio.to_thread(plan.edits, pid, live)) is None and time.monotonic() < deadline:
            await asyncio.sleep(LIVE_POLL_S)
        if answer is None:
            log.warning("pid %d did not answer the live edit %d within %.0f s (its main thread is busy, or it is "
                        "stopped): its loaded modules get the new code when its event loop next runs", pid, live,
                        LIVE_WAIT_S)
            return {}
        files, ran = answer
        refused = {slot: f"{Path(js.file).name} is already loaded and its code could not be replaced: {files[js.file]}"
                   for slot, js in added if files.get(js.file) is not None}
        by_file: dict[str, list[tuple[int, JsFunction]]] = {}
        for slot, js in added:
            if js.file in files and slot not in refused:
                by_file.setdefault(js.file, []).append((slot, js))
        for file, targets in by_file.items():
            misses = await asyncio.to_thread(plan.misses, file, ran.get(file), [js for _, js in targets])
            refused |= {slot: f"{Path(file).name} is already loaded and this function keeps its code there: "
                              f"{misses[js]}" for slot, js in targets if js in misses}
        return refused

    async def flush(self, run: Run[Any], handle: AgentHandle, timeout: float) -> None:
        await super().flush(run, handle, timeout)
        plan = plan_for(handle)
        if plan is not None:
            await asyncio.sleep(FLUSH_WAIT_S)
            await asyncio.to_thread(EVENTS.drain, plan.directory)

    async def set_depth(self, run: Run[Any], handle: AgentHandle, depth: int) -> None:
        plan = plan_for(handle)
        if plan is not None and plan.depth != depth:
            plan.depth = depth
            await asyncio.to_thread(plan.write)

    async def prepare(self, run: Run[Any], handle: AgentHandle, depth: int) -> list[str]:
        plan = plan_for(handle)
        if plan is None:
            return []
        plan.depth = depth
        warnings = list(await asyncio.to_thread(plan.write))
        plan.running.add(handle.pid)
        return warnings

    def ingest(self, writer: Writer, session: int, pid: int, start_ns: int, table: SlotTable,
               peers: dict[int, TraceIngest]) -> TraceIngest:
        return PythonIngest(writer, session, pid, start_ns, table, peers)


class BunRuntime(NodeRuntime):
    """Bun runs the same preload (BUN_OPTIONS=--preload; instrument/nodetracer/bun.cjs substitutes sources through
    a Bun plugin and require.extensions): everything else is Node's. Only `bun [options] <file>` gets it: Bun reads
    BUN_OPTIONS before its arguments, where it would turn a subcommand (`bun test`, `bun run x`) into a script name;
    those run untraced (their node children traced, NODE_OPTIONS)."""

    kind = RuntimeKind.BUN

    def launch_env(self, home: Path, env: dict[str, str],
                   argv: Sequence[str] = ()) -> tuple[dict[str, str], Path | None]:
        env, directory = super().launch_env(home, env, argv)
        if directory is not None and runs_a_file(argv):
            options = env.get("BUN_OPTIONS", os.environ.get("BUN_OPTIONS"))
            env = {**env, **nodetracer.bun_environment(directory, options)}
        return env, directory


def runs_a_file(argv: Sequence[str]) -> bool:
    """Whether `bun ...` runs a script file: its first argument that is not an option names a JS/TS file."""
    first = next((arg for arg in argv[1:] if not arg.startswith("-")), None)
    return first is not None and dialect_of(first) is not None
