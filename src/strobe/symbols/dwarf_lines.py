"""File names from a .debug_line program header (DWARF 2-5), indexed the way DW_AT_decl_file counts."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from strobe.symbols.dwarf_forms import (
    FORM_BLOCK,
    FORM_DATA1,
    FORM_DATA2,
    FORM_DATA4,
    FORM_DATA8,
    FORM_DATA16,
    FORM_LINE_STRP,
    FORM_SEC_OFFSET,
    FORM_STRING,
    FORM_STRP,
    FORM_STRX,
    FORM_STRX1,
    FORM_STRX2,
    FORM_STRX3,
    FORM_STRX4,
    FORM_UDATA,
    initial_length,
    read_cstr,
    read_uint,
    read_uleb,
    skip_form,
    u16,
)

if TYPE_CHECKING:
    from strobe.symbols.dwarf_unit import Unit

Value = int | str | bytes | bool | None

LNCT_PATH = 0x1
LNCT_DIRECTORY_INDEX = 0x2
_STRX_FORMS = {FORM_STRX1: 1, FORM_STRX2: 2, FORM_STRX3: 3, FORM_STRX4: 4}
_DATA_FORMS = {FORM_DATA1: 1, FORM_DATA2: 2, FORM_DATA4: 4, FORM_DATA8: 8}


def _join(directory: str, name: str) -> str:
    return os.path.normpath(os.path.join(directory, name))


def line_table_files(unit: Unit, offset: int) -> list[str | None]:
    data = unit.sections.line
    _, pos, offset_size = initial_length(data, offset)
    version = u16(data, pos)
    pos += 2
    if version >= 5:
        pos += 2  # address_size, segment_selector_size
    pos += offset_size  # header_length
    pos += 1  # minimum_instruction_length
    if version >= 4:
        pos += 1  # maximum_operations_per_instruction
    pos += 3  # default_is_stmt, line_base, line_range
    opcode_base = data[pos]
    pos += 1 + opcode_base - 1
    comp_dir = unit.comp_dir
    if version >= 5:
        reader = _LineEntryReader(unit, data, offset_size)
        directories, pos = reader.entries(pos)
        dirs = [str(entry.get(LNCT_PATH) or "") for entry in directories]
        base = comp_dir or (dirs[0] if dirs else "")
        dirs = [_join(base, d) for d in dirs]
        file_entries, pos = reader.entries(pos)
        files: list[str | None] = []
        for entry in file_entries:
            name = entry.get(LNCT_PATH)
            if not isinstance(name, str):
                files.append(None)
                continue
            dir_index = entry.get(LNCT_DIRECTORY_INDEX, 0)
            directory = dirs[dir_index] if isinstance(dir_index, int) and dir_index < len(dirs) else base
            files.append(_join(directory, name))
        return files
    include_dirs = [comp_dir]
    while data[pos] != 0:
        raw, pos = read_cstr(data, pos)
        include_dirs.append(_join(comp_dir, raw.decode("utf-8", "replace")))
    pos += 1
    old_files: list[str | None] = [None]  # DWARF < 5 numbers files from 1
    while data[pos] != 0:
        raw, pos = read_cstr(data, pos)
        dir_index, pos = read_uleb(data, pos)
        _, pos = read_uleb(data, pos)  # mtime
        _, pos = read_uleb(data, pos)  # length
        directory = include_dirs[dir_index] if dir_index < len(include_dirs) else comp_dir
        old_files.append(_join(directory, raw.decode("utf-8", "replace")))
    return old_files


class _LineEntryReader:
    """Reads DWARF 5 directory/file entry lists, whose fields are described by (content type, form) pairs."""

    def __init__(self, unit: Unit, data: bytes, offset_size: int) -> None:
        self.unit = unit
        self.data = data
        self.offset_size = offset_size

    def entries(self, pos: int) -> tuple[list[dict[int, Value]], int]:
        data = self.data
        format_count = data[pos]
        pos += 1
        formats: list[tuple[int, int]] = []
        for _ in range(format_count):
            content, pos = read_uleb(data, pos)
            form, pos = read_uleb(data, pos)
            formats.append((content, form))
        count, pos = read_uleb(data, pos)
        if count and (not formats or count > len(data) - pos):
            raise ValueError(f"implausible line-table entry count {count}")
        result: list[dict[int, Value]] = []
        for _ in range(count):
            entry: dict[int, Value] = {}
            for content, form in formats:
                entry[content], pos = self.value(pos, form)
            result.append(entry)
        return result, pos

    def value(self, pos: int, form: int) -> tuple[Value, int]:
        data, unit = self.data, self.unit
        if form == FORM_STRING:
            raw, pos = read_cstr(data, pos)
            return raw.decode("utf-8", "replace"), pos
        if form == FORM_LINE_STRP:
            return unit.sections.line_string_at(read_uint(data, pos, self.offset_size)), pos + self.offset_size
        if form == FORM_STRP:
            return unit.sections.string_at(read_uint(data, pos, self.offset_size)), pos + self.offset_size
        if form in (FORM_UDATA, FORM_STRX):
            value, pos = read_uleb(data, pos)
            return (unit.string_index(value) if form == FORM_STRX else value), pos
        size = _STRX_FORMS.get(form)
        if size is not None:
            return unit.string_index(read_uint(data, pos, size)), pos + size
        size = _DATA_FORMS.get(form)
        if size is not None:
            return read_uint(data, pos, size), pos + size
        if form == FORM_DATA16:
            return data[pos : pos + 16], pos + 16
        if form == FORM_BLOCK:
            length, pos = read_uleb(data, pos)
            return data[pos : pos + length], pos + length
        if form == FORM_SEC_OFFSET:
            return read_uint(data, pos, self.offset_size), pos + self.offset_size
        return None, skip_form(data, pos, form, unit.address_size, self.offset_size, 5)
