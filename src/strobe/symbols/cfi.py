"""Call frame information (.eh_frame, else .debug_frame) of one ELF file: at a static code address, how to find the
frame's canonical frame address (CFA) and its caller's registers — for stepping out of a function and for unwinding
a stopped thread's stack (symbols/frame_walk.py).

    cfa_rule("/path/to/app", 0x1239)          # -> (6, 16): the CFA is rbp + 16 there
    unwind_rule("/path/to/app", 0x1239).saved  # -> {16: -8, 6: -16}: where the caller's registers are, from the CFA
    has_unwind_info("/path/to/app", 0x1239)   # an FDE covers it: code the walk can step through

On x86-64 the return address is stored at CFA - 8 and the caller's stack pointer is the CFA. The compilers' CFI is
exact at every instruction (prologue and epilogue included), so a frame's CFA is known with or without a frame
pointer: gcc and clang -O0 code (rbp-based) and Rust debug builds (rsp-based) alike. What is not followed: a CFA or a
saved register given by a DWARF expression (PLT entries, signal frames) — the CFA's register is then None, and such
registers are in `lost`.

The entries are parsed with pyelftools once per file (tens of ms for a small program, ~0.3 s for libc), kept for the
16 files most recently asked about (symbols/per_file.py); each FDE's rows are decoded the first time an address needs
them. A binary with no call frame information of its own (no .eh_frame) has its separate debug file's .debug_frame
read (symbols/debug_files.py).
"""

from __future__ import annotations

import bisect
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from elftools.common.exceptions import DWARFError, ELFError
from elftools.construct.core import ConstructError
from elftools.dwarf.callframe import FDE, RegisterRule
from elftools.dwarf.constants import DW_CFA

from strobe.errors import ValidationError
from strobe.symbols import debug_files
from strobe.symbols.debug_files import PerDebugFile
from strobe.symbols.dwarf_forms import DECODE_ERRORS
from strobe.symbols.elf import SECTION_ERRORS, open_elf

log = logging.getLogger(__name__)

RETURN_ADDRESS = 16  # the x86-64 DWARF column of the return address
RETURN_ADDRESS_OFFSET = 8  # x86-64: the call pushed it just below the CFA
_MAX_FILES = 16  # a backtrace's modules: the program, libc, a few libraries
_CFI_ERRORS = (ELFError, *SECTION_ERRORS, *DECODE_ERRORS, DWARFError, ConstructError, ValidationError, OSError)


@dataclass(frozen=True, slots=True)
class UnwindRule:
    """The CFI row covering one code address: where the frame's CFA is and where its caller's registers are kept."""

    cfa_register: int | None  # DWARF register number; None: the CFA is a DWARF expression (not followed)
    cfa_offset: int
    saved: dict[int, int] = field(default_factory=dict)  # register -> CFA offset of the caller's value
    lost: frozenset[int] = frozenset()  # registers whose caller's value is given some other way (not followed)
    outermost: bool = False  # the return address is undefined: the last frame of the stack


