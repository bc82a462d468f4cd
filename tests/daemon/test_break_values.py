"""Conditions and logpoint messages compiled against tests/targets/breaks.c built at test time: which names become
reads, where each read starts (the frame's registers at a line, the argument registers at an entry, a global's
address), and the refusals that name what can be read instead. The agent's side runs in tests/e2e/test_breakpoints.py.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from strobe.daemon.break_values import RegisterArg, SiteScope, compile_message, compile_text, condition_args, site_scope
from strobe.errors import ValidationError
from strobe.instrument.requests import ValueRead
from strobe.symbols.addresses import line_sites

SOURCE = Path(__file__).parents[1] / "targets" / "breaks.c"


def symbol(binary: Path, name: str) -> int:
    listed = subprocess.run(["nm", str(binary)], capture_output=True, text=True, check=True).stdout
    return next(int(parts[0], 16) for parts in map(str.split, listed.splitlines()) if parts[-1] == name)


@pytest.fixture(scope="module")
def at_line(c_target: Callable[[str], Path]) -> SiteScope:
    """add_to's `acc->total = before + n;` line: acc, n, before in its frame."""
    binary = c_target("breaks")
    text = SOURCE.read_text()
    line = text[: text.index("acc->total = before + n;")].count("\n") + 1
    found = line_sites(str(binary), "breaks.c", line)
    assert found is not None and len(found.addresses) == 1
    return site_scope(str(binary), 0, found.addresses[0], False, where="breaks.c:add")


def at_entry(binary: Path, function: str) -> SiteScope:
    address = symbol(binary, function)
    args = [RegisterArg(a["name"], a["reg"], a["size"], a["signed"]) for a in condition_args(str(binary), address)]
    return site_scope(str(binary), 0, address, True, args, f"the entry of {function}")


def test_a_lines_locals_are_read_from_the_frame_and_globals_from_their_address(at_line: SiteScope) -> None:
    reads: list[ValueRead] = []
    compiled = compile_text("n > 100 && acc->total >= 150 && g_total > 0 && acc->owner == 'acc'", at_line, reads)
    assert compiled.text == "$v(0) > 100 && $v(1) >= 150 && $v(2) > 0 && $v(3) == 'acc'"  # a string stays text
    assert compiled.names == ["n", "acc->total", "g_total", "acc->owner"]
    n, total, g_total, owner = reads
    # gcc -O0 keeps its locals below rbp (frame base: the CFA, rbp + 16 once the frame is set up).
    assert (n.get("reg"), n["derefs"], n["kind"], n["size"], n["load"]) == ("rbp", [], "int", 4, True)
    assert n["add"] < 0
    assert (total.get("reg"), total["derefs"], total["offset"], total["size"]) == ("rbp", [0], 8, 8)
    assert at_line.index is not None and g_total.get("address") == hex(symbol(Path(at_line.index.path), "g_total"))
    assert (owner["kind"], owner["offset"]) == ("cstring", 16)


def test_javascript_stays_javascript(at_line: SiteScope) -> None:
    assert compile_text("Math.max(n, 1) > 0 && acc->owner.length === 3", at_line).text == (
        "Math.max($v(0), 1) > 0 && $v(1).length === 3")
    assert compile_text("(before).toString(16) !== '0'", at_line).text == "($v(0)).toString(16) !== '0'"
    reads: list[ValueRead] = []
    message = compile_message("n={n} total={acc->total * 2} at={acc} plain", at_line, reads)
    assert message == "n={$v(0)} total={$v(1) * 2} at={$v(2)} plain"
    assert [r["kind"] for r in reads] == ["int", "int", "pointer"]


@pytest.mark.parametrize(("text", "expected"), [
    ("nn > 1", "'nn' is not a parameter or local in scope at breaks.c:add"),
    ("nn > 1", "Did you mean 'n'?"),
    ("acc->totl", "has no field 'totl'. Did you mean 'total'?"),
    ("acc.total", "use '->' instead of '.'"),
    ("before.x", "not a struct"),
    ("g_account", "is a struct (account): name one of its fields (id, total, owner)"),
])
def test_names_that_cannot_be_read_are_refused_with_why(at_line: SiteScope, text: str, expected: str) -> None:
    with pytest.raises(ValidationError) as raised:
        compile_text(text, at_line)
    assert expected in raised.value.message, raised.value.message


def test_at_an_entry_parameters_come_from_their_registers(c_target: Callable[[str], Path]) -> None:
    binary = c_target("breaks")
    scope = at_entry(binary, "add_to")
    reads: list[ValueRead] = []
    assert compile_text("n == 150 && acc->total > 100 && args[1] > 0", scope, reads).text == (
        "$v(0) == 150 && $v(1) > 100 && args[1] > 0")
    n, total = reads
    assert (n.get("reg"), n["load"], n["size"], n["kind"]) == ("rsi", False, 4, "int")  # the register is the value
    assert (total.get("reg"), total["load"], total["derefs"], total["offset"]) == ("rdi", True, [], 8)  # points into
    with pytest.raises(ValidationError) as raised:
        compile_text("before > 0", scope)  # a local: it does not exist yet at the entry
    assert "is not a parameter at the entry of add_to" in raised.value.message
    order = at_entry(binary, "process_order")
    assert compile_text("qty > 0 && g_account.total >= 0", order).names == ["qty", "g_account.total"]


def test_at_an_entry_float_and_stack_parameters_are_read_where_they_arrive(c_target: Callable[[str], Path]) -> None:
    # floating(int a, double d, long b, float f, unsigned char c): d in xmm0, f in xmm1; many()'s g and h on the
    # stack above the return address. A condition's integer arguments stay the integer registers.
    binary = c_target("abi")
    assert [(a["name"], a["reg"]) for a in condition_args(str(binary), symbol(binary, "floating"))] == [
        ("a", "rdi"), ("b", "rsi"), ("c", "rdx")]
    reads: list[ValueRead] = []
    compile_text("d > 1.0 && f < 3", at_entry(binary, "floating"), reads)
    assert [(r.get("reg"), r["size"], r["kind"], r["load"]) for r in reads] == [
        ("xmm0", 8, "float", False), ("xmm1", 4, "float", False)]
    reads = []
    compile_text("g + h == 15", at_entry(binary, "many"), reads)
    assert [(r.get("reg"), r["add"], r["size"], r["kind"], r["load"]) for r in reads] == [
        ("rsp", 8, 8, "int", True), ("rsp", 16, 8, "int", True)]
    with pytest.raises(ValidationError) as raised:  # a struct passed on the stack: whole scalars only
        compile_text("b.v[0] > 0", at_entry(binary, "by_big"))
    assert "passed by value outside the integer registers" in raised.value.message
