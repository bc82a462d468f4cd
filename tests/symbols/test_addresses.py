"""locate(): function, file and line of static code addresses, compared with binutils addr2line.

Addresses are taken from `nm -S` (function starts, start+1, middles and last bytes) of C, C++ and Rust
programs built at test time (gcc/g++ DWARF 4 and 5, PIE and -no-pie, compressed sections, rustc DWARF 4
and 5, clang when installed). The reference is `addr2line -f -C -i`: its outermost frame names the
function (locate reports the out-of-line function), its innermost frame gives file and line (the line
table row, inlined code included). binutils 2.40 picks wrong file names in some DWARF 5 line tables (gcc's
header-file rows, LLVM's unit-relative names); where it disagrees with locate, llvm-addr2line decides.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from strobe.symbols.addresses import SourceLocation, _decode_line_rows, _LineRows, locate
from strobe.symbols.demangle import split_cxx
from strobe.symbols.elf import read_elf_info
from tests.symbols.conftest import C_SOURCES, CXX_SOURCES, PROGRAMS, Programs, line_of

pytestmark = pytest.mark.skipif(
    shutil.which("addr2line") is None or shutil.which("nm") is None, reason="binutils (addr2line, nm) not installed"
)

_DISCRIMINATOR = re.compile(r" \(discriminator \d+\)$")
_LLVM_ADDR2LINE = next(
    (found for name in ("llvm-addr2line", *(f"llvm-addr2line-{v}" for v in range(30, 10, -1)))
     if (found := shutil.which(name)) is not None),
    None,
)


# --- the reference -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Expected:
    function: str | None  # outermost frame, as addr2line -C prints it (with parameters)
    file: str | None  # innermost frame
    line: int | None  # None for "?" and 0


def addr2line(tool: str, binary: Path, addresses: Sequence[int]) -> dict[int, Expected]:
    """What `tool -f -C -i -a` says about each address."""
    out = subprocess.run(
        [tool, "-f", "-C", "-i", "-a", "-e", str(binary), *map(hex, addresses)],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    frames: dict[int, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    i = 0
    while i < len(out):
        if out[i].startswith("0x"):
            current = frames.setdefault(int(out[i], 16), [])
            i += 1
        else:
            current.append((out[i], _DISCRIMINATOR.sub("", out[i + 1])))
            i += 2
    expected: dict[int, Expected] = {}
    for address, found in frames.items():
        function = found[-1][0]
        file, _, line = found[0][1].rpartition(":")
        number = int(line) if line.isdigit() and int(line) > 0 else None
        expected[address] = Expected(None if function == "??" else function, None if file == "??" else file, number)
    return expected


def sample_addresses(binary: Path, name: re.Pattern[str] | None = None) -> list[int]:
    """Starts, second bytes, middles and last bytes of the sized text symbols of `binary` (`name`: demangled
    names to keep)."""
    out = subprocess.run(["nm", "-S", "-C", "--defined-only", str(binary)], capture_output=True, text=True,
                         check=True).stdout
    addresses: set[int] = set()
    for text in out.splitlines():
        parts = text.split(maxsplit=3)
        if len(parts) != 4 or parts[2] not in "tTwW" or (name is not None and not name.search(parts[3])):
            continue
        start, size = int(parts[0], 16), int(parts[1], 16)
        if size > 0:
            addresses.update((start, start + min(1, size - 1), start + size // 2, start + size - 1))
    return sorted(addresses)


def check_against_addr2line(binary: Path, addresses: Sequence[int], same_function: object) -> int:
    """Compare locate() with addr2line at every address; return how many addresses had a line.
    `same_function(expected, got)` compares function names (it may return None: not compared)."""
    assert addresses, f"no text symbols sampled in {binary}"
    expected = addr2line("addr2line", binary, addresses)
    located = {address: locate(str(binary), address) for address in addresses}
    disputed = [a for a in addresses if _lines(located[a]) != _expected_lines(expected[a])]
    if disputed and _LLVM_ADDR2LINE is not None:
        second = addr2line(_LLVM_ADDR2LINE, binary, disputed)
        disputed = [a for a in disputed if _lines(located[a]) != _expected_lines(second[a])]
    problems = [f"0x{a:x}: addr2line {expected[a]}, locate {located[a]}" for a in disputed]
    assert not problems, "file/line differ:\n" + "\n".join(problems[:20])
    for address in addresses:
        got = located[address]
        assert got is not None
        verdict = same_function(expected[address].function, got.function)  # type: ignore[operator]
        assert verdict in (True, None), f"0x{address:x}: addr2line {expected[address]}, locate {got}"
    return sum(1 for a in addresses if expected[a].line is not None)


def _lines(got: SourceLocation | None) -> tuple[str | None, int | None]:
    assert got is not None
    return (None if got.file is None else os.path.basename(got.file)), got.line


def _expected_lines(expected: Expected) -> tuple[str | None, int | None]:
    """(file basename, line); without a line addr2line may name the unit instead of a file: not compared."""
    if expected.line is None:
        return (None, None)
    return (None if expected.file is None else os.path.basename(expected.file)), expected.line


def same_cxx_function(expected: str | None, got: str | None) -> bool:
    """addr2line's demangled name without its parameter list and qualifiers is locate()'s name."""
    return (None if expected is None else split_cxx(expected).name) == got


def rust_key(name: str) -> str:
    """A Rust function name without generic arguments, `<Type>::` impl brackets and closure numbers, the
    way addr2line (legacy or v0 demangling) and the index (DWARF generics) both can be reduced to."""
    name = re.sub(r"\{\{closure\}\}|\{closure#\d+\}", "{closure}", name)
    name = re.sub(r"^<([^<>]*)>::", r"\1::", name)
    while True:
        reduced = re.sub(r"<[^<>]*>", "", name)
        if reduced == name:
            break
        name = reduced
    return name.replace("::::", "::").rstrip(":")


def same_rust_function(expected: str | None, got: str | None) -> bool | None:
    """For the program's own functions: equal after rust_key; the rest only need a name on both sides."""
    if got is None or not got.startswith("rsprog::"):
        return (expected is None) == (got is None)
    return expected is not None and rust_key(expected) == rust_key(got)


