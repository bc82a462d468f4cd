"""The function index of one binary: DWARF functions (fast scanner) merged with .symtab/.dynsym.

Naming, in order of preference:
1. the DIE's linkage name (or that of the declaration/abstract instance it refers to), demangled;
2. a mangled symbol-table name at the function's address (gcc leaves lambdas without a linkage name);
3. the DIE's enclosing scopes + DW_AT_name (C functions, `extern "C"`, anonymous-namespace helpers).
Symbol-table functions at addresses DWARF does not cover are added with file/line unknown, so a
binary without debug info still gets an index (`elf.has_dwarf` tells the caller which kind it got). A stripped
binary's DWARF is read from its separate debug file (symbols/debug_files.py; `elf.debug_file` names it).

An index keeps its functions as columns (`cache.FunctionTable`); `FunctionIndex.functions` builds the
`FunctionInfo` tuple the first time it is read. Matching a name pattern (`FunctionIndex.match`) and
`by_address` need no FunctionInfo but the ones they return. Big binaries are scanned by several
processes at once (dwarf_worker); the result is the same as scanning in one.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from itertools import compress
from pathlib import Path
from types import MemberDescriptorType
from typing import Any

import numpy as np
from elftools.elf.elffile import ELFFile

from strobe.symbols import cache, debug_files, dwarf_worker
from strobe.symbols.cache import FunctionTable
from strobe.symbols.debug_files import DebugFile
from strobe.symbols.dwarf_names import Demangler, SymbolNames, assemble
from strobe.symbols.elf import (
    SECTION_ERRORS,
    ElfInfo,
    SymbolTable,
    elf_info,
    has_dwarf,
    read_dwarf_sections,
    read_symbol_table,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class FunctionInfo:
    name: str  # qualified, demangled, without parameters/return type/qualifiers: "auth::User::validate"
    raw: str  # linkage (mangled) name; for C the plain name
    signature: str  # demangled with parameters where known ("auth::check(int)"); else == name
    address: int  # static (unrelocated) low_pc; 0 when inlined_only
    size: int  # high_pc - low_pc, 0 if unknown
    file: str | None  # absolute path of DW_AT_decl_file
    line: int | None  # DW_AT_decl_line
    inlined_only: bool  # declared inline and never emitted out of line
    params: int  # DW_TAG_formal_parameter children, including an artificial `this`


@dataclass(frozen=True, eq=False)
class FunctionIndex:
    """The functions of one binary, sorted by address, one entry per (address, name).

    `functions` (a tuple of FunctionInfo) is built on first use; `names[i]` is `functions[i].name`
    without building anything; `match(regex)` returns the functions whose name the regex fully matches,
    `in_files(predicate)` those whose file the predicate accepts, building only the FunctionInfo returned."""

    elf: ElfInfo
    table: FunctionTable = field(repr=False)  # FunctionIndex(elf, functions) still works: see __post_init__

    def __post_init__(self) -> None:
        if not isinstance(self.table, FunctionTable):  # the old constructor: a sequence of FunctionInfo
            functions = tuple(self.table)
            rows = [(f.name, f.raw, f.signature, f.address, f.size, f.file, f.line, f.inlined_only, f.params)
                    for f in functions]
            object.__setattr__(self, "table", FunctionTable.from_rows(rows))
            self.__dict__["functions"] = functions

    @classmethod
    def from_functions(cls, elf: ElfInfo, functions: Iterable[FunctionInfo]) -> FunctionIndex:
        """An index of functions given in the order they should be listed."""
        return cls(elf, tuple(functions))  # type: ignore[arg-type]

    @cached_property
    def functions(self) -> tuple[FunctionInfo, ...]:
        with _collector_paused():
            return tuple(_function_infos(self.table.columns()))

    @property
    def names(self) -> Sequence[str]:
        """Every function's name, in the order of `functions`."""
        return self.table.names

    def function(self, i: int) -> FunctionInfo:
        """functions[i], without building the others."""
        built = self.__dict__.get("functions")
        if built is not None:
            return built[i]  # type: ignore[no-any-return]
        return FunctionInfo(*next(self.table.rows([range(len(self.table))[i]])))

    def matching(self, pattern: re.Pattern[str] | str) -> list[int]:
        """Positions (in `functions`) of the functions whose whole name matches `pattern`."""
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        return list(compress(range(len(self.table)), map(regex.fullmatch, self.table.names)))

    def match(self, pattern: re.Pattern[str] | str) -> list[FunctionInfo]:
        """The functions whose whole name matches `pattern`, in index order: what
        `[f for f in index.functions if regex.fullmatch(f.name)]` gives, without building every FunctionInfo."""
        return self._at(self.matching(pattern))

    def matching_files(self, predicate: Callable[[str | None], bool]) -> list[int]:
        """Positions of the functions whose `file` satisfies `predicate`, called once per distinct file
        (for "@file:" and "@usercode" patterns)."""
        files = self.table.files
        wanted = np.fromiter((bool(predicate(file)) for file in files), dtype=bool, count=len(files))
        positions: list[int] = np.flatnonzero(wanted[self.table.file_ids]).tolist()
        return positions

    def in_files(self, predicate: Callable[[str | None], bool]) -> list[FunctionInfo]:
        """The functions whose `file` satisfies `predicate`, in index order (see matching_files)."""
        return self._at(self.matching_files(predicate))

    def at(self, positions: Sequence[int]) -> list[FunctionInfo]:
        """[functions[i] for i in positions], building only those (positions from `matching`/`matching_files`)."""
        return self._at(list(positions))

    def _at(self, positions: list[int]) -> list[FunctionInfo]:
        built = self.__dict__.get("functions")
        if built is not None:
            return [built[i] for i in positions]
        return _function_infos(self.table.columns(positions))

    def by_address(self, address: int) -> FunctionInfo | None:
        """The function whose static low_pc is exactly `address`."""
        found = self.table.first_at(address)
        return None if found is None else self.function(found)

    def __len__(self) -> int:
        return len(self.table)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FunctionIndex):
            return NotImplemented
        return self.elf == other.elf and self.functions == other.functions

    def __hash__(self) -> int:
        return hash((self.elf, self.functions))

    def __repr__(self) -> str:
        return f"FunctionIndex(elf={self.elf!r}, functions=<{len(self.table)} functions>)"


