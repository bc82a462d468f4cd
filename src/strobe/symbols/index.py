"""The function index of one binary: DWARF functions (fast scanner) merged with .symtab/.dynsym.

Naming, in order of preference:
1. the DIE's linkage name (or that of the declaration/abstract instance it refers to), demangled;
2. a mangled symbol-table name at the function's address (gcc leaves lambdas without a linkage name);
3. the DIE's enclosing scopes + DW_AT_name (C functions, `extern "C"`, anonymous-namespace helpers).
Symbol-table functions at addresses DWARF does not cover are added with file/line unknown, so a
binary without debug info still gets an index (`elf.has_dwarf` tells the caller which kind it got).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from strobe.symbols import cache
from strobe.symbols.demangle import Demangled, demangle, is_cold_part
from strobe.symbols.dwarf_scan import ScannedFunction, scan_dwarf
from strobe.symbols.elf import (
    SECTION_ERRORS,
    ElfInfo,
    ElfSymbol,
    elf_info,
    function_symbols,
    open_elf,
    read_dwarf_sections,
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


@dataclass(frozen=True)
class FunctionIndex:
    elf: ElfInfo
    functions: tuple[FunctionInfo, ...]  # sorted by address, one entry per (address, name)
    _by_address: dict[int, FunctionInfo] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_address: dict[int, FunctionInfo] = {}
        for function in self.functions:
            if not function.inlined_only:
                by_address.setdefault(function.address, function)
        object.__setattr__(self, "_by_address", by_address)

    def by_address(self, address: int) -> FunctionInfo | None:
        """The function whose static low_pc is exactly `address`."""
        return self._by_address.get(address)


def build_index(path: str | Path) -> FunctionIndex:
    """Index `path` from scratch (no cache). Raises ValidationError for a missing or non-ELF file."""
    with open_elf(path) as elf:
        info = elf_info(elf, path)
        try:
            symbols = function_symbols(elf)
        except SECTION_ERRORS as exc:
            log.warning("cannot read the symbol tables of %s (%s)", path, exc)
            symbols = []
        scanned: list[ScannedFunction] = []
        if info.has_dwarf:
            try:
                sections = read_dwarf_sections(elf)
            except SECTION_ERRORS as exc:
                log.warning("cannot read the DWARF sections of %s (%s); indexing its symbol table only", path, exc)
            else:
                scanned = scan_dwarf(sections)
    return FunctionIndex(info, merge(scanned, symbols))


def load_index(path: str | Path, cache_dir: Path) -> FunctionIndex:
    """The index of `path`, from cache_dir/symbols.db when this build (build id, else path+size+mtime)
    was indexed before, otherwise built and stored. Safe from several threads and processes at once."""
    with open_elf(path) as elf:
        info = elf_info(elf, path)
    key = cache.cache_key(info.build_id, path)
    with cache.key_lock(cache_dir, key):
        rows = cache.fetch(cache_dir, key)
        if rows is not None:
            return FunctionIndex(info, tuple(FunctionInfo(*row) for row in rows))
        index = build_index(path)
        if index.elf.build_id == info.build_id:  # the file was not replaced while we were reading it
            cache.store(cache_dir, key, [_row(function) for function in index.functions])
        return index


def _row(f: FunctionInfo) -> cache.Row:
    return (f.name, f.raw, f.signature, f.address, f.size, f.file, f.line, f.inlined_only, f.params)


def merge(scanned: Iterable[ScannedFunction], symbols: Iterable[ElfSymbol]) -> tuple[FunctionInfo, ...]:
    """DWARF functions named per the module docstring, plus symbol-table functions DWARF lacks."""
    symbols_at: dict[int, list[str]] = {}
    sizes: dict[int, int] = {}
    for symbol in symbols:
        if is_cold_part(symbol.name):
            continue
        names = symbols_at.setdefault(symbol.address, [])
        if symbol.name not in names:
            names.append(symbol.name)
        sizes[symbol.address] = max(sizes.get(symbol.address, 0), symbol.size)
    result: dict[tuple[int, str], FunctionInfo] = {}
    covered: set[int] = set()
    demangler = _Demangler()
    for function in scanned:
        names = symbols_at.get(function.address, []) if not function.inlined_only else []
        info = _from_dwarf(function, names, demangler)
        if info is None:
            continue
        result.setdefault((info.address, info.name), info)
        if not function.inlined_only:
            covered.add(function.address)
    for address, names in symbols_at.items():
        if address in covered:
            continue
        for raw in names:
            name, signature = demangler(raw, None, None)
            info = FunctionInfo(name, raw, signature, address, sizes[address], None, None, False, 0)
            result.setdefault((address, name), info)
    return tuple(sorted(result.values(), key=lambda f: (f.address, f.name, f.signature)))


class _Demangler:
    """`demangle` with a memory: template and inline functions repeat in every unit that uses them."""

    def __init__(self) -> None:
        self.seen: dict[tuple[str, bool | None, str | None], Demangled] = {}

    def __call__(self, raw: str, rust: bool | None, dwarf_name: str | None) -> Demangled:
        key = (raw, rust, dwarf_name if rust else None)  # only legacy Rust names use DW_AT_name
        found = self.seen.get(key)
        if found is None:
            found = self.seen[key] = demangle(raw, rust=rust, dwarf_name=key[2])
        return found


def _from_dwarf(function: ScannedFunction, symbol_names: list[str], demangler: _Demangler) -> FunctionInfo | None:
    raw = function.linkage
    if raw is None:
        raw = next((s for s in symbol_names if s.startswith(("_Z", "_R"))), None)
    if raw is not None:
        name, signature = demangler(raw, function.rust, function.name)
    elif function.qualified is not None:
        name = signature = function.qualified
        plain = function.name
        raw = plain if plain in symbol_names or not symbol_names else symbol_names[0]
    elif symbol_names:
        raw = symbol_names[0]
        name, signature = demangler(raw, function.rust, None)
    else:
        return None
    return FunctionInfo(
        name=name,
        raw=raw or name,
        signature=signature,
        address=function.address,
        size=function.size,
        file=function.file,
        line=function.line,
        inlined_only=function.inlined_only,
        params=function.params,
    )