# --- programs beyond conftest's variants ---------------------------------------------------------------


@dataclass
class ExtraPrograms:
    """Builds the variants conftest does not have, once per session."""

    root: Path
    built: dict[str, Path]
    lock: threading.Lock

    def build(self, variant: str) -> Path:
        with self.lock:
            if variant not in self.built:
                self.built[variant] = self._compile(variant)
            return self.built[variant]

    def _compile(self, variant: str) -> Path:
        out = self.root / variant
        toolchain, *flags = variant.split(" ")
        if shutil.which(toolchain) is None:
            pytest.skip(f"{toolchain} is not installed")
        if toolchain in ("gcc", "clang"):
            source_dir = self.root / "c-src"
            source_dir.mkdir(exist_ok=True)
            for name in C_SOURCES:
                shutil.copy(PROGRAMS / name, source_dir / name)
            cmd = [toolchain, *flags, "-o", str(out), "cprog_main.c", "cprog_util.c"]
            cwd: Path | None = source_dir
        elif toolchain in ("g++", "clang++"):
            cmd = [toolchain, *flags, "-o", str(out), *(str(PROGRAMS / s) for s in CXX_SOURCES)]
            cwd = None
        else:
            cmd = [toolchain, *flags, "-o", str(out), str(PROGRAMS / "rsprog.rs")]
            cwd = self.root
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            if toolchain == "rustc":
                pytest.skip(f"{' '.join(cmd)} is not supported here: {done.stderr.strip()[:200]}")
            raise AssertionError(f"{' '.join(cmd)} failed:\n{done.stderr}")
        return out


@pytest.fixture(scope="module")
def extra(tmp_path_factory: pytest.TempPathFactory) -> ExtraPrograms:
    return ExtraPrograms(tmp_path_factory.mktemp("address-programs"), {}, threading.Lock())


# --- comparisons with addr2line ------------------------------------------------------------------------


