"""Naming scanned functions and assembling the index table: DWARF rows demangled (C++ linkage names in
bulk), symbol-table names where DWARF has none, symbol-only functions added, one entry per (address, name),
sorted by (address, name, signature). The naming rules are those of index.py's docstring.

Work is done per `Part` (a run of units; see dwarf_worker), so several processes can name their parts;
`assemble` then combines the parts exactly as one pass over every unit would.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import itemgetter
from typing import Any, NamedTuple

import numpy as np

from strobe.symbols.cache import NO_LINE, FunctionTable, int_column
from strobe.symbols.demangle import Demangled, demangle, demangle_cxx_names, is_cold_part, looks_like_rust
from strobe.symbols.dwarf_scan import DwarfScan, Row
from strobe.symbols.dwarf_unit import DwarfSections, Unit
from strobe.symbols.elf import SymbolTable

# --- naming --------------------------------------------------------------------------------------


class Demangler:
    """`demangle` with a memory: template and inline functions repeat in every unit that uses them."""

    def __init__(self) -> None:
        self.cxx: dict[str, tuple[str, str]] = {}  # units that are not Rust: (name, signature)
        self.guess: dict[str, Demangled] = {}  # symbol-table names: the language is guessed
        self.rust: dict[tuple[str, str | None], Demangled] = {}  # Rust units: DW_AT_name restores generics

    def guess_many(self, raws: Iterable[str]) -> None:
        """Remember the symbol-table names `raws` in one go (a binary without DWARF has only those): C++
        ones in a batch, the rest (Rust-looking, C) one at a time."""
        todo = [raw for raw in dict.fromkeys(raws) if raw not in self.guess]
        cxx = [raw for raw in todo if raw.startswith("_Z") and not looks_like_rust(raw)]
        self.guess.update(
            (raw, Demangled(name, signature))
            for raw, name, signature in zip(cxx, *demangle_cxx_names(cxx), strict=True)
        )
        for raw in todo:
            if raw not in self.guess:
                self.guess[raw] = demangle(raw, rust=None)

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
        found_names = [at.get(addresses[i], []) if not inlined[i] else [] for i in need_symbols]
        mangled = [next((s for s in names_ if s.startswith(("_Z", "_R"))), None) for names_ in found_names]
        batch = list(dict.fromkeys(
            raw for i, raw in zip(need_symbols, mangled, strict=True)
            if raw is not None and not rusts[i] and raw not in demangler.cxx
        ))  # gcc's lambdas: named from the symbol table, demangled in one batch like linkage names
        demangler.cxx.update(zip(batch, zip(*demangle_cxx_names(batch), strict=True), strict=True))
        for i, symbol_names, raw in zip(need_symbols, found_names, mangled, strict=True):
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
        found = [symbols.names_of_group(group) for group in uncovered.tolist()]
        demangler.guess_many(raw for names in found for raw in names)
        for names, address, size in zip(found, addresses, sizes, strict=True):
            for raw in names:
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