_FIELDS = ("name", "raw", "signature", "address", "size", "file", "line", "inlined_only", "params")


def _function_infos(columns: list[list[Any]]) -> list[FunctionInfo]:
    """FunctionInfo objects from their nine field columns. Hundreds of thousands of them: the slots are
    filled through their descriptors, a third faster than the frozen dataclass's __init__ (same objects)."""
    slots = [FunctionInfo.__dict__.get(name) for name in _FIELDS]
    if not all(isinstance(slot, MemberDescriptorType) for slot in slots):
        return list(map(FunctionInfo, *columns))
    s0, s1, s2, s3, s4, s5, s6, s7, s8 = (slot.__set__ for slot in slots)  # type: ignore[union-attr]
    new = object.__new__
    functions: list[FunctionInfo] = []
    append = functions.append
    for v0, v1, v2, v3, v4, v5, v6, v7, v8 in zip(*columns, strict=True):
        info = new(FunctionInfo)
        s0(info, v0)
        s1(info, v1)
        s2(info, v2)
        s3(info, v3)
        s4(info, v4)
        s5(info, v5)
        s6(info, v6)
        s7(info, v7)
        s8(info, v8)
        append(info)
    return functions


# --- building ------------------------------------------------------------------------------------


def build_index(path: str | Path, debug: DebugFile | None = None) -> FunctionIndex:
    """Index `path` from scratch (no cache). Raises ValidationError for a missing or non-ELF file. Its DWARF (and
    .symtab, when the binary has none) comes from its separate debug file when it has one (`debug`: where
    debug_files.locate found it)."""
    if debug is None:
        debug = debug_files.locate(path)
    with _collector_paused():
        scan: dwarf_worker.Scan | None = None
        try:
            with debug_files.open_dwarf_elf(path, debug) as (elf, dwarf_elf):
                info = _info(elf, dwarf_elf, path, debug)
                if info.has_dwarf:
                    try:
                        sections = read_dwarf_sections(dwarf_elf)
                    except SECTION_ERRORS as exc:
                        log.warning(
                            "cannot read the DWARF sections of %s (%s); indexing its symbol table only", path, exc
                        )
                    else:
                        if sections.info and sections.abbrev:
                            # workers start on their units now
                            separate = debug.path if debug.separate else None
                            scan = dwarf_worker.start(separate or path, sections,
                                                      binary=str(path) if separate else None)
                try:
                    symbols = read_symbol_table(elf, dwarf_elf)
                except SECTION_ERRORS as exc:
                    log.warning("cannot read the symbol tables of %s (%s)", path, exc)
                    symbols = SymbolTable([])
            names = SymbolNames(symbols)
            demangler = Demangler()
            parts = scan.finish(names, demangler) if scan is not None else []
        finally:
            if scan is not None:
                scan.close()
        table = assemble(parts, names, demangler)
    return FunctionIndex(info, table)


def _info(elf: ELFFile, dwarf_elf: ELFFile, path: str | Path, debug: DebugFile) -> ElfInfo:
    """The binary's ElfInfo, with the DWARF of its separate debug file counted as its own."""
    info = elf_info(elf, path)
    if dwarf_elf is elf or not debug.separate:
        return info
    try:
        found = has_dwarf(dwarf_elf)
    except SECTION_ERRORS:
        found = False
    return replace(info, has_dwarf=found, debug_file=debug.path)


def load_index(path: str | Path, cache_dir: Path) -> FunctionIndex:
    """The index of `path`, from cache_dir/symbols.db when this build (build id, else path+size+mtime, and its
    separate debug file if any) was indexed before, otherwise built and stored. Safe from several threads and
    processes at once."""
    debug = debug_files.locate(path)
    with debug_files.open_dwarf_elf(path, debug) as (elf, dwarf_elf):
        info = _info(elf, dwarf_elf, path, debug)
    key = cache.cache_key(info.build_id, path, debug.identity)
    with cache.key_lock(cache_dir, key):
        table = cache.fetch(cache_dir, key)
        if table is not None:
            return FunctionIndex(info, table)
        index = build_index(path)  # finds the same debug file (its facts are cached)
        if index.elf.build_id == info.build_id:  # the file was not replaced while we were reading it
            cache.store(cache_dir, key, index.table)
        return index


class _CollectorPause:
    """Building creates millions of objects and frees none: cyclic garbage collection passes would only
    rescan them (a third of the build time). Paused while any build runs, then restored as it was."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.was_enabled = False

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self.lock:
            if self.depth == 0:
                self.was_enabled = gc.isenabled()
                gc.disable()
            self.depth += 1
        try:
            yield
        finally:
            with self.lock:
                self.depth -= 1
                if self.depth == 0 and self.was_enabled:
                    gc.enable()


_collector_paused = _CollectorPause()
