"""One DWARF unit: its header, attribute values by form, its line-table file names and range lists."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from strobe.symbols.dwarf_forms import (
    AT_ADDR_BASE,
    AT_COMP_DIR,
    AT_GNU_ADDR_BASE,
    AT_LANGUAGE,
    AT_LOW_PC,
    AT_NAME,
    AT_RNGLISTS_BASE,
    AT_STMT_LIST,
    AT_STR_OFFSETS_BASE,
    DECODE_ERRORS,
    FORM_ADDR,
    FORM_ADDRX,
    FORM_ADDRX1,
    FORM_ADDRX2,
    FORM_ADDRX3,
    FORM_ADDRX4,
    FORM_BLOCK,
    FORM_BLOCK1,
    FORM_BLOCK2,
    FORM_BLOCK4,
    FORM_DATA1,
    FORM_DATA2,
    FORM_DATA4,
    FORM_DATA8,
    FORM_DATA16,
    FORM_EXPRLOC,
    FORM_FLAG,
    FORM_FLAG_PRESENT,
    FORM_GNU_ADDR_INDEX,
    FORM_GNU_REF_ALT,
    FORM_GNU_STR_INDEX,
    FORM_GNU_STRP_ALT,
    FORM_IMPLICIT_CONST,
    FORM_INDIRECT,
    FORM_LINE_STRP,
    FORM_LOCLISTX,
    FORM_REF1,
    FORM_REF2,
    FORM_REF4,
    FORM_REF8,
    FORM_REF_ADDR,
    FORM_REF_SIG8,
    FORM_REF_SUP4,
    FORM_REF_SUP8,
    FORM_REF_UDATA,
    FORM_RNGLISTX,
    FORM_SDATA,
    FORM_SEC_OFFSET,
    FORM_STRING,
    FORM_STRP,
    FORM_STRP_SUP,
    FORM_STRX,
    FORM_STRX1,
    FORM_STRX2,
    FORM_STRX3,
    FORM_STRX4,
    FORM_UDATA,
    AbbrevDecl,
    initial_length,
    read_cstr,
    read_sleb,
    read_uint,
    read_uleb,
    skip_form,
    u16,
)
from strobe.symbols.dwarf_lines import line_table_files

Value = int | str | bytes | bool | None

UT_COMPILE = 0x01
UT_TYPE = 0x02
UT_PARTIAL = 0x03
UT_SKELETON = 0x04
UT_SPLIT_COMPILE = 0x05
UT_SPLIT_TYPE = 0x06

_REF_FORMS = {FORM_REF1: 1, FORM_REF2: 2, FORM_REF4: 4, FORM_REF8: 8}
_STRX_FORMS = {FORM_STRX1: 1, FORM_STRX2: 2, FORM_STRX3: 3, FORM_STRX4: 4}
_ADDRX_FORMS = {FORM_ADDRX1: 1, FORM_ADDRX2: 2, FORM_ADDRX3: 3, FORM_ADDRX4: 4}
_DATA_FORMS = {FORM_DATA1: 1, FORM_DATA2: 2, FORM_DATA4: 4, FORM_DATA8: 8}
_BLOCK_FORMS = {FORM_BLOCK1: 1, FORM_BLOCK2: 2, FORM_BLOCK4: 4}



@dataclass
class DwarfSections:
    """Uncompressed bytes of the sections the scanner reads (empty when absent)."""

    info: bytes = b""
    abbrev: bytes = b""
    debug_str: bytes = b""
    line_str: bytes = b""
    str_offsets: bytes = b""
    addr: bytes = b""
    line: bytes = b""
    ranges: bytes = b""
    rnglists: bytes = b""
    strings: dict[int, str] = field(default_factory=dict)  # .debug_str offset -> decoded text

    def string_at(self, offset: int) -> str:
        text = self.strings.get(offset)
        if text is None:
            data = self.debug_str
            text = data[offset : data.index(0, offset)].decode("utf-8", "replace")
            self.strings[offset] = text
        return text

    def line_string_at(self, offset: int) -> str:
        """A string of .debug_line_str (DW_FORM_line_strp)."""
        data = self.line_str
        return data[offset : data.index(0, offset)].decode("utf-8", "replace")


class Unit:
    """Header fields and value decoding for the unit at `offset` of .debug_info."""

    def __init__(self, sections: DwarfSections, offset: int) -> None:
        data = sections.info
        self.sections = sections
        self.offset = offset
        length, pos, self.offset_size = initial_length(data, offset)
        self.end = pos + length
        self.version = u16(data, pos)
        pos += 2
        self.unit_type = UT_COMPILE
        if self.version >= 5:
            self.unit_type = data[pos]
            self.address_size = data[pos + 1]
            self.abbrev_offset = read_uint(data, pos + 2, self.offset_size)
            pos += 2 + self.offset_size
            if self.unit_type in (UT_TYPE, UT_SPLIT_TYPE):
                pos += 8 + self.offset_size
            elif self.unit_type in (UT_SKELETON, UT_SPLIT_COMPILE):
                pos += 8
        else:
            self.abbrev_offset = read_uint(data, pos, self.offset_size)
            self.address_size = data[pos + self.offset_size]
            pos += self.offset_size + 1
        self.die_start = pos
        # Filled from the unit DIE.
        self.str_offsets_base = 8 if self.version >= 5 else 0
        self.addr_base = 8 if self.version >= 5 else 0
        self.rnglists_base = 0
        self.base_address = 0
        self.comp_dir = ""
        self.name = ""
        self.language = 0
        self.stmt_list: int | None = None
        self._files: list[str | None] | None = None

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.abbrev_offset, self.address_size, self.offset_size, self.version)

    def read_unit_die(self, decl: AbbrevDecl, start: int) -> int:
        """Decode the unit DIE's attributes (bases, name, comp_dir, line table, language, base address)."""
        data = self.sections.info
        # Bases first: strx/addrx values in the same DIE depend on them.
        pos = start
        for attr, form, implicit in decl.attrs:
            if attr in (AT_STR_OFFSETS_BASE, AT_ADDR_BASE, AT_GNU_ADDR_BASE, AT_RNGLISTS_BASE):
                value, pos = self.read(pos, form, implicit)
                if isinstance(value, int):
                    if attr == AT_STR_OFFSETS_BASE:
                        self.str_offsets_base = value
                    elif attr == AT_RNGLISTS_BASE:
                        self.rnglists_base = value
                    else:
                        self.addr_base = value
            else:
                pos = skip_form(data, pos, form, self.address_size, self.offset_size, self.version)
        pos = start
        for attr, form, implicit in decl.attrs:
            value, pos = self.read(pos, form, implicit)
            if attr == AT_NAME and isinstance(value, str):
                self.name = value
            elif attr == AT_COMP_DIR and isinstance(value, str):
                self.comp_dir = value
            elif attr == AT_STMT_LIST and isinstance(value, int):
                self.stmt_list = value
            elif attr == AT_LANGUAGE and isinstance(value, int):
                self.language = value
            elif attr == AT_LOW_PC and isinstance(value, int):
                self.base_address = value
        return pos

    # --- values ----------------------------------------------------------------------------------
    def string_index(self, index: int) -> str | None:
        offsets = self.sections.str_offsets
        at = self.str_offsets_base + index * self.offset_size
        if at + self.offset_size > len(offsets):
            return None
        return self.sections.string_at(read_uint(offsets, at, self.offset_size))

    def address_index(self, index: int) -> int | None:
        addrs = self.sections.addr
        at = self.addr_base + index * self.address_size
        if at + self.address_size > len(addrs):
            return None
        return read_uint(addrs, at, self.address_size)

    def read(self, pos: int, form: int, implicit: int) -> tuple[Value, int]:
        """Decode one attribute value. References come back as .debug_info offsets (-1 if they point
        outside this file), strings as str, addresses as int."""
        data = self.sections.info
        if form == FORM_STRP:
            return self.sections.string_at(read_uint(data, pos, self.offset_size)), pos + self.offset_size
        size = _DATA_FORMS.get(form)
        if size is not None:
            return read_uint(data, pos, size), pos + size
        size = _REF_FORMS.get(form)
        if size is not None:
            return self.offset + read_uint(data, pos, size), pos + size
        if form == FORM_FLAG_PRESENT:
            return True, pos
        if form == FORM_IMPLICIT_CONST:
            return implicit, pos
        if form == FORM_ADDR:
            return read_uint(data, pos, self.address_size), pos + self.address_size
        if form == FORM_STRING:
            raw, pos = read_cstr(data, pos)
            return raw.decode("utf-8", "replace"), pos
        if form == FORM_LINE_STRP:
            return self.sections.line_string_at(read_uint(data, pos, self.offset_size)), pos + self.offset_size
        size = _STRX_FORMS.get(form)
        if size is not None:
            return self.string_index(read_uint(data, pos, size)), pos + size
        if form in (FORM_STRX, FORM_GNU_STR_INDEX):
            index, pos = read_uleb(data, pos)
            return self.string_index(index), pos
        size = _ADDRX_FORMS.get(form)
        if size is not None:
            return self.address_index(read_uint(data, pos, size)), pos + size
        if form in (FORM_ADDRX, FORM_GNU_ADDR_INDEX):
            index, pos = read_uleb(data, pos)
            return self.address_index(index), pos
        if form in (FORM_UDATA, FORM_LOCLISTX, FORM_RNGLISTX):
            return read_uleb(data, pos)
        if form == FORM_SDATA:
            return read_sleb(data, pos)
        if form == FORM_REF_UDATA:
            value, pos = read_uleb(data, pos)
            return self.offset + value, pos
        if form == FORM_REF_ADDR:
            size = self.address_size if self.version <= 2 else self.offset_size
            return read_uint(data, pos, size), pos + size
        if form == FORM_SEC_OFFSET:
            return read_uint(data, pos, self.offset_size), pos + self.offset_size
        if form == FORM_FLAG:
            return data[pos] != 0, pos + 1
        if form == FORM_INDIRECT:
            real, pos = read_uleb(data, pos)
            return self.read(pos, real, implicit)
        if form in (FORM_REF_SIG8, FORM_REF_SUP4, FORM_REF_SUP8, FORM_GNU_REF_ALT):
            # Type-unit signatures and supplementary (dwz) files: not followed.
            return -1, skip_form(data, pos, form, self.address_size, self.offset_size, self.version)
        if form in (FORM_STRP_SUP, FORM_GNU_STRP_ALT):
            return None, pos + self.offset_size
        size = _BLOCK_FORMS.get(form)
        if size is not None:
            length = read_uint(data, pos, size)
            pos += size
            return data[pos : pos + length], pos + length
        if form in (FORM_BLOCK, FORM_EXPRLOC):
            length, pos = read_uleb(data, pos)
            return data[pos : pos + length], pos + length
        if form == FORM_DATA16:
            return data[pos : pos + 16], pos + 16
        raise ValueError(f"unknown DWARF form 0x{form:x} at .debug_info+0x{pos:x}")

    # --- files -----------------------------------------------------------------------------------
    def file_name(self, index: int) -> str | None:
        files = self._files
        if files is None:
            files = self._files = self._read_files()
        if 0 <= index < len(files):
            return files[index]
        return None

    def _read_files(self) -> list[str | None]:
        """Absolute file paths indexed the way DW_AT_decl_file counts (DWARF 5: from 0, else from 1)."""
        if self.stmt_list is None or self.stmt_list >= len(self.sections.line):
            return []
        try:
            return line_table_files(self, self.stmt_list)
        except DECODE_ERRORS:
            return []

    # --- ranges ----------------------------------------------------------------------------------
    def first_range(self, value: int, is_index: bool) -> tuple[int, int] | None:
        """The first non-empty (start, end) of a DW_AT_ranges list (a section offset, or a DW_FORM_rnglistx
        index when `is_index`): the entry part of a hot/cold split function."""
        try:
            if self.version >= 5 or is_index:
                offset = value
                if is_index:
                    at = self.rnglists_base + value * self.offset_size
                    offset = self.rnglists_base + read_uint(self.sections.rnglists, at, self.offset_size)
                return self._first_rnglist(offset)
            return self._first_debug_range(value)
        except DECODE_ERRORS:
            return None

    def _first_debug_range(self, offset: int) -> tuple[int, int] | None:
        data, size = self.sections.ranges, self.address_size
        top = (1 << (8 * size)) - 1
        base = self.base_address
        pos = offset
        while pos + 2 * size <= len(data):
            begin, end = read_uint(data, pos, size), read_uint(data, pos + size, size)
            pos += 2 * size
            if begin == 0 and end == 0:
                return None
            if begin == top:
                base = end
            elif end > begin:
                return base + begin, base + end
        return None

    def _first_rnglist(self, offset: int) -> tuple[int, int] | None:
        return next(self.rnglist(offset), None)

    def rnglist(self, offset: int) -> Iterator[tuple[int, int]]:
        """The non-empty (start, end) ranges of the DWARF 5 range list at `offset` in .debug_rnglists."""
        data, size = self.sections.rnglists, self.address_size
        base = self.base_address
        pos = offset
        while pos < len(data):
            kind = data[pos]
            pos += 1
            if kind == 0:  # end_of_list
                return
            if kind == 1:  # base_addressx
                index, pos = read_uleb(data, pos)
                base = self.address_index(index) or 0
                continue
            if kind == 5:  # base_address
                base = read_uint(data, pos, size)
                pos += size
                continue
            if kind == 2:  # startx_endx
                a, pos = read_uleb(data, pos)
                b, pos = read_uleb(data, pos)
                start, end = self.address_index(a) or 0, self.address_index(b) or 0
            elif kind == 3:  # startx_length
                a, pos = read_uleb(data, pos)
                length, pos = read_uleb(data, pos)
                start = self.address_index(a) or 0
                end = start + length
            elif kind == 4:  # offset_pair
                a, pos = read_uleb(data, pos)
                b, pos = read_uleb(data, pos)
                start, end = base + a, base + b
            elif kind == 6:  # start_end
                start, end = read_uint(data, pos, size), read_uint(data, pos + size, size)
                pos += 2 * size
            elif kind == 7:  # start_length
                start = read_uint(data, pos, size)
                length, pos = read_uleb(data, pos + size)
                end = start + length
            else:
                return
            if end > start:
                yield start, end