class _FrameTable:
    """The FDEs of one file, sorted by start; each decoded into its rows the first time an address needs it."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.starts: list[int] = []
        self.entries: list[tuple[int, int, Any]] = []  # (start, end, FDE)
        self.rows: dict[int, list[dict[Any, Any]]] = {}
        try:
            with open_elf(path) as elf:
                if elf.has_dwarf_info():
                    dwarf = elf.get_dwarf_info(relocate_dwarf_sections=False)
                    source = dwarf.EH_CFI_entries() if dwarf.has_EH_CFI() else (
                        dwarf.CFI_entries() if dwarf.has_CFI() else [])
                    self.entries = _fdes(source)
            if not self.entries:  # none in the binary: its separate debug file's .debug_frame (never its .eh_frame,
                found = debug_files.locate(path)  # NOBITS there like every loaded section)
                if found.separate and found.path is not None:
                    with open_elf(found.path) as debug:
                        frame = debug.get_section_by_name(".debug_frame")
                        if frame is not None and frame["sh_type"] != "SHT_NOBITS":
                            dwarf = debug.get_dwarf_info(relocate_dwarf_sections=False)
                            self.entries = _fdes(dwarf.CFI_entries() if dwarf.has_CFI() else [])
        except _CFI_ERRORS as exc:  # nothing can be unwound through this file
            log.info("no call frame information read from %s: %s", path, exc)
        self.entries.sort(key=lambda e: e[0])
        self.starts = [e[0] for e in self.entries]

    def entry(self, address: int) -> tuple[int, int, Any] | None:
        i = bisect.bisect_right(self.starts, address) - 1
        return self.entries[i] if i >= 0 and address < self.entries[i][1] else None

    def rule(self, address: int) -> UnwindRule | None:
        entry = self.entry(address)
        if entry is None:
            return None
        start, _, fde = entry
        with self.lock:
            rows = self.rows.get(start)
            if rows is None:
                rows = self.rows[start] = self._decode(fde)
        row = None
        for candidate in rows:
            if candidate["pc"] > address:
                break
            row = candidate
        if row is None:
            return None
        return _rule(row, int(fde.cie["return_address_register"]) if fde.cie is not None else RETURN_ADDRESS)

    def _decode(self, fde: Any) -> list[dict[Any, Any]]:
        try:
            # pyelftools (0.33) does not decode DW_CFA_GNU_args_size (gcc's and rustc's code with landing pads has
            # it); it says how many bytes of arguments are pushed at a call, nothing about the CFA or the saved
            # registers: it is dropped.
            fde.instructions = [i for i in fde.instructions if i.opcode != DW_CFA.GNU_args_size]
            return list(fde.get_decoded().table)
        except (*_CFI_ERRORS, KeyError) as exc:  # a malformed FDE: as if there were none
            log.info("%s: an unreadable frame description entry: %s", self.path, exc)
            return []


def _fdes(source: Any) -> list[tuple[int, int, Any]]:
    return [(int(e["initial_location"]), int(e["initial_location"] + e["address_range"]), e)
            for e in source if isinstance(e, FDE)]


def _rule(row: dict[Any, Any], return_register: int) -> UnwindRule:
    cfa = row["cfa"]
    saved: dict[int, int] = {}
    lost: set[int] = set()
    outermost = False
    for register, rule in row.items():
        if not isinstance(register, int):
            continue
        if rule.type == RegisterRule.OFFSET:
            saved[register] = int(rule.arg)
        elif rule.type == RegisterRule.UNDEFINED:
            lost.add(register)
            outermost = outermost or register == return_register
        elif rule.type != RegisterRule.SAME_VALUE:
            lost.add(register)
    if return_register != RETURN_ADDRESS and return_register in saved:
        saved[RETURN_ADDRESS] = saved.pop(return_register)
    if cfa.expr is not None or cfa.reg is None:
        return UnwindRule(None, 0, saved, frozenset(lost), outermost)
    return UnwindRule(int(cfa.reg), int(cfa.offset), saved, frozenset(lost), outermost)


def unwind_rule(path: str, address: int) -> UnwindRule | None:
    """The CFI rule at the static code address `address` of `path`; None when no FDE covers it."""
    table = _TABLES.get(path)
    return None if table is None else table.rule(address)


def cfa_rule(path: str, address: int) -> tuple[int, int] | None:
    """(DWARF register number, offset): the CFA at the static address `address` of `path` is that register's value
    plus the offset. None when no entry covers the address, or its rule is not register + offset."""
    rule = unwind_rule(path, address)
    return None if rule is None or rule.cfa_register is None else (rule.cfa_register, rule.cfa_offset)


def has_unwind_info(path: str, address: int) -> bool:
    """Whether an FDE of `path` covers the static address: code with call frame information."""
    table = _TABLES.get(path)
    return table is not None and table.entry(address) is not None


_TABLES: PerDebugFile[_FrameTable] = PerDebugFile(_FrameTable, _MAX_FILES)
