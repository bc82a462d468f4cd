"""ELF facts the symbol index needs: build id, image base, PIE-ness, DWARF sections and function symbols."""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

import numpy as np
from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from strobe.errors import ValidationError
from strobe.symbols.dwarf_unit import DwarfSections

ELF_MAGIC = b"\x7fELF"
STT_FUNC = 2
STT_GNU_IFUNC = 10
STB_LOCAL = 0
SHN_UNDEF = 0
# What a damaged section table or compressed section can raise while being read.
SECTION_ERRORS = (ELFError, zlib.error, struct.error, ValueError, EOFError)

_DWARF_SECTIONS = {
    "info": ".debug_info",
    "abbrev": ".debug_abbrev",
    "debug_str": ".debug_str",
    "line_str": ".debug_line_str",
    "str_offsets": ".debug_str_offsets",
    "addr": ".debug_addr",
    "line": ".debug_line",
    "ranges": ".debug_ranges",
    "rnglists": ".debug_rnglists",
}


@dataclass(frozen=True)
class ElfInfo:
    path: str
    build_id: str | None  # hex of NT_GNU_BUILD_ID, None if absent
    image_base: int  # lowest PT_LOAD p_vaddr rounded down to its alignment (0 for a typical PIE)
    is_pie: bool  # e_type == ET_DYN
    has_dwarf: bool  # a non-empty .debug_info (possibly compressed), in the file or in `debug_file`
    debug_file: str | None = None  # the separate debug file whose DWARF is used (symbols/debug_files.py)


class ElfSymbol(NamedTuple):
    name: str  # raw symbol name, version suffix (@GLIBC_…, @@VER) removed
    address: int
    size: int
    local: bool


@contextmanager
def open_elf(path: str | Path) -> Iterator[ELFFile]:
    """Open `path` as ELF, or raise ValidationError saying why it cannot be indexed."""
    target = Path(path)
    try:
        stream: BinaryIO = target.open("rb")
    except FileNotFoundError:
        raise ValidationError(f"Binary not found: {target}. Check the path (it must exist on this machine).") from None
    except IsADirectoryError:
        raise ValidationError(f"{target} is a directory, not an executable or shared library.") from None
    except OSError as exc:
        raise ValidationError(f"Cannot read {target}: {exc.strerror}. Check its permissions.") from None
    with stream:
        if stream.read(4) != ELF_MAGIC:
            raise ValidationError(
                f"{target} is not an ELF file (no \\x7fELF header). Point at a compiled executable or shared "
                "library, not a script or source file."
            )
        stream.seek(0)
        try:
            elf = ELFFile(stream)
        except (ELFError, struct.error, ValueError) as exc:
            raise ValidationError(f"{target} is a damaged ELF file ({exc}). Rebuild it and try again.") from None
        yield elf


def read_elf_info(path: str | Path) -> ElfInfo:
    with open_elf(path) as elf:
        return elf_info(elf, path)


def elf_info(elf: ELFFile, path: str | Path) -> ElfInfo:
    try:
        return ElfInfo(
            path=str(path),
            build_id=build_id_of(elf),
            image_base=_image_base(elf),
            is_pie=elf.header["e_type"] == "ET_DYN",
            has_dwarf=has_dwarf(elf),
        )
    except SECTION_ERRORS as exc:
        raise ValidationError(f"{path} is a damaged ELF file ({exc}). Rebuild it and try again.") from None


def build_id_of(elf: ELFFile) -> str | None:
    """The hex of the file's NT_GNU_BUILD_ID note, None if it has none."""
    sources: list[Any] = [s for s in elf.iter_sections() if s["sh_type"] == "SHT_NOTE"]
    if not sources:
        sources = list(elf.iter_segments("PT_NOTE"))
    for source in sources:
        try:
            for note in source.iter_notes():
                if note["n_type"] == "NT_GNU_BUILD_ID" and note["n_name"] == "GNU":
                    desc = note["n_desc"]
                    return desc if isinstance(desc, str) else bytes(desc).hex()
        except (ELFError, struct.error, ValueError):
            continue
    return None


