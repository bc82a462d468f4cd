"""Code address ranges and what covers them: compile units, functions, executable sections.

    units = Ranges(read_aranges(section_data(elf, ".debug_aranges")))   # (start, end, unit offset)
    units.covering(0x1149)   # -> [(0x1129, 0x11a0, 0x2d)]: innermost first
    code_ranges(elf)         # -> [(0x1040, 0x1215)]: the executable sections

Ranges is a lookup table of half-open [start, end) ranges carrying an integer value (a unit offset, a
function's index); ranges may overlap or nest, and ones outside [0, 2**64) or empty are dropped. The readers
give the ranges from their sources: read_aranges() the .debug_aranges tuples (ranges at address 0 dropped:
discarded code), unit_ranges() a unit DIE's DW_AT_low_pc/high_pc or DW_AT_ranges, code_ranges() the ELF's
executable sections (its executable segments when it has no section headers). Nothing here is cached.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
from elftools.elf.elffile import ELFFile

from strobe.symbols.dwarf_dies import range_list
from strobe.symbols.dwarf_forms import (
    ADDRESS_FORMS,
    AT_HIGH_PC,
    AT_LOW_PC,
    AT_RANGES,
    FORM_RNGLISTX,
    AbbrevDecl,
    initial_length,
    read_uint,
)
from strobe.symbols.dwarf_unit import Unit

_SHF_ALLOC = 0x2
_SHF_EXECINSTR = 0x4
_PF_X = 0x1


class Ranges:
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


def unit_ranges(unit: Unit, decl: AbbrevDecl, start: int) -> list[tuple[int, int]]:
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
            high, high_is_offset = value, form not in ADDRESS_FORMS
        elif attr == AT_RANGES:
            ranges, ranges_is_index = value, form == FORM_RNGLISTX
    if ranges is not None:
        return range_list(unit, ranges, ranges_is_index)
    if low is not None and high is not None:
        end = low + high if high_is_offset else high
        return [(low, end)] if end > low else []
    return []


def read_aranges(data: bytes) -> list[tuple[int, int, int]]:
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


def code_ranges(elf: ELFFile) -> list[tuple[int, int]]:
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


def section_data(elf: ELFFile, name: str) -> bytes:
    """Uncompressed bytes of a section (SHF_COMPRESSED handled by pyelftools), b"" when absent. Legacy
    .zdebug_aranges is not read: units are then found from their DIEs instead."""
    section: Any = elf.get_section_by_name(name)
    if section is None or section["sh_type"] == "SHT_NOBITS":
        return b""
    return bytes(section.data())
