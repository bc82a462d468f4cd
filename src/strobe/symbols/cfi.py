"""Where a function's frame starts, from the call frame information (.eh_frame, else .debug_frame) of an ELF file:
the rule that gives the canonical frame address (CFA) at a static code address.

    cfa_rule("/path/to/app", 0x1239)   # -> (6, 16): the CFA is rbp + 16 there

On x86-64 the return address is stored at CFA - 8 and the caller's stack pointer is the CFA: with the registers
of a stopped thread this gives its return address exactly, where unwinding through the stub of a trap cannot.
Only register + offset rules are answered (None for a DWARF expression rule, or no entry covering the address).
The entries are decoded once per file (path, size, mtime) and kept for the 8 files most recently asked about.
"""

from __future__ import annotations

import bisect
import logging
import threading
from typing import Any

from elftools.common.exceptions import ELFError

from strobe.symbols.elf import SECTION_ERRORS, open_elf
from strobe.symbols.per_file import PerFile

log = logging.getLogger(__name__)

RETURN_ADDRESS_OFFSET = 8  # x86-64: the call pushed it just below the CFA
_MAX_FILES = 8


class _FrameTable:
    """The FDEs of one file, sorted by start; each decoded into its rows the first time an address needs it."""

    def __init__(self, path: str) -> None:
        self.lock = threading.Lock()
        self.starts: list[int] = []
        self.entries: list[tuple[int, int, Any]] = []  # (start, end, FDE)
        self.rows: dict[int, list[tuple[int, tuple[int, int] | None]]] = {}
        try:
            with open_elf(path) as elf:
                if not elf.has_dwarf_info():
                    return
                dwarf = elf.get_dwarf_info()
                source = dwarf.EH_CFI_entries() if dwarf.has_EH_CFI() else (
                    dwarf.CFI_entries() if dwarf.has_CFI() else [])
                for entry in source:
                    header = getattr(entry, "header", None)
                    if header is None or "initial_location" not in header:
                        continue  # a CIE or a terminator
                    start = int(header["initial_location"])
                    self.entries.append((start, start + int(header["address_range"]), entry))
        except (ELFError, *SECTION_ERRORS, ValueError) as exc:
            log.info("no call frame information read from %s: %s", path, exc)
        self.entries.sort(key=lambda e: e[0])
        self.starts = [e[0] for e in self.entries]

    def rule(self, address: int) -> tuple[int, int] | None:
        i = bisect.bisect_right(self.starts, address) - 1
        if i < 0 or address >= self.entries[i][1]:
            return None
        with self.lock:
            rows = self.rows.get(i)
            if rows is None:
                rows = self.rows[i] = _decode(self.entries[i][2])
        j = bisect.bisect_right([pc for pc, _ in rows], address) - 1
        return rows[j][1] if j >= 0 else None


def _decode(fde: Any) -> list[tuple[int, tuple[int, int] | None]]:
    out: list[tuple[int, tuple[int, int] | None]] = []
    try:
        for row in fde.get_decoded().table:
            cfa = row.get("cfa")
            rule = (int(cfa.reg), int(cfa.offset)) if cfa is not None and cfa.expr is None and cfa.reg is not None \
                else None
            out.append((int(row["pc"]), rule))
    except (ELFError, *SECTION_ERRORS, ValueError, KeyError) as exc:
        log.info("an unreadable frame description entry: %s", exc)
    return out


def cfa_rule(path: str, address: int) -> tuple[int, int] | None:
    """(DWARF register number, offset): the CFA at the static address `address` of `path` is that register's value
    plus the offset. None when no entry covers the address, or its rule is not register + offset."""
    table = _TABLES.get(path)
    return None if table is None else table.rule(address)


_TABLES: PerFile[_FrameTable] = PerFile(_FrameTable, _MAX_FILES)
