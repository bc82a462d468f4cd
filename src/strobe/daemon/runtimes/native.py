"""The native runtime: machine code with DWARF (C, C++, Rust, Go…), hooked by the agent's CModule listeners
(agent/src/native/), indexed by the fast DWARF scanner (symbols/), recorded as fixed-size binary records
(instrument/records.py) and shown through each function's register plan (store/registers.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from strobe.daemon.ingest import SlotTable, TraceIngest
from strobe.daemon.runtimes.base import AgentHandle, Run, Runtime, RuntimeKind, ValueRenderer
from strobe.daemon.symbols import SessionSymbols, TraceableFunction, load_session_symbols, preload_main_index
from strobe.instrument.protocol import ModuleInfo, WatchesUpdated
from strobe.store.registers import decode_retval, raw_arguments, raw_return_type, register_value
from strobe.store.writer import Writer


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
        hot_calls_per_second: int, sample_every: int,
    ) -> dict[int, str]:
        if remove:
            await run(lambda: handle.update_hooks("remove", [(s, 0) for s in remove], hot_calls_per_second,
                                                  sample_every))
        if not add:
            return {}
        reply = await run(lambda: handle.update_hooks("add", [(s, f.runtime_address) for s, f in add],
                                                      hot_calls_per_second, sample_every))
        return {failure.id: failure.error for failure in reply.failed}

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
