"""symbols/hook_safety.py on real machine code: small functions written in assembly (so their bytes are known),
compiled and linked by gcc at test time, read back from the ELF file like the daemon reads them; the batch check
against the one-by-one check on libc's functions and on random bytes; a crash inside a hook's bytes blamed on it
(daemon/crashes.py)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strobe.daemon.crashes import describe_crash, hook_covering
from strobe.daemon.symbols import TraceableFunction
from strobe.instrument.protocol import CrashReport
from strobe.symbols import hook_safety
from strobe.symbols.elf import open_elf, read_symbol_table
from strobe.symbols.hook_safety import HookSafety, ModuleCode, Verdict, entry_verdict, entry_verdicts
from strobe.symbols.index import FunctionInfo

# Each function: what it computes does not matter, its branches do. Offsets in the comments.
SOURCE = r"""
#define FUNCTION(name, body) \
    ".globl " #name "\n.type " #name ", @function\n" #name ":\n" body ".size " #name ", .-" #name "\n"
#define PROLOGUE "mov eax, 0\nmov ecx, 0\nmov edx, 0\nmov r8d, 0\n"

__asm__(".intel_syntax noprefix\n.text\n"
    /* the loop lands at +2, inside the bytes a hook overwrites */
    FUNCTION(loop_into_entry, "xor eax, eax\n1: add eax, edi\ndec edi\njnz 1b\nret\n")
    /* the loop starts at +21: past the 16 bytes, rounded up to whole instructions (21) */
    FUNCTION(loop_after_prologue, PROLOGUE "1: add eax, edi\ndec edi\njnz 1b\nret\n")
    /* the loop lands at +15: inside 16 bytes, outside 5 */
    FUNCTION(loop_at_15, "mov eax, 0\nmov ecx, 0\nmov edx, 0\n1: add eax, edi\ndec edi\njnz 1b\nret\n")
    /* after 21 bytes without branches, a jump back to the first instruction (a tail call to itself) at +0x1b */
    FUNCTION(jump_to_start, PROLOGUE "test edi, edi\njz 1f\ndec edi\njmp jump_to_start\n1: ret\n")
    /* the same with a call to itself: recursion, which goes through the hook like any call */
    FUNCTION(recurse, PROLOGUE "test edi, edi\njz 1f\ndec edi\ncall recurse\n1: ret\n")
    /* a 10-byte first instruction, an 8-byte second one: a hook overwrites 18 bytes; the loop lands at +10 */
    FUNCTION(long_first_loop_at_10, "movabs rax, 0x1122334455667788\n"
                                    "1: lea rdx, [rax + rax*2 + 0x12345678]\ndec edi\njnz 1b\nret\n")
    /* the same two instructions, the loop at +18: just past them */
    FUNCTION(long_first_loop_at_18, "movabs rax, 0x1122334455667788\nlea rdx, [rax + rax*2 + 0x12345678]\n"
                                    "1: dec edi\njnz 1b\nret\n")
    /* a conditional jump inside the overwritten bytes, forward to another of them (+2 -> +9) */
    FUNCTION(forward_inside, "test edi, edi\njz 1f\nmov eax, 1\n1: mov ecx, 2\nmov edx, 3\nmov eax, ecx\nret\n")
    ".att_syntax prefix\n");

