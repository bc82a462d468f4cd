"""The function index of one binary: DWARF functions (fast scanner) merged with .symtab/.dynsym.

Naming, in order of preference:
1. the DIE's linkage name (or that of the declaration/abstract instance it refers to), demangled;
2. a mangled symbol-table name at the function's address (gcc leaves lambdas without a linkage name);
3. the DIE's enclosing scopes + DW_AT_name (C functions, `extern "C"`, anonymous-namespace helpers).
Symbol-table functions at addresses DWARF does not cover are added with file/line unknown, so a
binary without debug info still gets an index (`elf.has_dwarf` tells the caller which kind it got).

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
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import compress
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from strobe.symbols import cache, dwarf_worker
from strobe.symbols.cache import NO_LINE, FunctionTable, int_column
from strobe.symbols.demangle import Demangled, demangle, demangle_cxx_names, is_cold_part
from strobe.symbols.dwarf_scan import DwarfScan, Row
from strobe.symbols.dwarf_unit import DwarfSections, Unit
from strobe.symbols.elf import (
    SECTION_ERRORS,
    ElfInfo,
    SymbolTable,
    elf_info,
    open_elf,
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
    without building anything; `match(regex)` returns the functions whose name the regex fully matches."""

    elf: ElfInfo
    table: FunctionTable = field(repr=False)

    @classmethod
    def from_functions(cls, elf: ElfInfo, functions: Iterable[FunctionInfo]) -> FunctionIndex:
        """An index of functions given in the order they should be listed."""
        rows = [
            (f.name, f.raw, f.signature, f.address, f.size, f.file, f.line, f.inlined_only, f.params)
            for f in functions
        ]
        return cls(elf, FunctionTable.from_rows(rows))

    @cached_property
    def functions(self) -> tuple[FunctionInfo, ...]:
        return tuple(map(FunctionInfo, *self.table.columns()))

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
        hits = self.matching(pattern)
        built = self.__dict__.get("functions")
        if built is not None:
            return [built[i] for i in hits]
        return list(map(FunctionInfo, *self.table.columns(hits)))

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


# --- building ------------------------------------------------------------------------------------


def build_index(path: str | Path) -> FunctionIndex:
    """Index `path` from scratch (no cache). Raises ValidationError for a missing or non-ELF file."""
    with _collector_paused():
        with open_elf(path) as elf:
            info = elf_info(elf, path)
            try:
                symbols = read_symbol_table(elf)
            except SECTION_ERRORS as exc:
                log.warning("cannot read the symbol tables of %s (%s)", path, exc)
                symbols = SymbolTable([])
            sections: DwarfSections | None = None
            if info.has_dwarf:
                try:
                    sections = read_dwarf_sections(elf)
                except SECTION_ERRORS as exc:
                    log.warning("cannot read the DWARF sections of %s (%s); indexing its symbol table only", path, exc)
        names = SymbolNames(symbols)
        demangler = Demangler()
        parts: list[Part] = []
        if sections is not None and sections.info and sections.abbrev:
            parts = dwarf_worker.scan_parts(path, sections, names, demangler)
        table = assemble(parts, names, demangler)
    return FunctionIndex(info, table)


def load_index(path: str | Path, cache_dir: Path) -> FunctionIndex:
    """The index of `path`, from cache_dir/symbols.db when this build (build id, else path+size+mtime)
    was indexed before, otherwise built and stored. Safe from several threads and processes at once."""
    with open_elf(path) as elf:
        info = elf_info(elf, path)
    key = cache.cache_key(info.build_id, path)
    with cache.key_lock(cache_dir, key):
        table = cache.fetch(cache_dir, key)
        if table is not None:
            return FunctionIndex(info, table)
        index = build_index(path)
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


# --- naming --------------------------------------------------------------------------------------


