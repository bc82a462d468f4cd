"""The native runtime: machine code with DWARF (C, C++, Rust, Go…), hooked by the agent's CModule listeners
(agent/src/native/), indexed by the fast DWARF scanner (symbols/), recorded as fixed-size binary records
(instrument/records.py) and shown through each function's register plan (store/registers.py).

A function a hook at its entry would break (a branch of it lands inside the bytes the hook overwrites:
symbols/hook_safety.py) is never sent to the agent: `apply_hooks` answers it as failed, with why
(`unsafe_entries`, which daemon/breakpoints.py asks too for a breakpoint at a function's entry). Go code is never
hooked: its goroutine stacks have no room for Frida's trampoline (daemon/go_abi.py, `GO_HOOK_REFUSAL`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from strobe.daemon.go_abi import GO_HOOK_REFUSAL, go_functions
from strobe.daemon.ingest import SlotTable, TraceIngest
from strobe.daemon.runtimes.base import AgentHandle, Run, Runtime, RuntimeKind, ValueRenderer
from strobe.daemon.symbols import SessionSymbols, TraceableFunction, load_session_symbols, preload_main_index
from strobe.instrument.protocol import ModuleInfo, WatchesUpdated
from strobe.instrument.requests import HookOptions
from strobe.store.registers import decode_retval, raw_arguments, raw_return_type, register_value
from strobe.store.writer import Writer
from strobe.symbols.hook_safety import HOOK_SAFETY

K = TypeVar("K")


def unsafe_entries(functions: Sequence[tuple[K, TraceableFunction]]) -> dict[K, str]:
    """The native functions among `functions` (key, function) that a hook at their entry would break, each with why:
    Go code (daemon/go_abi.py), or a branch into the hook's bytes (symbols/hook_safety.py); blocking (it may read and
    disassemble thousands of functions): run it in a thread."""
    unsafe = go_functions(functions)
    by_module: dict[str, list[tuple[K, TraceableFunction]]] = {}
    for key, function in functions:
        if function.runtime == "native" and function.runtime_address and key not in unsafe:
            by_module.setdefault(function.module, []).append((key, function))
    for module, chosen in by_module.items():
        verdicts = HOOK_SAFETY.verdicts(module, [(f.info.address, f.info.size) for _, f in chosen])
        for (key, _), verdict in zip(chosen, verdicts, strict=True):
            if verdict is not None and not verdict.safe:
                unsafe[key] = f"{verdict.reason}: hooked, the program would crash or go wrong there"
    return unsafe


class NativeValues:
    """Raw registers, for functions whose register plan (typed values, store/registers.py) is not known."""

    def arguments(self, args: Any) -> Any:
        return raw_arguments(args)

    def return_value(self, retval: Any) -> Any:
        return register_value(retval) if isinstance(retval, int) else decode_retval(retval)

    def return_type(self, retval: Any) -> str:
        return raw_return_type(decode_retval(retval))

    def argument_names(self, args: Any) -> list[str] | None:
        return None


class NativeRuntime(Runtime):
    kind = RuntimeKind.NATIVE

    def __init__(self) -> None:
        self._values = NativeValues()

    def preload(self, binary: str, cache_dir: Path) -> Any:
        return preload_main_index(binary, cache_dir)

    def index(self, binary: str, modules: list[ModuleInfo], cache_dir: Path, preloaded: Any = None,
              project_root: str | None = None) -> SessionSymbols:
        return load_session_symbols(binary, modules, cache_dir, preloaded)

    async def apply_hooks(
        self, run: Run[Any], handle: AgentHandle, add: Sequence[tuple[int, TraceableFunction]], remove: Sequence[int],
        options: HookOptions,
    ) -> dict[int, str]:
        if remove:
            await run(lambda: handle.update_hooks("remove", [(s, 0, 0) for s in remove], options))
        if not add:
            return {}
        failed = {slot: why if why == GO_HOOK_REFUSAL else
                  f"{why} (left unhooked; trace its callers or the functions it calls instead)"
                  for slot, why in (await asyncio.to_thread(unsafe_entries, add)).items()}
        safe = [(s, f.runtime_address, f.info.size) for s, f in add if s not in failed]
        if safe:
            reply = await run(lambda: handle.update_hooks("add", safe, options))
            failed |= {failure.id: f"{failure.error} (too small to hook, or not code)" for failure in reply.failed}
        return failed

    async def flush(self, run: Run[Any], handle: AgentHandle, timeout: float) -> None:
        await run(lambda: handle.flush(timeout))

    async def apply_watches(self, run: Run[Any], handle: AgentHandle, message: dict[str, object]) -> WatchesUpdated:
        reply: WatchesUpdated = await run(lambda: handle.set_watches(message))
        return reply

    def ingest(self, writer: Writer, session: int, pid: int, start_ns: int, table: SlotTable,
               peers: dict[int, TraceIngest]) -> TraceIngest:
        return TraceIngest(writer, session, pid, start_ns, table, peers)

    @property
    def values(self) -> ValueRenderer:
        return self._values
