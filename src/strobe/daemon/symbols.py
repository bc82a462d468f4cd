"""The functions a session can trace: every loaded module that carries DWARF, indexed in the
background from launch, with addresses relocated to where each module is loaded (ASLR)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from stat import S_ISREG
from typing import Protocol

from strobe.errors import NoDebugSymbols, ValidationError
from strobe.instrument.protocol import ModuleInfo
from strobe.symbols import debug_files
from strobe.symbols.elf import read_elf_info
from strobe.symbols.index import FunctionIndex, FunctionInfo, load_index
from strobe.symbols.patterns import Pattern

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TraceableFunction:
    """A function of one loaded module. `key` identifies it across hook changes."""

    info: FunctionInfo
    module: str  # native: the loaded module's path; Python: the source file
    runtime_address: int  # native: where it is loaded; Python: its code object's first line
    runtime: str = "native"  # a RuntimeKind value: whose agent half hooks it

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def file(self) -> str | None:
        return self.info.file

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.module, self.info.address, self.info.raw)


class FunctionSource(Protocol):
    """Functions patterns select from, as daemon/tracing.plan_hooks asks for them: one loaded module
    (ModuleSymbols) or a Python source tree (daemon/runtimes/cpython.py). `dialect` says how a pattern is read
    for it ("native": 'ns::Class::method'; "python": 'pkg.mod.Class.method', see symbols/patterns.py)."""

    dialect: str

    def positions(self, pattern: Pattern) -> Sequence[int]:
        """Positions of the functions `pattern` selects, in a fixed order."""
        ...

    def functions_at(self, positions: Sequence[int]) -> list[TraceableFunction]:
        """The functions at `positions`, ready to hook."""
        ...

    def __len__(self) -> int: ...


@dataclass(frozen=True, eq=False)
class ModuleSymbols:
    """The index of one loaded module and where it is loaded: runtime = static + slide, where
    slide = module base - image base (ASLR, PIE or not)."""

    path: str
    index: FunctionIndex
    slide: int
    dialect = "native"

    def positions(self, pattern: Pattern) -> list[int]:
        """Index positions of the functions `pattern` selects, in index order (no FunctionInfo built)."""
        return pattern.positions(self.index)

    def functions_at(self, positions: Sequence[int]) -> list[TraceableFunction]:
        """The functions at these index positions, building only those."""
        return self.relocated(self.index.at(positions))

    def relocated(self, infos: Iterable[FunctionInfo]) -> list[TraceableFunction]:
        """Functions of this module where they are loaded; inlined-only ones (static address 0) get 0."""
        slide, path = self.slide, self.path
        return [TraceableFunction(info, path, info.address + slide if info.address else 0) for info in infos]

    def __len__(self) -> int:
        return len(self.index)


@dataclass(frozen=True)
class SessionSymbols:
    main_binary: str
    main_has_dwarf: bool
    indexes: tuple[ModuleSymbols, ...]
    scripts: FunctionSource | None = None  # an interpreter's functions from source (daemon/runtimes/cpython.py)

    @property
    def sources(self) -> tuple[FunctionSource, ...]:
        """Everything patterns select from: the native modules, then the scripts."""
        return (*self.indexes, self.scripts) if self.scripts is not None else self.indexes

    @property
    def traceable(self) -> bool:
        """Whether patterns can select anything here: the main binary has DWARF, or the scripts are indexed."""
        return self.main_has_dwarf or self.scripts is not None

    @property
    def modules(self) -> tuple[str, ...]:
        """Paths of the indexed modules, in load order."""
        return tuple(module.path for module in self.indexes)

    @cached_property
    def functions(self) -> tuple[TraceableFunction, ...]:
        """Every function of every indexed module. Built on first use, and slow on a big binary (a second
        per ~300k functions): to select functions, ask `indexes` with a pattern instead."""
        return tuple(function for module in self.indexes for function in module.relocated(module.index.functions))

    def require_debug_info(self) -> None:
        if not self.main_has_dwarf:
            try:
                searched = debug_files.locate(self.main_binary).reason
            except ValidationError:
                searched = None
            raise NoDebugSymbols(
                f"{self.main_binary} has no DWARF debug info, so its functions cannot be found by name. Ask the "
                "user before changing the build: compile with debug symbols (-g for gcc/clang, a debug profile "
                "for cargo, `go build` without -ldflags=-w), relaunch, then add the patterns again."
                + (f" {searched}" if searched else "")
            )


def _wants_index(module: ModuleInfo, main_binary: str) -> bool:
    if not module.path.startswith("/"):
        return False
    try:
        stat = os.stat(module.path)
    except OSError:
        return False
    if not S_ISREG(stat.st_mode):
        return False
    if os.path.realpath(module.path) == os.path.realpath(main_binary):
        return True
    return _has_dwarf(module.path, stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=512)
def _has_dwarf(path: str, size: int, mtime_ns: int) -> bool:
    """Whether a library carries DWARF, remembered per version of the file: every launch loads the same
    system libraries, and reading their section headers again costs a few ms each."""
    try:
        return read_elf_info(path).has_dwarf
    except (ValidationError, OSError):
        return False


def preload_main_index(main_binary: str, cache_dir: Path) -> FunctionIndex | None:
    """The main binary's index, loaded while the process is being spawned (None if it cannot be indexed:
    load_session_symbols then tries again and reports why)."""
    try:
        return load_index(main_binary, cache_dir)
    except Exception as exc:  # a background head start only: the real attempt reports any error
        log.info("no early index of %s: %s", main_binary, exc)
        return None


def load_session_symbols(
    main_binary: str, modules: list[ModuleInfo], cache_dir: Path, main_index: FunctionIndex | None = None
) -> SessionSymbols:
    """Index the main binary and every loaded library with debug info (blocking; run it in a thread).
    `main_index`: the main binary's index if already loaded (see preload_main_index)."""
    indexes: list[ModuleSymbols] = []
    main_has_dwarf = False
    for module in modules:
        if not _wants_index(module, main_binary):
            continue
        is_main = os.path.realpath(module.path) == os.path.realpath(main_binary)
        index: FunctionIndex = main_index if is_main and main_index is not None else load_index(module.path, cache_dir)
        if is_main:
            main_has_dwarf = index.elf.has_dwarf
        indexes.append(ModuleSymbols(module.path, index, int(module.base, 16) - index.elf.image_base))
    log.info("indexed %d functions in %s", sum(map(len, indexes)), [module.path for module in indexes])
    return SessionSymbols(main_binary, main_has_dwarf, tuple(indexes))


