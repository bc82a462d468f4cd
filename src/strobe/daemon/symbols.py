"""The functions a session can trace: every loaded module that carries DWARF, indexed in the
background from launch, with addresses relocated to where each module is loaded (ASLR)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from strobe.errors import NoDebugSymbols, ValidationError
from strobe.instrument.protocol import ModuleInfo
from strobe.symbols.elf import read_elf_info
from strobe.symbols.index import FunctionIndex, FunctionInfo, load_index

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TraceableFunction:
    """A function of one loaded module. `key` identifies it across hook changes."""

    info: FunctionInfo
    module: str
    runtime_address: int

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def file(self) -> str | None:
        return self.info.file

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.module, self.info.address, self.info.raw)


@dataclass(frozen=True)
class SessionSymbols:
    main_binary: str
    main_has_dwarf: bool
    modules: tuple[str, ...]
    functions: tuple[TraceableFunction, ...]

    def require_debug_info(self) -> None:
        if not self.main_has_dwarf:
            raise NoDebugSymbols(
                f"{self.main_binary} has no DWARF debug info, so its functions cannot be found by name. Ask the "
                "user before changing the build: compile with debug symbols (-g for gcc/clang, a debug profile "
                "for cargo, `go build` without -ldflags=-w), relaunch, then add the patterns again."
            )


def _wants_index(module: ModuleInfo, main_binary: str) -> bool:
    if not module.path.startswith("/") or not os.path.isfile(module.path):
        return False
    if os.path.realpath(module.path) == os.path.realpath(main_binary):
        return True
    try:
        return read_elf_info(module.path).has_dwarf
    except (ValidationError, OSError):
        return False


def load_session_symbols(main_binary: str, modules: list[ModuleInfo], cache_dir: Path) -> SessionSymbols:
    """Index the main binary and every loaded library with debug info (blocking; run it in a thread)."""
    functions: list[TraceableFunction] = []
    indexed: list[str] = []
    main_has_dwarf = False
    for module in modules:
        if not _wants_index(module, main_binary):
            continue
        index: FunctionIndex = load_index(module.path, cache_dir)
        is_main = os.path.realpath(module.path) == os.path.realpath(main_binary)
        if is_main:
            main_has_dwarf = index.elf.has_dwarf
        slide = int(module.base, 16) - index.elf.image_base
        indexed.append(module.path)
        for info in index.functions:
            runtime = info.address + slide if info.address else 0
            functions.append(TraceableFunction(info, module.path, runtime))
    log.info("indexed %d functions in %s", len(functions), indexed)
    return SessionSymbols(main_binary, main_has_dwarf, tuple(indexed), tuple(functions))
