"""ELF facts the symbol index needs: build id, image base, PIE-ness, DWARF sections and function symbols."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, NamedTuple

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
    has_dwarf: bool  # a non-empty .debug_info (possibly compressed)


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
            build_id=_build_id(elf),
            image_base=_image_base(elf),
            is_pie=elf.header["e_type"] == "ET_DYN",
            has_dwarf=_has_dwarf(elf),
        )
    except SECTION_ERRORS as exc:
        raise ValidationError(f"{path} is a damaged ELF file ({exc}). Rebuild it and try again.") from None


def _build_id(elf: ELFFile) -> str | None:
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


def _has_dwarf(elf: ELFFile) -> bool:
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
    symbols: list[ElfSymbol] = []
    is64 = elf.elfclass == 64
    little = elf.little_endian
    layout = struct.Struct(("<" if little else ">") + ("IBBHQQ" if is64 else "IIIBBH"))
    for table_name in (".symtab", ".dynsym"):
        table = elf.get_section_by_name(table_name)
        if table is None or table["sh_type"] == "SHT_NOBITS" or table["sh_entsize"] != layout.size:
            continue
        strtab_section = elf.get_section(table["sh_link"])
        strtab = bytes(strtab_section.data())
        data = bytes(table.data())
        usable = len(data) - len(data) % layout.size
        for entry in layout.iter_unpack(data[:usable]):
            if is64:
                name_at, info, _other, shndx, value, size = entry
            else:
                name_at, value, size, info, _other, shndx = entry
            kind = info & 0xF
            if (kind != STT_FUNC and kind != STT_GNU_IFUNC) or shndx == SHN_UNDEF or not value:
                continue
            end = strtab.find(b"\0", name_at)
            name = strtab[name_at : end if end >= 0 else len(strtab)].decode("utf-8", "replace")
            at = name.find("@")
            if at > 0:
                name = name[:at]
            if name:
                symbols.append(ElfSymbol(name, value, size, info >> 4 == STB_LOCAL))
    return symbols