@pytest.mark.parametrize(("variant", "pie"), [
    ("c", True), ("c-dwarf4", True), ("c-nopie", False), ("c-gz", True), ("c-gz-gnu", True),
    ("cxx", True), ("cxx-dwarf4", True),
])
def test_gcc_programs_match_addr2line(programs: Programs, variant: str, pie: bool) -> None:
    binary = programs.build(variant)
    assert read_elf_info(binary).is_pie is pie
    with_lines = check_against_addr2line(binary, sample_addresses(binary), same_cxx_function)
    assert with_lines >= 20


@pytest.mark.parametrize(("variant", "pie"), [
    ("g++ -g -O0 -no-pie", False),
    ("gcc -gdwarf-5 -O0 -no-pie", False),
    ("clang -g -O0", True),
    ("clang -gdwarf-4 -O0 -no-pie", False),
    ("clang++ -g -O0", True),
    ("clang++ -gdwarf-4 -O0", True),
])
def test_more_c_and_cxx_builds_match_addr2line(extra: ExtraPrograms, variant: str, pie: bool) -> None:
    binary = extra.build(variant)
    assert read_elf_info(binary).is_pie is pie
    with_lines = check_against_addr2line(binary, sample_addresses(binary), same_cxx_function)
    assert with_lines >= 20


_RUST_USER = re.compile(r"^(<)?rsprog::")
_RUST_RUNTIME = re.compile(r"panicking|lang_start|core::fmt|rust_begin_unwind")


@pytest.mark.parametrize("variant", ["rust-legacy", "rust-v0"])
def test_rust_programs_match_addr2line(programs: Programs, variant: str) -> None:
    binary = programs.build(variant)
    user = sample_addresses(binary, _RUST_USER)
    assert check_against_addr2line(binary, user, same_rust_function) >= 20
    check_against_addr2line(binary, sample_addresses(binary, _RUST_RUNTIME), same_rust_function)


def test_rust_dwarf5_matches_addr2line(extra: ExtraPrograms) -> None:
    binary = extra.build("rustc -g -C opt-level=0 -C dwarf-version=5")
    user = sample_addresses(binary, _RUST_USER)
    assert check_against_addr2line(binary, user, same_rust_function) >= 20
    check_against_addr2line(binary, sample_addresses(binary, _RUST_RUNTIME), same_rust_function)


@pytest.mark.skipif(shutil.which("objcopy") is None, reason="objcopy not installed")
@pytest.mark.parametrize(("variant", "names"), [
    ("c-dwarf4", None),  # units with DW_AT_low_pc/high_pc
    ("cxx-O2", None),  # DWARF 5 units with DW_AT_ranges (.debug_rnglists): main is in .text.startup
    ("rust-legacy", re.compile(r"rsprog::|panicking|lang_start")),  # DWARF 4 units with .debug_ranges
])
def test_units_are_found_without_aranges(programs: Programs, tmp_path: Path, variant: str,
                                         names: re.Pattern[str] | None) -> None:
    binary = programs.build(variant)
    bare = tmp_path / f"{variant}-no-aranges"
    subprocess.run(["objcopy", "--remove-section", ".debug_aranges", str(binary), str(bare)], check=True)
    addresses = sample_addresses(binary, names)
    assert {a: locate(str(bare), a) for a in addresses} == {a: locate(str(binary), a) for a in addresses}
    assert sum(1 for a in addresses if located(bare, a).line is not None) >= 20


# --- exact answers -----------------------------------------------------------------------------------


def symbol(binary: Path, name: str) -> tuple[int, int]:
    """(address, size) of the text symbol `name` (demangled, parameters included)."""
    out = subprocess.run(["nm", "-S", "-C", "--defined-only", str(binary)], capture_output=True, text=True,
                         check=True).stdout
    for text in out.splitlines():
        parts = text.split(maxsplit=3)
        if len(parts) == 4 and parts[3] == name:
            return int(parts[0], 16), int(parts[1], 16)
    raise AssertionError(f"{name} not in nm {binary}")


def located(binary: Path, address: int) -> SourceLocation:
    found = locate(str(binary), address)
    assert found is not None
    return found


def first_lines(source: str, marker: str) -> tuple[int, int]:
    """Where a function's first row may be: its declarator's line or the next one (an opening brace)."""
    line = line_of(source, marker)
    return line, line + 1


