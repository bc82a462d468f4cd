"""The rows of a .debug_line program (DWARF 2-5, little-endian): which source line each code address is.

    addresses, files, lines = decode_line_rows(debug_line, unit.stmt_list, code_ranges)
    rows = LineRows(addresses, files, lines, line_table_files(unit, unit.stmt_list))
    rows.find(0x1149)   # -> ("/src/app.c", 21); (None, None) on a line-0 row; None where no row holds it

decode_line_rows() runs the line-number state machine and keeps only what a lookup needs: per row its
address, file register and line, sorted by address, each sequence closed by an end row. Of several rows at
one address the last is kept (as addr2line and llvm-symbolizer do). Sequences that do not start in one of
the `code` ranges are dropped (the linker leaves the line programs of discarded functions in place,
relocated to 0 or to a tombstone address); a sequence overlapping the previous one cuts that one short.
The file names come from the header, read by strobe.symbols.dwarf_lines; this module does not read them.
Columns, is_stmt, discriminators and DW_LNE_define_file are not kept. Raises ValueError (or one of
dwarf_forms.DECODE_ERRORS) on a program it cannot read.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from strobe.symbols.dwarf_forms import initial_length, read_sleb, read_uint, read_uleb, u16

END_OF_SEQUENCE = _END = -1  # the file column of a row that ends a sequence


@dataclass(frozen=True, slots=True)
class LineRows:
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


def decode_line_rows(
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
            address, op_index = _advanced(address, op_index, advance, min_length, max_ops)
        elif opcode == 3:  # DW_LNS_advance_line
            delta, pos = read_sleb(data, pos)
            line += delta
        elif opcode == 4:  # DW_LNS_set_file
            file, pos = read_uleb(data, pos)
        elif opcode == 8:  # DW_LNS_const_add_pc
            address, op_index = _advanced(address, op_index, const_add, min_length, max_ops)
        elif opcode == 9:  # DW_LNS_fixed_advance_pc
            address += u16(data, pos)
            op_index = 0
            pos += 2
        else:  # set_column, negate_stmt, basic_block, prologue_end, epilogue_begin, set_isa, unknown
            for _ in range(arg_counts[opcode - 1] if opcode - 1 < len(arg_counts) else 0):
                _, pos = read_uleb(data, pos)
    return _merge(sequences)



def _advanced(address: int, op_index: int, advance: int, min_length: int, max_ops: int) -> tuple[int, int]:
    """(address, op_index) after advancing by `advance` operations (special opcodes do it inline)."""
    if max_ops == 1:
        return address + min_length * advance, op_index
    return address + min_length * ((op_index + advance) // max_ops), (op_index + advance) % max_ops


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
