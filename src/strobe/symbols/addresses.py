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
size, mtime), and locate() is safe to call from several threads.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from elftools.elf.elffile import ELFFile

from strobe.errors import ValidationError
from strobe.symbols.demangle import demangle
from strobe.symbols.dwarf_dies import range_list
from strobe.symbols.dwarf_forms import (
    AT_HIGH_PC,
    AT_LOW_PC,
    AT_RANGES,
    DECODE_ERRORS,
    FORM_ADDR,
    FORM_ADDRX,
    FORM_ADDRX1,
    FORM_ADDRX2,
    FORM_ADDRX3,
    FORM_ADDRX4,
    FORM_GNU_ADDR_INDEX,
    FORM_RNGLISTX,
    TAG_COMPILE_UNIT,
    TAG_PARTIAL_UNIT,
    AbbrevDecl,
    initial_length,
    parse_abbrev_table,
    read_sleb,
    read_uint,
    read_uleb,
    u16,
)
from strobe.symbols.dwarf_lines import line_table_files
from strobe.symbols.dwarf_scan import list_units
from strobe.symbols.dwarf_unit import DwarfSections, Unit
from strobe.symbols.elf import SECTION_ERRORS, SymbolTable, open_elf, read_dwarf_sections, read_symbol_table
from strobe.symbols.index import FunctionIndex, build_index

log = logging.getLogger(__name__)

_ADDRESS_FORMS = frozenset({FORM_ADDR, FORM_ADDRX, FORM_ADDRX1, FORM_ADDRX2, FORM_ADDRX3, FORM_ADDRX4,
                            FORM_GNU_ADDR_INDEX})
_SHF_ALLOC = 0x2
_SHF_EXECINSTR = 0x4
_PF_X = 0x1
_END = -1  # the file column of a row that ends a sequence


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


# --- per-file cache --------------------------------------------------------------------------------

_MAX_BINARIES = 16  # the files most recently asked about stay cached (each keeps its DWARF sections)
_BINARIES: OrderedDict[tuple[str, int, int], _Binary] = OrderedDict()
_BINARIES_LOCK = threading.Lock()


def _binary(path: str | Path) -> _Binary | None:
    """The shared _Binary of `path` (a new one when the file changed since), None if it does not exist.
    Nothing is read here: the first locate() of the _Binary reads the file, under the _Binary's own lock."""
    resolved = os.path.realpath(path)
    try:
        stat = os.stat(resolved)
    except OSError:
        return None
    key = (resolved, stat.st_size, stat.st_mtime_ns)
    with _BINARIES_LOCK:
        binary = _BINARIES.get(key)
        if binary is None:
            for old in [k for k in _BINARIES if k[0] == resolved]:
                del _BINARIES[old]
            binary = _BINARIES[key] = _Binary(resolved)
            while len(_BINARIES) > _MAX_BINARIES:
                _BINARIES.popitem(last=False)
        else:
            _BINARIES.move_to_end(key)
        return binary


# --- address ranges --------------------------------------------------------------------------------


class _Ranges:
    """Half-open address ranges [start, end) carrying an integer value; they may overlap or nest."""

    def __init__(self, ranges: Iterable[tuple[int, int, int]]) -> None:
        kept = [(start, end, value) for start, end, value in ranges if 0 <= start < end < 2**64]
        kept.sort(key=lambda r: r[0])
        self.starts = np.array([r[0] for r in kept], dtype=np.uint64)
        self.ends = np.array([r[1] for r in kept], dtype=np.uint64)
        self.values = [r[2] for r in kept]

    def __len__(self) -> int:
        return len(self.values)

    def covering(self, address: int) -> list[tuple[int, int, int]]:
        """(start, end, value) of every range containing `address`, innermost (greatest start) first;
        ranges with equal starts in the order they were given."""
        if not 0 <= address < 2**64 or not self.values:
            return []
        key = np.uint64(address)
        below = int(np.searchsorted(self.starts, key, side="right"))
        hits: list[int] = np.flatnonzero(self.ends[:below] > key).tolist()
        found = [(int(self.starts[i]), i) for i in hits]
        found.sort(key=lambda hit: (-hit[0], hit[1]))
        return [(start, int(self.ends[i]), self.values[i]) for start, i in found]