def _image_base(elf: ELFFile) -> int:
    bases = []
    for segment in elf.iter_segments("PT_LOAD"):
        vaddr, align = segment["p_vaddr"], max(segment["p_align"], 1)
        if align & (align - 1) == 0:
            vaddr &= ~(align - 1)
        else:
            vaddr -= vaddr % 4096
        bases.append(vaddr)
    return min(bases, default=0)


def has_dwarf(elf: ELFFile) -> bool:
    """Whether the file itself holds a non-empty .debug_info (not a NOBITS one)."""
    for name in (".debug_info", ".zdebug_info"):
        section = elf.get_section_by_name(name)
        if section is not None and section["sh_type"] != "SHT_NOBITS" and section["sh_size"] > 0:
            return True
    return False


def read_dwarf_sections(elf: ELFFile) -> DwarfSections:
    """Uncompressed bytes of the DWARF sections the scanner reads (SHF_COMPRESSED and .zdebug_* alike)."""
    sections = DwarfSections()
    for attr, name in _DWARF_SECTIONS.items():
        setattr(sections, attr, _section_bytes(elf, name))
    return sections


def _section_bytes(elf: ELFFile, name: str) -> bytes:
    section = elf.get_section_by_name(name)
    if section is not None and section["sh_type"] != "SHT_NOBITS":
        return bytes(section.data())
    legacy = elf.get_section_by_name(".z" + name[1:])
    if legacy is None or legacy["sh_type"] == "SHT_NOBITS":
        return b""
    raw = bytes(legacy.data())
    if raw[:4] != b"ZLIB":
        return raw
    return zlib.decompress(raw[12:])


def function_symbols(elf: ELFFile) -> list[ElfSymbol]:
    """Defined FUNC/IFUNC symbols of .symtab and .dynsym, parsed straight from the tables."""
    table = read_symbol_table(elf)
    addresses, sizes, local = table.addresses.tolist(), table.sizes.tolist(), table.local.tolist()
    return [ElfSymbol(table.name(i), addresses[i], sizes[i], local[i]) for i in range(len(table))]


