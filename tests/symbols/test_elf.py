"""ElfInfo: build id, image base, PIE-ness, DWARF presence, and clear errors for files that are not ELF."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from strobe.errors import ErrorCode, ValidationError
from strobe.symbols import build_index, read_elf_info
from tests.symbols.conftest import Programs


def test_build_id_is_the_gnu_note_in_hex(programs: Programs) -> None:
    info = read_elf_info(programs.build("c"))
    assert info.build_id is not None and re.fullmatch(r"[0-9a-f]{40}", info.build_id)
    assert info.path == str(programs.build("c"))


def test_build_id_absent_when_the_linker_wrote_none(programs: Programs) -> None:
    assert read_elf_info(programs.build("c-no-build-id")).build_id is None


def test_pie_has_image_base_zero(programs: Programs) -> None:
    info = read_elf_info(programs.build("c"))
    assert info.is_pie and info.image_base == 0


def test_non_pie_has_image_base_0x400000(programs: Programs) -> None:
    info = read_elf_info(programs.build("c-nopie"))
    assert not info.is_pie and info.image_base == 0x400000


@pytest.mark.parametrize(
    ("variant", "expected"),
    [("c", True), ("c-gz", True), ("c-gz-gnu", True), ("c-nodebug", False), ("c-stripped", False)],
)
def test_has_dwarf(programs: Programs, variant: str, expected: bool) -> None:
    assert read_elf_info(programs.build(variant)).has_dwarf is expected


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"#!/bin/sh\necho hi\n", "not an ELF file"),
        (b"", "not an ELF file"),
        (b"\x7fELF\x02\x01\x01" + b"\x00" * 5, "damaged ELF"),
    ],
)
def test_non_elf_files_are_validation_errors(tmp_path: Path, content: bytes, message: str) -> None:
    target = tmp_path / "not-a-binary"
    target.write_bytes(content)
    for call in (read_elf_info, build_index):
        with pytest.raises(ValidationError) as caught:
            call(target)
        assert caught.value.code is ErrorCode.VALIDATION_ERROR
        assert message in caught.value.message and str(target) in caught.value.message


def test_missing_file_and_directory_are_validation_errors(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="not found"):
        read_elf_info(tmp_path / "nope")
    with pytest.raises(ValidationError, match="directory"):
        read_elf_info(tmp_path)


def test_section_table_past_the_end_is_a_validation_error(programs: Programs, tmp_path: Path) -> None:
    content = bytearray(programs.build("c").read_bytes())
    content[0x28:0x30] = (len(content) + 4096).to_bytes(8, "little")  # e_shoff of an ELF64 header
    damaged = tmp_path / "damaged"
    damaged.write_bytes(bytes(content))
    with pytest.raises(ValidationError, match="damaged ELF"):
        build_index(damaged)