def mapped_modules(pid: int) -> list[ModuleInfo]:
    """The files mapped into a process now (/proc/<pid>/maps), each at its lowest mapping: what it has loaded
    since it was spawned too (dlopen: a Python C extension, a plugin). Raises OSError when the process is gone."""
    spans: dict[str, tuple[int, int]] = {}
    with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) < 6 or not fields[5].startswith("/") or fields[5].rstrip().endswith("(deleted)"):
                continue
            path = fields[5].rstrip("\n")
            low, high = (int(part, 16) for part in fields[0].split("-"))
            known = spans.get(path)
            spans[path] = (min(low, known[0]), max(high, known[1])) if known else (low, high)
    return [ModuleInfo(name=os.path.basename(path), path=path, base=hex(low), size=high - low)
            for path, (low, high) in spans.items()]


def with_new_modules(symbols: SessionSymbols, modules: list[ModuleInfo], cache_dir: Path) -> SessionSymbols | None:
    """`symbols` plus the modules with debug info loaded since it was built (blocking); None when there are none."""
    known = {os.path.realpath(module.path) for module in symbols.indexes}
    added: list[ModuleSymbols] = []
    for module in modules:
        if os.path.realpath(module.path) in known or not _wants_index(module, symbols.main_binary):
            continue
        index = load_index(module.path, cache_dir)
        added.append(ModuleSymbols(module.path, index, int(module.base, 16) - index.elf.image_base))
        known.add(os.path.realpath(module.path))
    if not added:
        return None
    log.info("indexed %d functions in modules loaded since launch: %s", sum(map(len, added)),
             [module.path for module in added])
    return SessionSymbols(symbols.main_binary, symbols.main_has_dwarf, (*symbols.indexes, *added), symbols.scripts)