class SymbolTable:
    """Defined FUNC/IFUNC symbols with a non-empty name, .symtab first then .dynsym, as numpy columns;
    names are decoded (and their @VERSION suffix removed) only when asked for."""

    def __init__(self, parts: list[tuple[bytes, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]) -> None:
        # parts: (string table, name offsets, addresses, sizes, local flags) per symbol table
        self._strtabs = [part[0] for part in parts]
        self.table = np.concatenate([np.full(len(part[1]), i, dtype=np.uint8) for i, part in enumerate(parts)] or
                                    [np.zeros(0, np.uint8)])
        self.name_offsets = np.concatenate([part[1] for part in parts] or [np.zeros(0, np.uint64)])
        self.addresses = np.concatenate([part[2] for part in parts] or [np.zeros(0, np.uint64)])
        self.sizes = np.concatenate([part[3] for part in parts] or [np.zeros(0, np.uint64)])
        self.local = np.concatenate([part[4] for part in parts] or [np.zeros(0, bool)])
        self._lists: tuple[list[int], list[int]] | None = None  # table and name_offsets, for name()

    def __len__(self) -> int:
        return len(self.addresses)

    def name(self, i: int) -> str:
        if self._lists is None:
            self._lists = (self.table.tolist(), self.name_offsets.tolist())
        strtab = self._strtabs[self._lists[0][i]]
        start = self._lists[1][i]
        end = strtab.find(b"\0", start)
        name = strtab[start : end if end >= 0 else len(strtab)].decode("utf-8", "replace")
        at = name.find("@")
        return name[:at] if at > 0 else name

    def containing(self, needle: bytes) -> np.ndarray:
        """Indices of the symbols whose raw name (version suffix included) contains `needle`."""
        found: list[np.ndarray] = []
        for number, strtab in enumerate(self._strtabs):
            hits = [match.start() for match in re.finditer(re.escape(needle), strtab)]
            if not hits:
                continue
            mine = np.flatnonzero(self.table == number)
            starts = self.name_offsets[mine]
            nul = np.flatnonzero(np.frombuffer(strtab, dtype=np.uint8) == 0).astype(np.uint64)
            at = np.searchsorted(nul, starts)
            ends = nul[np.minimum(at, len(nul) - 1)] if len(nul) else np.zeros(len(starts), np.uint64)
            ends = np.where(at < len(nul), ends, np.uint64(len(strtab)))
            positions = np.array(hits, dtype=np.uint64)
            first = np.searchsorted(positions, starts)  # the first occurrence at or after each name's start
            occurrence = positions[np.minimum(first, len(positions) - 1)]
            inside = (first < len(positions)) & (occurrence + np.uint64(len(needle)) <= ends)
            found.append(mine[inside])
        return np.concatenate(found) if found else np.zeros(0, dtype=np.intp)


def read_symbol_table(elf: ELFFile, debug: ELFFile | None = None) -> SymbolTable:
    """Defined FUNC/IFUNC symbols of .symtab and .dynsym (see SymbolTable). `debug`: the binary's separate debug
    file, whose .symtab is read when the binary has none (strip --strip-all keeps only .dynsym)."""
    is64 = elf.elfclass == 64
    order = "<" if elf.little_endian else ">"
    if is64:
        layout = np.dtype([("name", order + "u4"), ("info", "u1"), ("other", "u1"), ("shndx", order + "u2"),
                           ("value", order + "u8"), ("size", order + "u8")])
    else:
        layout = np.dtype([("name", order + "u4"), ("value", order + "u4"), ("size", order + "u4"),
                           ("info", "u1"), ("other", "u1"), ("shndx", order + "u2")])
    parts = []
    sources = [(elf, ".symtab"), (elf, ".dynsym")]
    if debug is not None and debug is not elf and not _has_section(elf, ".symtab"):
        sources[0] = (debug, ".symtab")
    for owner, table_name in sources:
        table = owner.get_section_by_name(table_name)
        if table is None or table["sh_type"] == "SHT_NOBITS" or table["sh_entsize"] != layout.itemsize:
            continue
        strtab = bytes(owner.get_section(table["sh_link"]).data())
        data = bytes(table.data())
        entries = np.frombuffer(data, dtype=layout, count=len(data) // layout.itemsize)
        kind = entries["info"] & 0xF
        keep = (kind == STT_FUNC) | (kind == STT_GNU_IFUNC)
        keep &= (entries["shndx"] != SHN_UNDEF) & (entries["value"] != 0)
        names = entries["name"].astype(np.uint64)
        in_range = names < len(strtab)
        keep &= in_range
        if len(strtab):
            first_bytes = np.frombuffer(strtab, dtype=np.uint8)[np.minimum(names, len(strtab) - 1).astype(np.intp)]
            keep &= first_bytes != 0  # an empty name
        kept = entries[keep]
        parts.append((strtab, names[keep], kept["value"].astype(np.uint64), kept["size"].astype(np.uint64),
                      (kept["info"] >> 4) == STB_LOCAL))
    return SymbolTable(parts)


def _has_section(elf: ELFFile, name: str) -> bool:
    section = elf.get_section_by_name(name)
    return section is not None and section["sh_type"] != "SHT_NOBITS"


def read_loaded_bytes(path: str | Path, address: int, size: int) -> bytes:
    """The `size` bytes of the ELF file `path` that its loader maps at the static address `address` (what the code
    there was before anything patched it); fewer when the segment's file part ends sooner, b"" outside them."""
    with open_elf(path) as elf:
        for segment in elf.iter_segments():
            start, filesz = segment["p_vaddr"], segment["p_filesz"]
            if segment["p_type"] == "PT_LOAD" and start <= address < start + filesz:
                stream = elf.stream
                stream.seek(segment["p_offset"] + address - start)
                return bytes(stream.read(min(size, start + filesz - address)))
    return b""