@pytest.mark.parametrize("variant", ["c", "c-dwarf4", "c-nopie"])
def test_c_locations_are_absolute_and_exact(programs: Programs, variant: str) -> None:
    binary = programs.build(variant)
    start, size = symbol(binary, "util_scale")
    first = located(binary, start)
    assert first.function == "util_scale"
    assert first.file == str(programs.c_dir / "cprog_util.c")  # compiled as a relative path: joined with comp_dir
    assert first.line in first_lines("cprog_util.c", "util_scale")
    assert located(binary, start + size - 1).function == "util_scale"
    assert first.function_start == located(binary, start + size - 1).function_start == start
    assert first.inlined_into is None
    # A static inline function of a header: the header's rows, not the .c file's (binutils 2.40 says .c here).
    clamp, _ = symbol(binary, "util_clamp")
    found = located(binary, clamp)
    assert (found.function, found.file) == ("util_clamp", str(programs.c_dir / "cprog_util.h"))
    assert found.line in first_lines("cprog_util.h", "util_clamp")


def test_inlined_code_keeps_the_outer_function_and_the_inlined_line(programs: Programs) -> None:
    binary = programs.build("c")
    start, size = symbol(binary, "process_command")
    found = [located(binary, address) for address in range(start, start + size)]
    assert {f.function for f in found} == {"process_command"}
    assert line_of("cprog_main.c", "add_inline") in {f.line for f in found}  # always_inline, even at -O0
    assert found[0].line in first_lines("cprog_main.c", "process_command")


@pytest.mark.parametrize("variant", ["cxx", "cxx-dwarf4"])
def test_cxx_names_have_no_parameters(programs: Programs, variant: str) -> None:
    binary = programs.build(variant)
    start, _ = symbol(binary, "auth::User::validate(int) const")
    found = located(binary, start + 4)
    assert found.function == "auth::User::validate"
    assert found.file is not None and found.file == str(PROGRAMS / "cxxprog.cpp")


def test_rust_locations(programs: Programs) -> None:
    binary = programs.build("rust-v0")
    start, _ = symbol(binary, "rsprog::largest::<u32>")
    found = located(binary, start)
    assert found.function == "rsprog::largest<u32>"
    assert found.file == str(PROGRAMS / "rsprog.rs")
    assert found.line == line_of("rsprog.rs", "largest")


# --- the line-program decoder, on a hand-made program ------------------------------------------------


def _line_program() -> bytes:
    """A DWARF 4 line program: a sequence with two rows at one address, fixed_advance_pc and const_add_pc;
    a sequence of discarded code at 0; a sequence starting where the first ends; one more after a gap."""
    header = bytes([1, 1, 1, 0xFB, 14, 13, 0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1])  # line_base -5, opcode_base 13
    header += b"\0" + b"a.c\0\0\0\0" + b"b.c\0\0\0\0" + b"\0"  # no include directories; files 1 and 2

    def set_address(address: int) -> bytes:
        return b"\0\x09\x02" + address.to_bytes(8, "little")

    end_sequence = b"\0\x01\x01"
    program = (
        set_address(0x1000) + b"\x03\x09" + b"\x01"  # line 10, row at 0x1000
        + bytes([13 + (1 + 5) + 14 * 4])  # special opcode: address +4, line +1: row (0x1004, a.c, 11)
        + b"\x04\x02\x01"  # file 2, another row at 0x1004: the last one counts
        + b"\x09\x10\x00" + b"\x03\x7d" + b"\x01"  # fixed_advance_pc 0x10, line -3: row (0x1014, b.c, 8)
        + b"\x08" + end_sequence  # const_add_pc: +17, the sequence ends at 0x1025
        + set_address(0) + b"\x01" + b"\x02\x80\x40" + end_sequence  # discarded: 0..0x2000
        + set_address(0x1025) + b"\x01" + b"\x02\x08" + end_sequence  # (0x1025, a.c, 1) up to 0x102d
        + set_address(0x1100) + b"\x01" + b"\x08" + end_sequence  # (0x1100, a.c, 1) up to 0x1111
    )
    body = (4).to_bytes(2, "little") + len(header).to_bytes(4, "little") + header + program
    return len(body).to_bytes(4, "little") + body