int main(void) { return 0; }
"""


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hook_safety")
    (root / "asm_functions.c").write_text(SOURCE)
    out = root / "asm_functions"
    subprocess.run(["gcc", "-O0", "-o", str(out), str(root / "asm_functions.c")], check=True)
    return out


def symbols(path: Path) -> dict[str, tuple[int, int]]:
    with open_elf(path) as elf:
        table = read_symbol_table(elf)
    return {table.name(i): (int(table.addresses[i]), int(table.sizes[i])) for i in range(len(table))}


@pytest.fixture(scope="module")
def check(program: Path) -> Callable[..., Verdict]:
    found, code = symbols(program), ModuleCode(str(program))

    def verdict(name: str, overwritten: int = hook_safety.OVERWRITTEN_BYTES) -> Verdict:
        address, size = found[name]
        return entry_verdict(code.read(address, size), address, overwritten)

    return verdict


def test_a_loop_back_into_the_first_bytes_is_refused_with_where(check: Callable[..., Verdict]) -> None:
    verdict = check("loop_into_entry")
    assert not verdict.safe
    assert verdict.reason == ("a jump at +0x6 lands at +0x2, inside the first 16 bytes, which Strobe's hook "
                              "overwrites")


def test_a_loop_past_the_overwritten_bytes_is_accepted(check: Callable[..., Verdict]) -> None:
    assert check("loop_after_prologue") == Verdict(True)


def test_the_conservative_figure_refuses_what_a_near_jump_alone_would_not(check: Callable[..., Verdict]) -> None:
    verdict = check("loop_at_15")
    assert not verdict.safe and "lands at +0xf, inside the first 17 bytes" in str(verdict.reason)
    assert check("loop_at_15", overwritten=5).safe  # Frida's usual 5-byte jump leaves +15 alone


def test_a_jump_to_the_first_instruction_is_refused_a_recursive_call_is_not(check: Callable[..., Verdict]) -> None:
    verdict = check("jump_to_start")
    assert not verdict.safe
    assert str(verdict.reason).startswith("a jump at +0x1b goes back to its first instruction")
    assert check("recurse").safe


def test_a_long_first_instruction_rounds_the_span_up_to_whole_instructions(check: Callable[..., Verdict]) -> None:
    verdict = check("long_first_loop_at_10")
    assert not verdict.safe and "lands at +0xa, inside the first 18 bytes" in str(verdict.reason)
    assert check("long_first_loop_at_18").safe
    assert check("long_first_loop_at_10", overwritten=5).safe  # 5 bytes round up to the 10-byte movabs


def test_a_branch_between_two_of_the_overwritten_instructions_is_refused(check: Callable[..., Verdict]) -> None:
    verdict = check("forward_inside")
    assert not verdict.safe and str(verdict.reason).startswith("a jump at +0x2 lands at +0x9")


def test_verdicts_from_the_file_are_remembered_per_build(program: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = symbols(program)
    names = ["loop_into_entry", "loop_after_prologue", "recurse", "main"]
    safety = HookSafety()
    first = safety.verdicts(str(program), [found[name] for name in names])
    assert [v is not None and v.safe for v in first] == [False, True, True, True]
    assert safety.span(str(program), found["loop_after_prologue"][0]) == 21
    assert safety.span(str(program), found["loop_at_15"][0]) == 17
    monkeypatch.setattr(hook_safety, "entry_verdicts", lambda *a, **k: pytest.fail("disassembled again"))
    assert safety.verdicts(str(program), [found[name] for name in names]) == first


def test_what_cannot_be_checked_is_none(program: Path, tmp_path: Path) -> None:
    safety = HookSafety()
    address, _ = symbols(program)["loop_into_entry"]
    (tmp_path / "text").write_text("not an ELF file")
    assert safety.verdicts(str(program), [(address, 0), (0x7FFF_FFFF_0000, 16)]) == [None, None]
    assert safety.verdicts(str(tmp_path / "text"), [(address, 16)]) == [None]
    assert safety.verdicts(str(tmp_path / "missing"), [(address, 16)]) == [None]


def libc_functions() -> tuple[str, list[tuple[int, int]]]:
    path = "/lib/x86_64-linux-gnu/libc.so.6"
    if not Path(path).exists():
        pytest.skip("no libc.so.6 at the Debian path")
    with open_elf(path) as elf:
        table = read_symbol_table(elf)
    return path, sorted({(int(a), int(s)) for a, s in zip(table.addresses, table.sizes, strict=True) if s > 0})


def test_the_batch_check_agrees_with_one_by_one_on_libc() -> None:
    path, functions = libc_functions()
    code = ModuleCode(path)
    pairs = [(code.read(address, size), address) for address, size in functions]
    batch = entry_verdicts(pairs)
    assert batch == [entry_verdict(c, a) for c, a in pairs]
    assert 0 < sum(not v.safe for v in batch) < len(batch) // 10  # some refused, most not


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=120), min_size=1, max_size=8),
       st.integers(min_value=0x1000, max_value=0x7FFF_0000))
def test_the_prefilter_misses_no_branch(codes: list[bytes], base: int) -> None:
    pairs = [(code, base + 0x1000 * i) for i, code in enumerate(codes)]
    assert entry_verdicts(pairs) == [entry_verdict(code, address) for code, address in pairs]


def crash_at(pc: int) -> CrashReport:
    return CrashReport.model_validate({
        "type": "crash", "tid": 4242, "kind": "illegal-instruction", "signal": "SIGILL", "address": hex(pc),
        "siginfo": {"signo": 4, "code": 2}, "registers": {"pc": hex(pc), "sp": "0x7ffe0000", "rbp": "0x7ffe0200"},
        "frames": [], "stackBase": "0x7ffe0000", "stackSize": 0, "sec": 1, "nsec": 5})


def test_a_crash_inside_the_bytes_a_hook_overwrote_is_blamed_on_the_hook(program: Path) -> None:
    address, size = symbols(program)["loop_after_prologue"]
    info = FunctionInfo(name="loop_after_prologue", raw="loop_after_prologue", signature="loop_after_prologue",
                        address=address, size=size, file=None, line=None, inlined_only=False, params=0)
    base = 0x5555_5555_4000  # where the PIE is loaded
    hooked = [TraceableFunction(info, str(program), base + address)]
    safety = HookSafety()

    def describe(pc: int) -> dict[str, Any]:
        return describe_crash(crash_at(pc), b"", 7, lambda path, at: None, "main", None,
                              lambda at: hook_covering(at, hooked, safety.span))

    inside = describe(base + address + 20)  # the last of the 21 bytes a hook there overwrites
    assert inside["strobeHook"] == "loop_after_prologue"
    assert inside["likelyCause"].startswith("likely caused by Strobe's hook on loop_after_prologue: the program "
                                            "crashed inside the bytes the hook overwrote")
    assert inside["text"] == (f"SIGILL (ILL_ILLOPN) at {hex(base + address + 20)}, thread main (4242); likely caused "
                              "by Strobe's hook on loop_after_prologue")
    for own in (describe(base + address + 21), describe(base + address - 1)):  # the program's own code
        assert "strobeHook" not in own and "likelyCause" not in own and "Strobe" not in own["text"]