# --- line programs ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _LineRows:
    """The rows of one line program, sorted by address: a row holds from its address up to the next row's.
    A row whose file is _END closes a sequence: the addresses from it to the next row have no line."""

    addresses: list[int]
    files: list[int]  # file register values (DWARF 5: from 0, else from 1), _END for an end of sequence
    lines: list[int]
    names: list[str | None]  # file register value -> absolute file name

    def find(self, address: int) -> tuple[str | None, int | None] | None:
        """(file, line) of the row holding `address` ((None, None) for a line-0 row), None if no row holds it."""
        i = bisect.bisect_right(self.addresses, address) - 1
        if i < 0 or self.files[i] == _END:
            return None
        file, line = self.files[i], self.lines[i]
        if line <= 0:
            return None, None
        return (self.names[file] if file < len(self.names) else None), line


@dataclass(slots=True)
class _Sequence:
    start: int
    end: int
    addresses: list[int]
    files: list[int]
    lines: list[int]


def _decode_line_rows(
    data: bytes, offset: int, code: Sequence[tuple[int, int]]
) -> tuple[list[int], list[int], list[int]]:
    """Run the line-number program at `offset` of .debug_line (DWARF 2-5, little-endian) and return its rows
    as (addresses, files, lines) sorted by address, with one _END row closing each sequence.

    Of several rows at one address the last is kept (as addr2line and llvm-symbolizer do). Sequences that do
    not start in one of the `code` ranges (the executable sections) are dropped: the linker leaves the line
    programs of discarded functions in place, relocated to 0 or to a tombstone address."""
    length, pos, offset_size = initial_length(data, offset)
    end = pos + length
    version = u16(data, pos)
    pos += 2
    if not 2 <= version <= 5:
        raise ValueError(f"line program at .debug_line+0x{offset:x} has unknown version {version}")
    if version >= 5:
        pos += 2  # address_size, segment_selector_size
    header_length = read_uint(data, pos, offset_size)
    pos += offset_size
    program = pos + header_length
    min_length = data[pos]
    max_ops = 1
    pos += 1
    if version >= 4:
        max_ops = data[pos] or 1
        pos += 1
    pos += 1  # default_is_stmt: not needed to look lines up
    line_base = data[pos] - 256 if data[pos] >= 0x80 else data[pos]
    line_range = data[pos + 1]
    opcode_base = data[pos + 2]
    arg_counts = data[pos + 3 : pos + 3 + max(opcode_base - 1, 0)]
    if line_range == 0:
        raise ValueError(f"line program at .debug_line+0x{offset:x} has line_range 0")
    if end > len(data):
        raise ValueError(f"line program at .debug_line+0x{offset:x} runs past the section")

    sequences: list[_Sequence] = []
    addresses: list[int] = []
    files: list[int] = []
    lines: list[int] = []
    address = op_index = 0
    file, line = 1, 1
    const_add = (255 - opcode_base) // line_range
    pos = program
    while pos < end:
        opcode = data[pos]
        pos += 1
        if opcode >= opcode_base:  # special opcode: advance address and line, append a row
            adjusted = opcode - opcode_base
            advance = adjusted // line_range
            if max_ops == 1:
                address += min_length * advance
            else:
                address += min_length * ((op_index + advance) // max_ops)
                op_index = (op_index + advance) % max_ops
            line += line_base + adjusted % line_range
            addresses.append(address)
            files.append(file)
            lines.append(line)
        elif opcode == 0:  # extended opcode
            size, pos = read_uleb(data, pos)
            if size == 0:
                continue
            sub = data[pos]
            if sub == 1:  # DW_LNE_end_sequence
                _close(sequences, addresses, files, lines, address, code)
                addresses, files, lines = [], [], []
                address = op_index = 0
                file, line = 1, 1
            elif sub == 2:  # DW_LNE_set_address
                address = read_uint(data, pos + 1, size - 1)
                op_index = 0
            pos += size  # DW_LNE_define_file, set_discriminator and vendor opcodes: skipped
        elif opcode == 1:  # DW_LNS_copy
            addresses.append(address)
            files.append(file)
            lines.append(line)
        elif opcode == 2:  # DW_LNS_advance_pc
            advance, pos = read_uleb(data, pos)
            if max_ops == 1:
                address += min_length * advance
            else:
                address += min_length * ((op_index + advance) // max_ops)
                op_index = (op_index + advance) % max_ops
        elif opcode == 3:  # DW_LNS_advance_line
            delta, pos = read_sleb(data, pos)
            line += delta
        elif opcode == 4:  # DW_LNS_set_file
            file, pos = read_uleb(data, pos)
        elif opcode == 8:  # DW_LNS_const_add_pc
            if max_ops == 1:
                address += min_length * const_add
            else:
                address += min_length * ((op_index + const_add) // max_ops)
                op_index = (op_index + const_add) % max_ops
        elif opcode == 9:  # DW_LNS_fixed_advance_pc
            address += u16(data, pos)
            op_index = 0
            pos += 2
        else:  # set_column, negate_stmt, basic_block, prologue_end, epilogue_begin, set_isa, unknown
            for _ in range(arg_counts[opcode - 1] if opcode - 1 < len(arg_counts) else 0):
                _, pos = read_uleb(data, pos)
    return _merge(sequences)


def _close(sequences: list[_Sequence], addresses: list[int], files: list[int], lines: list[int], end: int,
           code: Sequence[tuple[int, int]]) -> None:
    """Finish the sequence whose rows were collected, ending at `end`; keep it if it starts in code."""
    if not addresses or addresses[0] >= end:
        return
    start = addresses[0]
    if not any(low <= start < high for low, high in code):
        return
    last = len(addresses) - 1
    picked = [i for i, at in enumerate(addresses) if at < end and (i == last or addresses[i + 1] != at)]
    sequences.append(_Sequence(
        start, end, [addresses[i] for i in picked], [files[i] for i in picked], [lines[i] for i in picked]
    ))


def _merge(sequences: list[_Sequence]) -> tuple[list[int], list[int], list[int]]:
    """The rows of all sequences in address order, each sequence followed by its _END row. A sequence
    starting where another ends comes after that one's _END row, so its first row wins the lookup."""
    sequences.sort(key=lambda s: (s.start, s.end))
    addresses: list[int] = []
    files: list[int] = []
    lines: list[int] = []
    for seq in sequences:
        if addresses and seq.start < addresses[-1]:  # overlaps the previous sequence: cut that one short
            while addresses and addresses[-1] >= seq.start:
                addresses.pop()
                files.pop()
                lines.pop()
            addresses.append(seq.start)
            files.append(_END)
            lines.append(0)
        addresses.extend(seq.addresses)
        files.extend(seq.files)
        lines.extend(seq.lines)
        addresses.append(seq.end)
        files.append(_END)
        lines.append(0)
    return addresses, files, lines


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
        self._functions: _Ranges | None = None
        self._symbol_ranges: _Ranges | None = None
        self._aranges: _Ranges | None = None
        self._unit_ranges: _Ranges | None = None
        self._abbrevs: dict[int, dict[int, AbbrevDecl]] = {}
        self._rows: dict[int, _LineRows | None] = {}  # unit offset -> its line rows (None: none readable)

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
            with open_elf(self.path) as elf:
                self.code = _code_ranges(elf)
                try:
                    self.sections = read_dwarf_sections(elf)
                    self.aranges_data = _section_data(elf, ".debug_aranges")
                except SECTION_ERRORS as exc:
                    log.warning("cannot read the DWARF sections of %s (%s): no source lines", self.path, exc)
                    self.sections, self.aranges_data = None, b""
                try:
                    self.symbols = read_symbol_table(elf)
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

    def _function_map(self) -> _Ranges:
        """Ranges of the indexed functions with a known size (inline-only entries left out)."""
        try:
            self._index = build_index(self.path)
        except ValidationError as exc:  # replaced or removed since _load()
            log.warning("cannot index the functions of %s: %s", self.path, exc)
            return _Ranges(())
        table = self._index.table
        starts = np.asarray(table.addresses, dtype=np.uint64).tolist()
        sizes = np.asarray(table.sizes, dtype=np.int64).tolist()
        inlined = np.asarray(table.inlined, dtype=bool).tolist()
        return _Ranges(
            (start, start + size, i)
            for i, (start, size, only) in enumerate(zip(starts, sizes, inlined, strict=True))
            if start and size > 0 and not only
        )

    def _symbol_map(self) -> _Ranges:
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
            self._symbol_ranges = _Ranges(ranges)
        return self._symbol_ranges

    # --- lines -----------------------------------------------------------------------------------
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

    def _aranges_map(self) -> _Ranges:
        if self._aranges is None:
            try:
                self._aranges = _Ranges(_read_aranges(self.aranges_data))
            except DECODE_ERRORS as exc:
                log.warning("unreadable .debug_aranges in %s (%r)", self.path, exc)
                self._aranges = _Ranges(())
        return self._aranges

    def _unit_map(self) -> _Ranges:
        """Code ranges of every compile unit, from the unit DIEs: for units .debug_aranges misses."""
        if self._unit_ranges is None:
            assert self.sections is not None
            ranges: list[tuple[int, int, int]] = []
            for unit in list_units(self.sections)[0]:
                try:
                    ranges.extend((start, end, unit.offset) for start, end in self._read_unit(unit)[1])
                except DECODE_ERRORS as exc:
                    log.debug("skipping the unit at .debug_info+0x%x of %s (%r)", unit.offset, self.path, exc)
            self._unit_ranges = _Ranges(ranges)
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
        return True, _unit_ranges(unit, decl, start)

    def _unit_rows(self, unit_offset: int) -> _LineRows | None:
        if unit_offset in self._rows:
            return self._rows[unit_offset]
        assert self.sections is not None
        rows: _LineRows | None = None
        try:
            unit = Unit(self.sections, unit_offset)
            is_unit, _ = self._read_unit(unit)
            if is_unit and unit.stmt_list is not None:
                names = _file_names(unit, unit.stmt_list)
                addresses, files, lines = _decode_line_rows(self.sections.line, unit.stmt_list, self.code)
                rows = _LineRows(addresses, files, lines, names)
        except DECODE_ERRORS as exc:
            log.warning("unreadable line program of the unit at .debug_info+0x%x of %s (%r)",
                        unit_offset, self.path, exc)
        self._rows[unit_offset] = rows
        return rows


def _file_names(unit: Unit, stmt_list: int) -> list[str | None]:
    """The line table's file names, indexed like its file register; [] when the header is unreadable
    (the rows still give lines)."""
    try:
        return line_table_files(unit, stmt_list)
    except DECODE_ERRORS:
        return []


def _unit_ranges(unit: Unit, decl: AbbrevDecl, start: int) -> list[tuple[int, int]]:
    """The code ranges of a unit DIE (read_unit_die already ran: bases and base address are known)."""
    low: int | None = None
    high: int | None = None
    high_is_offset = False
    ranges: int | None = None
    ranges_is_index = False
    pos = start
    for attr, form, implicit in decl.attrs:
        value, pos = unit.read(pos, form, implicit)
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        if attr == AT_LOW_PC:
            low = value
        elif attr == AT_HIGH_PC:
            high, high_is_offset = value, form not in _ADDRESS_FORMS
        elif attr == AT_RANGES:
            ranges, ranges_is_index = value, form == FORM_RNGLISTX
    if ranges is not None:
        return range_list(unit, ranges, ranges_is_index)
    if low is not None and high is not None:
        end = low + high if high_is_offset else high
        return [(low, end)] if end > low else []
    return []


def _read_aranges(data: bytes) -> list[tuple[int, int, int]]:
    """(start, end, unit offset) of every address range listed in .debug_aranges (ranges at 0 dropped:
    discarded code)."""
    found: list[tuple[int, int, int]] = []
    offset = 0
    while offset + 16 <= len(data):
        length, pos, offset_size = initial_length(data, offset)
        end = pos + length
        if length == 0 or end > len(data):
            break
        pos += 2  # version
        unit_offset = read_uint(data, pos, offset_size)
        pos += offset_size
        address_size, segment_size = data[pos], data[pos + 1]
        pos += 2
        tuple_size = 2 * address_size + segment_size
        if address_size == 0 or segment_size:
            offset = end
            continue
        pos = offset + -(-(pos - offset) // tuple_size) * tuple_size  # tuples are aligned to their size
        while pos + tuple_size <= end:
            start = read_uint(data, pos, address_size)
            size = read_uint(data, pos + address_size, address_size)
            pos += tuple_size
            if start == 0 and size == 0:
                break
            if start:
                found.append((start, start + size, unit_offset))
        offset = end
    return found


def _code_ranges(elf: ELFFile) -> list[tuple[int, int]]:
    """Address ranges of the executable sections (of the executable segments without section headers)."""
    found = [
        (section["sh_addr"], section["sh_addr"] + section["sh_size"])
        for section in elf.iter_sections()
        if section["sh_flags"] & _SHF_ALLOC and section["sh_flags"] & _SHF_EXECINSTR and section["sh_size"]
    ]
    if not found:
        found = [
            (segment["p_vaddr"], segment["p_vaddr"] + segment["p_memsz"])
            for segment in elf.iter_segments("PT_LOAD")
            if segment["p_flags"] & _PF_X
        ]
    return found


def _section_data(elf: ELFFile, name: str) -> bytes:
    """Uncompressed bytes of a section (SHF_COMPRESSED handled by pyelftools), b"" when absent. Legacy
    .zdebug_aranges is not read: units are then found from their DIEs instead."""
    section: Any = elf.get_section_by_name(name)
    if section is None or section["sh_type"] == "SHT_NOBITS":
        return b""
    return bytes(section.data())