class Demangler:
    """`demangle` with a memory: template and inline functions repeat in every unit that uses them."""

    def __init__(self) -> None:
        self.cxx: dict[str, tuple[str, str]] = {}  # units that are not Rust: (name, signature)
        self.guess: dict[str, Demangled] = {}  # symbol-table names: the language is guessed
        self.rust: dict[tuple[str, str | None], Demangled] = {}  # Rust units: DW_AT_name restores generics

    def __call__(self, raw: str, rust: bool | None, dwarf_name: str | None) -> Demangled:
        if rust is None:
            found = self.guess.get(raw)
            if found is None:
                found = self.guess[raw] = demangle(raw, rust=None)
        elif not rust:
            cxx = self.cxx.get(raw)
            if cxx is None:
                cxx = self.cxx[raw] = demangle(raw, rust=False)
            return Demangled(*cxx)
        else:
            found = self.rust.get((raw, dwarf_name))
            if found is None:
                found = self.rust[(raw, dwarf_name)] = demangle(raw, rust=True, dwarf_name=dwarf_name)
        return found


class SymbolNames:
    """The symbol-table names at each address (`.cold` parts left out, each name once, symbol order) and
    the largest symbol size there; names are decoded only for the addresses asked about."""

    def __init__(self, table: SymbolTable) -> None:
        self.table = table
        keep = np.ones(len(table), dtype=bool)
        for i in table.containing(b".cold").tolist():
            if is_cold_part(table.name(i)):
                keep[i] = False
        kept = np.flatnonzero(keep)
        order = np.argsort(table.addresses[kept], kind="stable")
        self.order = kept[order]  # symbol indices by address, symbol order within an address
        self.addresses = table.addresses[self.order]
        starts = np.flatnonzero(np.r_[True, self.addresses[1:] != self.addresses[:-1]]) if len(kept) else \
            np.zeros(0, dtype=np.intp)
        self.unique = self.addresses[starts]
        self.starts = starts
        self.ends = np.r_[starts[1:], len(kept)].astype(np.intp) if len(kept) else starts
        self.sizes = np.maximum.reduceat(table.sizes[self.order], starts) if len(kept) else \
            np.zeros(0, dtype=np.uint64)

    def names_of_group(self, group: int) -> list[str]:
        names: list[str] = []
        for i in self.order[self.starts[group] : self.ends[group]].tolist():
            name = self.table.name(i)
            if name not in names:
                names.append(name)
        return names

    def at(self, addresses: Iterable[int]) -> dict[int, list[str]]:
        """{address: names} for those of `addresses` that have symbols."""
        wanted = np.unique(np.fromiter(addresses, dtype=np.uint64))
        groups = np.searchsorted(self.unique, wanted)
        found = groups < len(self.unique)
        found[found] = self.unique[groups[found]] == wanted[found]
        return {
            address: self.names_of_group(group)
            for address, group in zip(wanted[found].tolist(), groups[found].tolist(), strict=True)
        }


class NamedRows(NamedTuple):
    """Scanned functions after naming, in scan order. `names[i]` is None for a function with no name at
    all (it is left out); `keys[i]` (linkage or qualified name) with `files`/`lines` identifies it."""

    names: list[str | None]
    raws: list[str | None]
    signatures: list[str | None]
    addresses: list[int]
    sizes: list[int]
    files: list[str | None]
    lines: list[Any]
    params: list[int]
    keys: list[str | None]


class Part(NamedTuple):
    """The functions of a run of units: concrete ones, and inline-only candidates (see DwarfScan.rows)."""

    concrete: NamedRows
    candidates: NamedRows
    crossing: bool
    failed_units: int


def index_part(
    sections: DwarfSections, units: list[Unit], span: tuple[int, int], address_size: int,
    symbols: SymbolNames, demangler: Demangler,
) -> Part:
    scan = DwarfScan(sections, span).run(units)
    concrete, candidates = scan.rows(address_size)
    # An inline-only function needs a DW_AT_name or a linkage name to be listed (dwarf_scan.combine).
    candidates = [row for row in candidates if row[2] or row[4]]
    return Part(name_rows(concrete, symbols, demangler), name_rows(candidates, symbols, demangler),
                scan.crossing, scan.failed_units)


