"""The index of a C program: exact files and lines, static and inline-only functions, no-debug fallbacks."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from strobe.symbols import FunctionIndex, FunctionInfo, build_index
from tests.symbols.conftest import Programs, line_of


def by_name(index: FunctionIndex) -> dict[str, list[FunctionInfo]]:
    found: dict[str, list[FunctionInfo]] = {}
    for function in index.functions:
        found.setdefault(function.name, []).append(function)
    return found


def nm_addresses(path: object) -> dict[str, int]:
    out = subprocess.run(["nm", str(path)], capture_output=True, text=True, check=True).stdout
    return {parts[2]: int(parts[0], 16) for parts in map(str.split, out.splitlines()) if len(parts) == 3}


@pytest.mark.parametrize("variant", ["c", "c-dwarf4", "c-gz"])
def test_functions_have_exact_files_lines_and_addresses(programs: Programs, variant: str) -> None:
    binary = programs.build(variant)
    index = build_index(binary)
    functions = by_name(index)
    symbols = nm_addresses(binary)
    main_c, util_c, util_h = (str(programs.c_dir / name) for name in ("cprog_main.c", "cprog_util.c", "cprog_util.h"))
    expected = {
        "process_command": (main_c, line_of("cprog_main.c", "process_command"), 2),
        "bump": (main_c, line_of("cprog_main.c", "bump"), 1),
        "util_scale": (util_c, line_of("cprog_util.c", "util_scale"), 2),
        "util_helper": (util_c, line_of("cprog_util.c", "util_helper"), 1),
        "util_check": (util_c, line_of("cprog_util.c", "util_check"), 1),
        "util_clamp": (util_h, line_of("cprog_util.h", "util_clamp"), 1),
    }
    for name, (file, line, params) in expected.items():
        [function] = functions[name]
        assert (function.file, function.line, function.params) == (file, line, params), name
        assert function.address == symbols[name] and not function.inlined_only
        assert function.raw == function.signature == name and function.size > 0
        assert index.by_address(function.address) is function
    assert functions["main"][0].file == main_c
    assert index.elf.has_dwarf


def test_always_inline_function_is_inlined_only(programs: Programs) -> None:
    for variant in ("c", "c-O2"):
        [function] = by_name(build_index(programs.build(variant)))["add_inline"]
        assert function.inlined_only and function.address == 0 and function.size == 0
        assert function.line == line_of("cprog_main.c", "add_inline") and function.params == 2


@pytest.mark.parametrize("variant", ["c-O2", "c-O2-dwarf4"])  # .debug_rnglists and .debug_ranges
def test_optimised_build_entry_points(programs: Programs, variant: str) -> None:
    """At -O2 util_check is split into hot and cold parts (DW_AT_ranges): the index has the entry, not the
    .cold part; functions inlined everywhere are inlined_only; no address appears twice under one name."""
    binary = programs.build(variant)
    index = build_index(binary)
    functions = by_name(index)
    symbols = nm_addresses(binary)
    [check] = functions["util_check"]
    assert check.address == symbols["util_check"] and check.line == line_of("cprog_util.c", "util_check")
    assert "util_check.cold" in symbols and all(f.address != symbols["util_check.cold"] for f in index.functions)
    assert all(f.inlined_only for f in functions["util_clamp"])
    keys = [(f.address, f.name) for f in index.functions]
    assert len(keys) == len(set(keys)) and keys == sorted(keys, key=lambda k: k[0])


def test_by_address_misses(programs: Programs) -> None:
    index = build_index(programs.build("c"))
    assert index.by_address(0) is None  # inline-only functions have no address
    process = by_name(index)["process_command"][0]
    assert index.by_address(process.address + 1) is None


def test_non_pie_addresses_are_absolute(programs: Programs) -> None:
    binary = programs.build("c-nopie")
    index = build_index(binary)
    [process] = by_name(index)["process_command"]
    assert index.elf.image_base == 0x400000 and process.address == nm_addresses(binary)["process_command"]
    assert process.address > 0x400000


def test_binary_without_debug_info_is_indexed_from_the_symbol_table(programs: Programs) -> None:
    binary = programs.build("c-nodebug")
    index = build_index(binary)
    functions = by_name(index)
    assert not index.elf.has_dwarf
    symbols = nm_addresses(binary)
    for name in ("process_command", "bump", "util_scale", "util_helper", "util_check", "main"):
        [function] = functions[name]
        assert function.address == symbols[name] and function.file is None and function.line is None
        assert function.raw == name and not function.inlined_only
    assert "add_inline" not in functions


def test_stripped_binary_has_no_functions(programs: Programs) -> None:
    index = build_index(programs.build("c-stripped"))
    assert not index.elf.has_dwarf
    assert index.functions == ()


def test_damaged_compressed_dwarf_falls_back_to_the_symbol_table(
    programs: Programs, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    binary = programs.build("c-gz")
    with binary.open("rb") as stream:
        section = ELFFile(stream).get_section_by_name(".debug_info")
        start = section["sh_offset"] + 24  # after the Elf64_Chdr compression header
    damaged = tmp_path / "damaged"
    content = bytearray(binary.read_bytes())
    content[start : start + 64] = b"\xff" * 64
    damaged.write_bytes(bytes(content))
    index = build_index(damaged)
    assert "cannot read the DWARF sections" in caplog.text
    assert index.elf.has_dwarf
    [process] = by_name(index)["process_command"]
    assert process.file is None and process.address == nm_addresses(binary)["process_command"]
