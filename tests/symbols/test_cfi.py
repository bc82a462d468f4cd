"""unwind_rule() against binutils' reading of the same call frame information (`readelf --debug-dump=frames-interp`):
at every row of every FDE (of C -O0 and -O2, C++ and Rust debug builds, and a sample of libc's), the CFA's register
and offset, where rbp, rbx and the return address are saved, and what the walk does not follow (expressions)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from strobe.symbols.cfi import RETURN_ADDRESS, cfa_rule, has_unwind_info, unwind_rule

pytestmark = pytest.mark.skipif(shutil.which("readelf") is None, reason="binutils (readelf) not installed")

TARGETS = Path(__file__).parents[1] / "targets"
_FDE = re.compile(r"^\S+ \S+ \S+ FDE cie=\S+ pc=([0-9a-f]+)\.\.([0-9a-f]+)$")
_REGISTERS = {"rbx": 3, "rbp": 6, "r12": 12, "r13": 13, "r14": 14, "r15": 15, "ra": RETURN_ADDRESS}
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def readelf_rows(path: Path | str) -> Iterator[tuple[int, int, str, dict[str, str]]]:
    """(row start, FDE end, CFA column, {register: column}) of every row readelf prints."""
    # readelf exits with 1 on a stripped library (no .debug_* sections) but prints .eh_frame all the same
    text = subprocess.run(["readelf", "--debug-dump=frames-interp", str(path)], capture_output=True, text=True,
                          check=False).stdout
    end, header, in_fde = 0, [], False
    for line in text.splitlines():
        fde = _FDE.match(line)
        if fde is not None or " CIE " in line:
            end, header, in_fde = (int(fde.group(2), 16) if fde else 0), [], fde is not None
            continue
        fields = line.split()
        if fields[:2] == ["LOC", "CFA"] and in_fde:
            header = fields[2:]
        elif header and len(fields) == len(header) + 2 and re.fullmatch(r"[0-9a-f]{16}", fields[0]):
            yield int(fields[0], 16), end, fields[1], dict(zip(header, fields[2:], strict=True))


def check(path: Path | str, keep: Callable[[int], bool] = lambda start: True) -> int:
    checked = 0
    for start, _end, cfa, columns in readelf_rows(path):
        if not keep(start):
            continue
        rule = unwind_rule(str(path), start)
        assert rule is not None and has_unwind_info(str(path), start), hex(start)
        if cfa == "exp":
            assert rule.cfa_register is None and cfa_rule(str(path), start) is None, hex(start)
        else:
            register, offset = re.fullmatch(r"(\w+)\+(\d+)", cfa).groups()  # type: ignore[union-attr]
            expected = ({"rsp": 7, "rbp": 6}[register], int(offset))
            assert (rule.cfa_register, rule.cfa_offset) == expected == cfa_rule(str(path), start), hex(start)
        for name, column in columns.items():
            number = _REGISTERS.get(name)
            if number is None:
                continue
            if column.startswith("c-") or column.startswith("c+"):
                assert rule.saved.get(number) == int(column[1:]), (hex(start), name, column)
            elif column == "u" and name == "ra":
                assert rule.outermost, hex(start)
            elif column not in ("u", "s"):
                assert number in rule.lost, (hex(start), name, column)  # exp, r<n>: not followed
            else:
                assert number not in rule.saved, (hex(start), name)
        checked += 1
    return checked


def test_c_at_o0_and_o2(c_target: Callable[[str], Path], build_dir: Path) -> None:
    assert check(c_target("frames")) >= 20
    optimised = build_dir / "frames-O2"
    if not optimised.exists():
        subprocess.run(["gcc", "-g", "-O2", "-o", str(optimised), str(TARGETS / "frames.c")], check=True)
    assert check(optimised) >= 10


def test_cpp_and_rust_debug_builds(cpp_target: Callable[[str], Path],
                                   rust_target: Callable[[str], Path]) -> None:
    assert check(cpp_target("frames_cpp")) >= 20
    assert check(rust_target("rust_frames")) >= 500  # the standard library is linked in


@pytest.mark.skipif(not os.path.exists(LIBC), reason="no glibc at the usual path")
def test_a_sample_of_libc() -> None:
    assert check(LIBC, lambda start: start % 7 == 0) >= 100


def test_addresses_without_cfi(c_target: Callable[[str], Path]) -> None:
    binary = str(c_target("frames"))
    assert unwind_rule(binary, 0) is None and cfa_rule(binary, 0) is None and not has_unwind_info(binary, 0)
    assert unwind_rule("/nonexistent/binary", 0x1000) is None and not has_unwind_info("/nonexistent/binary", 0x1000)