def name_rows(rows: list[Row], symbols: SymbolNames, demangler: Demangler) -> NamedRows:
    """Name scanned functions per the module docstring."""
    count = len(rows)
    if not count:
        return NamedRows([], [], [], [], [], [], [], [], [])
    columns = map(list, zip(*rows, strict=True))  # rows to columns
    addresses, sizes, plains, qualifieds, linkages, files, lines, params, inlined, rusts, _ = columns
    keys: list[str | None] = [linkage or qualified for linkage, qualified in zip(linkages, qualifieds, strict=True)]
    # C++ linkage names in one batch (not remembered: a concrete function's linkage name rarely repeats).
    plain_cxx = [i for i, (linkage, rust) in enumerate(zip(linkages, rusts, strict=True)) if linkage is not None
                 and not rust]
    cxx_names, cxx_signatures = demangle_cxx_names([linkages[i] for i in plain_cxx])
    need_symbols: list[int] = []
    names: list[str | None]
    signatures: list[str | None]
    if len(plain_cxx) == count:
        names, signatures = list(cxx_names), list(cxx_signatures)
    else:
        names, signatures = [None] * count, [None] * count
        for i, name, signature in zip(plain_cxx, cxx_names, cxx_signatures, strict=True):
            names[i] = name
            signatures[i] = signature
        for i, (linkage, rust) in enumerate(zip(linkages, rusts, strict=True)):
            if linkage is None:
                need_symbols.append(i)
            elif rust:
                names[i], signatures[i] = demangler(linkage, True, plains[i])
    raws: list[str | None] = [
        linkage or name if linkage is not None else None for linkage, name in zip(linkages, names, strict=True)
    ]
    if need_symbols:
        at = symbols.at(addresses[i] for i in need_symbols if not inlined[i])
        for i in need_symbols:
            symbol_names = at.get(addresses[i], []) if not inlined[i] else []
            raw = next((s for s in symbol_names if s.startswith(("_Z", "_R"))), None)
            if raw is not None:
                name, signature = demangler(raw, rusts[i], plains[i])
            elif qualifieds[i] is not None:
                name = signature = qualifieds[i]
                plain = plains[i]
                raw = plain if plain in symbol_names or not symbol_names else symbol_names[0]
            elif symbol_names:
                raw = symbol_names[0]
                name, signature = demangler(raw, rusts[i], None)
            else:
                continue
            names[i], raws[i], signatures[i] = name, raw or name, signature
    return NamedRows(names, raws, signatures, addresses, sizes, files, lines, params, keys)


# --- assembling ----------------------------------------------------------------------------------


def assemble(parts: list[Part], symbols: SymbolNames, demangler: Demangler) -> FunctionTable:
    """Concrete functions of every part, inline-only ones not seen among them, symbol-table functions at
    addresses DWARF does not cover; one entry per (address, name), the first; sorted by (address, name,
    signature)."""
    entries = _Entries()
    for part in parts:
        entries.add(part.concrete, inlined=False)
    candidates = [part.candidates for part in parts if part.candidates.names]
    if candidates:
        seen = {
            (key, file, line)
            for part in parts
            for key, file, line in zip(part.concrete.keys, part.concrete.files, part.concrete.lines, strict=True)
        }
        for rows in candidates:
            accepted = []
            for i, key in enumerate(zip(rows.keys, rows.files, rows.lines, strict=True)):
                if key not in seen:
                    seen.add(key)
                    accepted.append(i)
            entries.add(_select(rows, accepted), inlined=True)
    covered = np.array(entries.covered, dtype=np.uint64)
    if len(symbols.unique):
        uncovered = np.flatnonzero(~_contains(np.sort(covered), symbols.unique))
        addresses, sizes = symbols.unique[uncovered].tolist(), symbols.sizes[uncovered].tolist()
        for group, address, size in zip(uncovered.tolist(), addresses, sizes, strict=True):
            for raw in symbols.names_of_group(group):
                name, signature = demangler(raw, None, None)
                entries.append(name, raw, signature, address, size)
    return entries.table()


def _select(rows: NamedRows, picked: list[int]) -> NamedRows:
    return NamedRows._make([column[i] for i in picked] for column in rows)