def test_line_program_rows() -> None:
    addresses, files, lines = _decode_line_rows(_line_program(), 0, [(0x1000, 0x2000)])
    rows = _LineRows(addresses, files, lines, [None, "/src/a.c", "/src/b.c"])
    expected = {
        0x0FFF: None, 0x10: None, 0x1000: ("/src/a.c", 10), 0x1003: ("/src/a.c", 10), 0x1004: ("/src/b.c", 11),
        0x1013: ("/src/b.c", 11), 0x1014: ("/src/b.c", 8), 0x1024: ("/src/b.c", 8), 0x1025: ("/src/a.c", 1),
        0x102C: ("/src/a.c", 1), 0x102D: None, 0x1110: ("/src/a.c", 1), 0x1111: None, 0x1FFF: None,
    }
    assert {address: rows.find(address) for address in expected} == expected


# --- nothing there, nothing readable -------------------------------------------------------------------


def section_address(binary: Path, name: str) -> int:
    with binary.open("rb") as stream:
        section = ELFFile(stream).get_section_by_name(name)
        assert section is not None
        return int(section["sh_addr"])


@pytest.mark.parametrize("variant", ["c", "c-nopie", "cxx", "rust-legacy"])
def test_addresses_outside_code_have_no_location(programs: Programs, variant: str) -> None:
    binary = programs.build(variant)
    for address in (0, 1, section_address(binary, ".rodata"), section_address(binary, ".rodata") + 8,
                    section_address(binary, ".data"), 2**64 - 1, 2**64, -1):
        assert located(binary, address) == SourceLocation(None, None, None), hex(address)


def test_binaries_without_dwarf_get_symbol_names_only(programs: Programs) -> None:
    binary = programs.build("c-nodebug")
    start, size = symbol(binary, "process_command")
    assert located(binary, start + size // 2) == SourceLocation("process_command", None, None, function_start=start)
    stripped = programs.build("c-stripped")
    assert located(stripped, start).file is None


def test_unreadable_files_give_none(tmp_path: Path) -> None:
    assert locate(str(tmp_path / "missing"), 0x1000) is None
    text = tmp_path / "script.sh"
    text.write_text("#!/bin/sh\necho hi\n")
    assert locate(str(text), 0x1000) is None
    assert locate(str(tmp_path), 0x1000) is None
    damaged = tmp_path / "damaged"
    damaged.write_bytes(b"\x7fELF" + b"\xff" * 12)
    assert locate(str(damaged), 0x1000) is None


# --- caching -------------------------------------------------------------------------------------------


def test_a_rewritten_file_is_read_again(programs: Programs, tmp_path: Path) -> None:
    c, cxx = programs.build("c-nopie"), programs.build("cxx")
    target = tmp_path / "app"
    shutil.copy(c, target)
    start, _ = symbol(c, "main")
    assert located(target, start).function == "main"
    shutil.copy(cxx, target)
    os.utime(target, ns=(time.time_ns(), time.time_ns() + 10**9))
    check, _ = symbol(cxx, "auth::check(int)")
    assert located(target, check).function == "auth::check"
    assert located(target, start).function is None  # the C program's main is not code in the C++ one


def test_cached_lookups_are_fast(programs: Programs) -> None:
    binary = programs.build("cxx")
    addresses = sample_addresses(binary)[:20]
    locate(str(binary), addresses[0])
    began = time.perf_counter()
    for address in addresses:
        locate(str(binary), address)
    assert time.perf_counter() - began < 0.5


def test_concurrent_first_calls_agree(programs: Programs, tmp_path: Path) -> None:
    target = tmp_path / "app"
    shutil.copy(programs.build("cxx"), target)
    addresses = sample_addresses(target)
    results: dict[int, list[SourceLocation | None]] = {}

    def work(number: int) -> None:
        results[number] = [locate(str(target), address) for address in _rotated(addresses, number * 7)]

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    reference = {address: locate(str(target), address) for address in addresses}
    for number, found in results.items():
        assert found == [reference[a] for a in _rotated(addresses, number * 7)]


def _rotated(items: Iterable[int], by: int) -> list[int]:
    listed = list(items)
    by %= max(len(listed), 1)
    return listed[by:] + listed[:by]
