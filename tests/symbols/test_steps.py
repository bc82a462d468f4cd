"""step_lines and line_code_ranges (strobe.symbols.addresses) and cfa_rule (strobe.symbols.cfi) on
tests/targets/steps.c built at test time, checked against the source and objdump's disassembly."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from strobe.symbols.addresses import line_code_ranges, locate, step_lines
from strobe.symbols.cfi import cfa_rule

SOURCE = Path(__file__).parents[1] / "targets" / "steps.c"
RBP, RSP = 6, 7


def line_of(needle: str) -> int:
    text = SOURCE.read_text()
    return text[: text.index(needle)].count("\n") + 1


def symbol(binary: Path, name: str) -> int:
    out = subprocess.run(["nm", str(binary)], check=True, capture_output=True, text=True).stdout
    return next(int(parts[0], 16) for parts in map(str.split, out.splitlines()) if parts[-1] == name)


def test_step_lines_of_a_function_are_its_other_lines_first_instructions(c_target: Callable[[str], Path]) -> None:
    binary = str(c_target("steps"))
    work = symbol(Path(binary), "work")
    at_entry = step_lines(binary, work)
    assert at_entry is not None and at_entry.function_start == work and at_entry.line == line_of("int work(int a)")
    lines = [locate(binary, stop).line for stop in at_entry.stops]  # type: ignore[union-attr]
    assert lines == [line_of("int s = square(a);"), line_of("int t = op(a + 1);"), line_of("int f = fact(3);"),
                     line_of("return s + t + f;"), line_of("int work(int a)") + 5]  # and the closing brace
    assert all(work <= stop < at_entry.function_end for stop in at_entry.stops)
    assert at_entry.line_code[0][0] == work  # the prologue is the opening line's code

    second = step_lines(binary, at_entry.stops[1])  # from `int t = op(a + 1);`: its own line is not a stop
    assert second is not None and second.line == line_of("int t = op(a + 1);")
    assert at_entry.stops[1] not in second.stops and work in second.stops  # a recursive call would enter there
    [(low, high)] = second.line_code
    assert low == at_entry.stops[1] and high == at_entry.stops[2]

    assert step_lines(binary, 0x10) is None  # no function there
    ranges = line_code_ranges(binary)
    assert any(low <= work < high for low, high in ranges)
    assert not any(low <= symbol(Path(binary), "_start") < high for low, high in ranges)  # crt: no line table


def test_cfa_rule_follows_the_prologue(c_target: Callable[[str], Path]) -> None:
    binary = str(c_target("steps"))
    square = symbol(Path(binary), "square")  # push rbp; mov rbp, rsp; ...
    assert cfa_rule(binary, square) == (RSP, 8)  # the return address is on top
    assert cfa_rule(binary, square + 1) == (RSP, 16)  # rbp pushed
    assert cfa_rule(binary, square + 4) == (RBP, 16)  # the frame pointer is set up
    assert cfa_rule(binary, 0x10) is None
    assert cfa_rule("/nonexistent", square) is None