class _Entries:
    """Index entries in insertion order, before de-duplication and sorting."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.raws: list[str] = []
        self.signatures: list[str] = []
        self.addresses: list[int] = []
        self.sizes: list[Any] = []
        self.files: list[str | None] = []
        self.lines: list[Any] = []
        self.inlined: list[bool] = []
        self.params: list[int] = []
        self.covered: list[int] = []

    def add(self, rows: NamedRows, *, inlined: bool) -> None:
        """Named rows (those without a name are left out)."""
        if rows.names.count(None):
            rows = _select(rows, [i for i, name in enumerate(rows.names) if name is not None])
        self.names += rows.names  # type: ignore[arg-type]
        self.raws += rows.raws  # type: ignore[arg-type]
        self.signatures += rows.signatures  # type: ignore[arg-type]
        self.addresses += rows.addresses
        self.sizes += rows.sizes
        self.files += rows.files
        self.lines += rows.lines
        self.inlined += [inlined] * len(rows.names)
        self.params += rows.params
        if not inlined:
            self.covered += rows.addresses

    def append(self, name: str, raw: str, signature: str, address: int, size: int) -> None:
        """A symbol-table function (no file, line or parameters)."""
        self.names.append(name)
        self.raws.append(raw)
        self.signatures.append(signature)
        self.addresses.append(address)
        self.sizes.append(size)
        self.files.append(None)
        self.lines.append(None)
        self.inlined.append(False)
        self.params.append(0)

    def table(self) -> FunctionTable:
        order = self._order()
        files: dict[str | None, int] = {None: 0}
        for file in dict.fromkeys(self.files):
            files.setdefault(file, len(files))
        file_ids = np.fromiter(map(files.__getitem__, self.files), dtype=np.int32, count=len(self.files))
        picks = np.array(order, dtype=np.intp)
        return FunctionTable(
            _pick(self.names, order), _pick(self.raws, order), _pick(self.signatures, order),
            _reorder(int_column(self.addresses, np.uint64), picks), _reorder(_ints(self.sizes, 0), picks),
            list(files), file_ids[picks], _reorder(_ints(self.lines, NO_LINE), picks),
            np.array(self.inlined, dtype=bool)[picks], _reorder(int_column(self.params), picks),
            sorted_by_address=True,
        )

    def _order(self) -> list[int]:
        """Positions of the entries to keep, sorted by (address, name, signature); of entries with the
        same address and name, the first added."""
        count = len(self.names)
        if not count:
            return []
        addresses = int_column(self.addresses, np.uint64)
        if not isinstance(addresses, np.ndarray):
            keep: dict[tuple[int, str], int] = {}
            for i, (address, name) in enumerate(zip(self.addresses, self.names, strict=True)):
                keep.setdefault((address, name), i)
            return sorted(keep.values(), key=lambda i: (self.addresses[i], self.names[i], self.signatures[i]))
        by_address = np.argsort(addresses, kind="stable")
        ordered = addresses[by_address]
        starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
        lengths = np.diff(np.r_[starts, count])
        positions: list[int] = by_address.tolist()
        shared = np.flatnonzero(lengths > 1)
        if not len(shared):
            return positions
        result: list[int] = []
        done = 0
        names, signatures = self.names, self.signatures
        for start, length in zip(starts[shared].tolist(), lengths[shared].tolist(), strict=True):
            result += positions[done:start]
            first: dict[str, int] = {}
            for i in positions[start : start + length]:  # insertion order: stable sort
                first.setdefault(names[i], i)
            result += sorted(first.values(), key=lambda i: (names[i], signatures[i]))
            done = start + length
        result += positions[done:]
        return result


def _ints(values: list[Any], missing: int) -> np.ndarray | list[int]:
    """A column of sizes or lines. Only malformed DWARF gives a value that is not an int (a string, a
    block...): it counts as missing, like None."""
    if values.count(None):
        values = [missing if value is None else value for value in values]
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return int_column([value if isinstance(value, int) else missing for value in values])


def _contains(ordered: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Which of `values` are in the sorted array `ordered` (np.isin hashes: slower here)."""
    if not len(ordered):
        return np.zeros(len(values), dtype=bool)
    at = np.searchsorted(ordered, values)
    found: np.ndarray = (at < len(ordered)) & (ordered[np.minimum(at, len(ordered) - 1)] == values)
    return found


def _pick(values: list[Any], order: list[int]) -> list[Any]:
    if len(order) > 1:
        return list(itemgetter(*order)(values))
    return [values[i] for i in order]


def _reorder(column: np.ndarray | list[int], order: np.ndarray) -> np.ndarray | list[int]:
    if isinstance(column, np.ndarray):
        picked: np.ndarray = column[order]
        return picked
    return [column[i] for i in order.tolist()]
