"""Source locations of static code addresses, for symbolizing crash backtraces.

    locate("/path/to/app", 0x1149)   # -> SourceLocation(function="process_command", file="/src/app.c", line=21)

`address` is static: as in the file, before the loader relocated it (subtract the module's load bias first).
Callers symbolizing a backtrace must subtract 1 from every *return* address (every frame but the crashing
one) before calling: a return address points at the instruction after the call, which may belong to the
next line or even the next function. This module does not adjust anything.

What a SourceLocation holds:
- `function`: the out-of-line function whose [low_pc, high_pc) contains the address, from the project's
  function index (strobe.symbols.index), named as the index names it ("geo::Box<int>::get"). When no
  indexed function covers the address, the ELF symbol table is tried (that finds e.g. `foo.cold`, the
  cold part of a hot/cold split function, named "foo"). None when neither covers it.
- `file`, `line`: the .debug_line row of the address, found in the line program of the compile unit
  covering it (looked up in .debug_aranges, else in the unit DIEs' DW_AT_low_pc/high_pc/DW_AT_ranges).
  For code inlined into the function they are those of the inlined code (as `addr2line` prints them
  without -i). `file` is joined with the line table's directory and DW_AT_comp_dir the way
  strobe.symbols.dwarf_lines does it, so it is absolute when they are. Both are None when no row holds
  the address, or when its row has line 0 (code no source line accounts for: its file register means
  nothing then). A line without a file happens only when the row's file index is not in the table.
- `inlined_into`: not computed (always None); inline frames are not reported.

Nothing is read until the first call for a file; then the file's DWARF sections are kept, and each compile
unit's line program is decoded the first time an address needs it. Everything is cached per file (path,
size, mtime, and its separate debug file: symbols/debug_files.py), and locate() is safe to call from several
threads. This module puts the parts together: the
range tables and their readers are in strobe.symbols.code_ranges, the line-program decoder in
strobe.symbols.dwarf_line_rows.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from strobe.errors import ValidationError
from strobe.symbols import debug_files
from strobe.symbols.code_ranges import Ranges, code_ranges, read_aranges, section_data, unit_ranges
from strobe.symbols.debug_files import PerDebugFile
from strobe.symbols.demangle import demangle
from strobe.symbols.dwarf_forms import (
    DECODE_ERRORS,
    TAG_COMPILE_UNIT,
    TAG_PARTIAL_UNIT,
    AbbrevDecl,
    parse_abbrev_table,
    read_uleb,
)
from strobe.symbols.dwarf_line_rows import END_OF_SEQUENCE, LineRows, decode_line_rows
from strobe.symbols.dwarf_lines import line_table_files
from strobe.symbols.dwarf_scan import list_units
from strobe.symbols.dwarf_unit import DwarfSections, Unit
from strobe.symbols.elf import SECTION_ERRORS, SymbolTable, read_dwarf_sections, read_symbol_table
from strobe.symbols.index import FunctionIndex, build_index

log = logging.getLogger(__name__)

_LineRows, _decode_line_rows = LineRows, decode_line_rows  # as tests/symbols/test_addresses.py imports them


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """Where a code address is: its function and its line-table row (see the module docstring)."""

    function: str | None  # demangled qualified name without parameters: "geo::Box<int>::get", "crash_worker"
    file: str | None  # absolute when the line table gives a directory
    line: int | None
    inlined_into: str | None = None  # not computed: always None
    function_start: int | None = None  # the function's static low_pc (its symbol's address without DWARF)


def locate(path: str, address: int) -> SourceLocation | None:
    """The function, source file and line of the static code address `address` of the ELF file `path`.

    None when the file cannot be read (missing, not ELF, damaged); a SourceLocation with None fields for
    whatever is unknown at that address (no function there, no line information). Return addresses of a
    backtrace must be decremented by 1 by the caller (see the module docstring)."""
    binary = _binary(path)
    return None if binary is None else binary.locate(address)


@dataclass(frozen=True)
class LineSites:
    """Where a source line's code starts in one ELF file (line_sites): `files` the file names of its line tables
    that `file` named; `addresses` (static) the first address of each run of rows of the line in them (each copy:
    a loop's condition, an inlined body, a template instance); when there is none, `next_lines`: the next lines of
    that file that have code (a breakpoint there would stop at the next statement)."""

    files: tuple[str, ...]
    addresses: tuple[int, ...]
    next_lines: tuple[int, ...] = ()


def line_sites(path: str, file: str, line: int) -> LineSites | None:
    """The code of `file`:`line` in the ELF file `path` (`file`: absolute, a path suffix 'src/a.c' or a base name).
    None when the file cannot be read. Every compile unit's line program is decoded (cached with the file)."""
    binary = _binary(path)
    return None if binary is None else binary.line_sites(file, line)


@dataclass(frozen=True)
class StepLines:
    """What a step from a static address needs of its function's line rows (step_lines): the function's bounds,
    the address's (file, line), `stops` the first address of each run of rows of another line (or of line 0
    excluded: code no line accounts for) in the function, and `line_code` the ranges of the function's code that
    belong to the address's line."""

    function_start: int
    function_end: int
    line: int | None
    stops: tuple[int, ...]
    line_code: tuple[tuple[int, int], ...]


def step_lines(path: str, address: int) -> StepLines | None:
    """The lines around the static code address `address` of the ELF file `path`, for a step; None when no indexed
    function with line rows covers it."""
    binary = _binary(path)
    return None if binary is None else binary.step_lines(address)


def line_code_ranges(path: str) -> list[tuple[int, int]]:
    """The static code ranges of `path` that line tables describe (its compile units'), merged; [] without any."""
    binary = _binary(path)
    return [] if binary is None else binary.line_code_ranges()


def _names_file(name: str | None, wanted: str) -> bool:
    if name is None:
        return False
    if os.path.isabs(wanted):
        return os.path.normpath(name) == os.path.normpath(wanted)
    return name == wanted or name.endswith("/" + wanted.lstrip("./"))


# --- per-file cache --------------------------------------------------------------------------------

_MAX_BINARIES = 16  # the files most recently asked about stay cached (each keeps its DWARF sections)


def _binary(path: str | Path) -> _Binary | None:
    """The shared _Binary of `path` (a new one when the file or its separate debug file changed since), None if it
    does not exist.
    Nothing is read here: the first locate() of the _Binary reads the file, under the _Binary's own lock."""
    return _BINARIES.get(path)


# --- one binary ------------------------------------------------------------------------------------


class _Binary:
    """What locate() keeps of one ELF file: its DWARF sections, function index and decoded line programs."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.readable: bool | None = None  # None until _load() ran
        self.code: list[tuple[int, int]] = []  # the executable sections
        self.sections: DwarfSections | None = None
        self.aranges_data = b""
        self.symbols = SymbolTable([])
        self._index: FunctionIndex | None = None
        self._functions: Ranges | None = None
        self._symbol_ranges: Ranges | None = None
        self._aranges: Ranges | None = None
        self._unit_ranges: Ranges | None = None
        self._abbrevs: dict[int, dict[int, AbbrevDecl]] = {}
        self._rows: dict[int, LineRows | None] = {}  # unit offset -> its line rows (None: none readable)

    def locate(self, address: int) -> SourceLocation | None:
        """See locate(); None when the file cannot be read."""
        with self.lock:
            if self.readable is None:
                self.readable = self._load()
            if not self.readable:
                return None
            function, start = self._function(address)
            found = self._line(address)
        file, line = found if found is not None else (None, None)
        return SourceLocation(function, file, line, function_start=start)

    def _load(self) -> bool:
        """Read the executable sections' ranges, the DWARF sections and the symbol tables; False if the
        file is not a readable ELF file. Damaged DWARF or symbol tables only leave those parts out."""
        try:
            with debug_files.open_dwarf_elf(self.path) as (elf, dwarf_elf):
                self.code = code_ranges(elf)  # a separate debug file's code sections are NOBITS: the binary's
                try:
                    self.sections = read_dwarf_sections(dwarf_elf)
                    self.aranges_data = section_data(dwarf_elf, ".debug_aranges")
                except SECTION_ERRORS as exc:
                    log.warning("cannot read the DWARF sections of %s (%s): no source lines", self.path, exc)
                    self.sections, self.aranges_data = None, b""
                try:
                    self.symbols = read_symbol_table(elf, dwarf_elf)
                except SECTION_ERRORS as exc:
                    log.warning("cannot read the symbol tables of %s (%s)", self.path, exc)
        except (ValidationError, *SECTION_ERRORS) as exc:
            log.info("cannot symbolize addresses of %s: %s", self.path, exc)
            return False
        return True

    # --- functions -------------------------------------------------------------------------------
    def _function(self, address: int) -> tuple[str | None, int | None]:
        """The name and start of the function containing `address`."""
        if self._functions is None:
            self._functions = self._function_map()
        found = self._functions.covering(address)
        if found:
            assert self._index is not None
            return self._index.function(found[0][2]).name, found[0][0]
        found = self._symbol_map().covering(address)
        return (demangle(self.symbols.name(found[0][2])).name, found[0][0]) if found else (None, None)

    def _function_map(self) -> Ranges:
        """Ranges of the indexed functions with a known size (inline-only entries left out)."""
        try:
            self._index = build_index(self.path)
        except ValidationError as exc:  # replaced or removed since _load()
            log.warning("cannot index the functions of %s: %s", self.path, exc)
            return Ranges(())
        table = self._index.table
        starts = np.asarray(table.addresses, dtype=np.uint64).tolist()
        sizes = np.asarray(table.sizes, dtype=np.int64).tolist()
        inlined = np.asarray(table.inlined, dtype=bool).tolist()
        return Ranges(
            (start, start + size, i)
            for i, (start, size, only) in enumerate(zip(starts, sizes, inlined, strict=True))
            if start and size > 0 and not only
        )

    def _symbol_map(self) -> Ranges:
        """Ranges of the symbol-table functions. A symbol without a size (assembly without `.size`, crt code)
        is taken to reach the next function start, within its executable section."""
        if self._symbol_ranges is None:
            assert self._functions is not None
            symbols = self.symbols
            starts, sizes = symbols.addresses.tolist(), symbols.sizes.tolist()
            known = sorted({*starts, *self._functions.starts.tolist()})
            ranges: list[tuple[int, int, int]] = []
            for i, (start, size) in enumerate(zip(starts, sizes, strict=True)):
                if size > 0:
                    ranges.append((start, start + size, i))
                    continue
                section_end = next((high for low, high in self.code if low <= start < high), None)
                if section_end is None:
                    continue
                after = bisect.bisect_right(known, start)
                end = min(known[after], section_end) if after < len(known) else section_end
                ranges.append((start, end, i))
            self._symbol_ranges = Ranges(ranges)
        return self._symbol_ranges

    # --- lines -----------------------------------------------------------------------------------
    def line_sites(self, wanted: str, line: int) -> LineSites | None:
        """See line_sites()."""
        with self.lock:
            if self.readable is None:
                self.readable = self._load()
            if not self.readable or self.sections is None or not self.sections.line:
                return None
            files: set[str] = set()
            addresses: list[int] = []
            with_code: set[int] = set()
            for unit in list_units(self.sections)[0]:
                rows = self._unit_rows(unit.offset)
                if rows is None:
                    continue
                matching = {i for i, name in enumerate(rows.names) if _names_file(name, wanted)}
                if not matching:
                    continue
                files.update(str(rows.names[i]) for i in matching)
                previous: tuple[int, int] | None = None
                for address, fi, row_line in zip(rows.addresses, rows.files, rows.lines, strict=True):
                    key = (fi, row_line)
                    if fi in matching and row_line > 0:
                        with_code.add(row_line)
                        if row_line == line and key != previous:
                            addresses.append(address)
                    previous = None if fi == END_OF_SEQUENCE else key
        next_lines = tuple(sorted(n for n in with_code if n > line)[:3]) if not addresses else ()
        return LineSites(tuple(sorted(files)), tuple(sorted(set(addresses))), next_lines)

    def step_lines(self, address: int) -> StepLines | None:
        """See step_lines()."""
        with self.lock:
            if self.readable is None:
                self.readable = self._load()
            if not self.readable:
                return None
            if self._functions is None:
                self._functions = self._function_map()
            covering = self._functions.covering(address)
            rows = self._rows_at(address)
            if not covering or rows is None:
                return None
            start, end, _ = covering[0]
        here = rows.find(address)
        key = _row_key(rows, bisect.bisect_right(rows.addresses, address) - 1) if here else None
        stops: list[int] = []
        line_code: list[tuple[int, int]] = []
        previous: tuple[int, int] | None = None
        first = bisect.bisect_left(rows.addresses, start)
        for i in range(first, len(rows.addresses)):
            at = rows.addresses[i]
            if at >= end:
                break
            row = _row_key(rows, i)
            row_end = min(rows.addresses[i + 1] if i + 1 < len(rows.addresses) else end, end)
            if row is not None and row == key:
                line_code.append((at, row_end))
            elif row is not None and row != previous and row[1] > 0:
                stops.append(at)
            previous = row
        return StepLines(start, end, here[1] if here else None, tuple(stops), tuple(line_code))

    def line_code_ranges(self) -> list[tuple[int, int]]:
        """See line_code_ranges()."""
        with self.lock:
            if self.readable is None:
                self.readable = self._load()
            if not self.readable or self.sections is None or not self.sections.line:
                return []
            ranges = self._aranges_map()
            found = sorted(zip(ranges.starts.tolist(), ranges.ends.tolist(), strict=True)) if len(ranges) else []
            if not found:
                units = self._unit_map()
                found = sorted(zip(units.starts.tolist(), units.ends.tolist(), strict=True))
        merged: list[tuple[int, int]] = []
        for low, high in found:
            if merged and low <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(high, merged[-1][1]))
            else:
                merged.append((int(low), int(high)))
        return merged

    def _rows_at(self, address: int) -> LineRows | None:
        """The line rows of the compile unit covering `address`."""
        if self.sections is None or not self.sections.line:
            return None
        for source in (self._aranges_map, self._unit_map):
            for _, _, unit_offset in source().covering(address):
                rows = self._unit_rows(unit_offset)
                if rows is not None and rows.find(address) is not None:
                    return rows
        return None

    def _line(self, address: int) -> tuple[str | None, int | None] | None:
        if self.sections is None or not self.sections.line:
            return None
        tried: set[int] = set()
        for source in (self._aranges_map, self._unit_map):
            for _, _, unit_offset in source().covering(address):
                if unit_offset in tried:
                    continue
                tried.add(unit_offset)
                rows = self._unit_rows(unit_offset)
                found = rows.find(address) if rows is not None else None
                if found is not None:
                    return found
        return None

    def _aranges_map(self) -> Ranges:
        if self._aranges is None:
            try:
                self._aranges = Ranges(read_aranges(self.aranges_data))
            except DECODE_ERRORS as exc:
                log.warning("unreadable .debug_aranges in %s (%r)", self.path, exc)
                self._aranges = Ranges(())
        return self._aranges

    def _unit_map(self) -> Ranges:
        """Code ranges of every compile unit, from the unit DIEs: for units .debug_aranges misses."""
        if self._unit_ranges is None:
            assert self.sections is not None
            ranges: list[tuple[int, int, int]] = []
            for unit in list_units(self.sections)[0]:
                try:
                    ranges.extend((start, end, unit.offset) for start, end in self._read_unit(unit)[1])
                except DECODE_ERRORS as exc:
                    log.debug("skipping the unit at .debug_info+0x%x of %s (%r)", unit.offset, self.path, exc)
            self._unit_ranges = Ranges(ranges)
        return self._unit_ranges

    def _read_unit(self, unit: Unit) -> tuple[bool, list[tuple[int, int]]]:
        """Read the unit DIE into `unit` (comp_dir, stmt_list, bases); return whether it is a compile or
        partial unit, and its code ranges."""
        assert self.sections is not None
        decls = self._abbrevs.get(unit.abbrev_offset)
        if decls is None:
            decls = self._abbrevs[unit.abbrev_offset] = parse_abbrev_table(self.sections.abbrev, unit.abbrev_offset)
        code, start = read_uleb(self.sections.info, unit.die_start)
        decl = decls.get(code)
        if decl is None or decl.tag not in (TAG_COMPILE_UNIT, TAG_PARTIAL_UNIT):
            return False, []
        unit.read_unit_die(decl, start)
        return True, unit_ranges(unit, decl, start)

    def _unit_rows(self, unit_offset: int) -> LineRows | None:
        if unit_offset in self._rows:
            return self._rows[unit_offset]
        assert self.sections is not None
        rows: LineRows | None = None
        try:
            unit = Unit(self.sections, unit_offset)
            is_unit, _ = self._read_unit(unit)
            if is_unit and unit.stmt_list is not None:
                names = _file_names(unit, unit.stmt_list)
                addresses, files, lines = decode_line_rows(self.sections.line, unit.stmt_list, self.code)
                rows = LineRows(addresses, files, lines, names)
        except DECODE_ERRORS as exc:
            log.warning("unreadable line program of the unit at .debug_info+0x%x of %s (%r)",
                        unit_offset, self.path, exc)
        self._rows[unit_offset] = rows
        return rows


_BINARIES: PerDebugFile[_Binary] = PerDebugFile(_Binary, _MAX_BINARIES)


def _row_key(rows: LineRows, i: int) -> tuple[int, int] | None:
    """(file, line) of row `i`; None for an end of sequence."""
    return None if i < 0 or rows.files[i] == END_OF_SEQUENCE else (rows.files[i], rows.lines[i])


def _file_names(unit: Unit, stmt_list: int) -> list[str | None]:
    """The line table's file names, indexed like its file register; [] when the header is unreadable
    (the rows still give lines)."""
    try:
        return line_table_files(unit, stmt_list)
    except DECODE_ERRORS:
        return []
