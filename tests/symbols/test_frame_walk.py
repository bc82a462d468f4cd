"""unwind() over fabricated stacks and call frame information: an rbp-based chain (gcc/clang -O0), an rsp-based one
(Rust debug builds, no frame pointer), a return address that is not the backtrace's next frame (stop, or the stack's
chain when it is known code), the agent's backtrace extended past its end, a dump that ends too soon, no CFI."""

from __future__ import annotations

from strobe.symbols.cfi import RETURN_ADDRESS, UnwindRule
from strobe.symbols.frame_walk import RBP, RBX, RSP, CodeFrame, Rules, StackDump, dwarf_registers, unwind

BASE = 0x7FFF_0000
MODULE = "/bin/app"
SLIDE = 0x5555_0000_0000

# Static code of the fabricated program: three functions and their CFI rows (address -> rule).
LEAF, MIDDLE, OUTER = 0x1100, 0x1200, 0x1300
RBP_BODY = UnwindRule(RBP, 16, {RETURN_ADDRESS: -8, RBP: -16})  # after push rbp; mov rbp, rsp
RSP_BODY = UnwindRule(RSP, 0x30, {RETURN_ADDRESS: -8})  # after sub rsp, 0x28: no frame pointer
AT_ENTRY = UnwindRule(RSP, 8, {RETURN_ADDRESS: -8})


def stack_of(words: dict[int, int], size: int = 0x400) -> StackDump:
    data = bytearray(size)
    for address, value in words.items():
        data[address - BASE : address - BASE + 8] = value.to_bytes(8, "little")
    return StackDump(BASE, bytes(data))


def code(static: int, returns: bool = True, scanned: bool = False) -> CodeFrame:
    return CodeFrame(SLIDE + static, MODULE, SLIDE, returns, scanned)


def rules_of(table: dict[tuple[int, int], UnwindRule]) -> Rules:
    def rules(module: str, static: int) -> UnwindRule | None:
        assert module == MODULE
        return next((rule for (low, high), rule in table.items() if low <= static < high), None)

    return rules


def test_a_frame_pointer_chain_gives_each_frame_its_cfa_and_rbp() -> None:
    # leaf's frame: rbp = BASE+0x100, saved rbp (middle's) at +0x100, return into middle at +0x108
    stack = stack_of({BASE + 0x100: BASE + 0x200, BASE + 0x108: SLIDE + MIDDLE + 0x20,
                      BASE + 0x200: BASE + 0x300, BASE + 0x208: SLIDE + OUTER + 0x10})
    rules = rules_of({(LEAF, LEAF + 0x40): RBP_BODY, (MIDDLE, MIDDLE + 0x40): RBP_BODY,
                      (OUTER, OUTER + 0x40): RBP_BODY})
    frames = [code(LEAF + 0x8, returns=False), code(MIDDLE + 0x20), code(OUTER + 0x10)]
    registers = {RSP: BASE + 0xF0, RBP: BASE + 0x100, RBX: 7}
    chain, states = unwind(frames, registers, stack, rules)
    assert chain == frames
    assert [s.cfa for s in states] == [BASE + 0x110, BASE + 0x210, BASE + 0x310]
    assert [s.registers.get(RBP) for s in states] == [BASE + 0x100, BASE + 0x200, BASE + 0x300]
    assert states[1].registers[RSP] == BASE + 0x110 and states[1].registers[RBX] == 7  # callee-saved: kept
    assert all(s.unreached is None for s in states)


def test_rsp_based_frames_without_a_frame_pointer() -> None:
    # Rust debug code: the function at its entry (a hook), its caller with `sub rsp, 0x28`
    stack = stack_of({BASE + 0x100: SLIDE + MIDDLE + 0x11, BASE + 0x130: SLIDE + OUTER + 0x5})
    rules = rules_of({(LEAF, LEAF + 1): AT_ENTRY, (MIDDLE, MIDDLE + 0x40): RSP_BODY, (OUTER, OUTER + 0x40): RSP_BODY})
    frames = [code(LEAF, returns=False), code(MIDDLE + 0x11), code(OUTER + 0x5)]
    chain, states = unwind(frames, {RSP: BASE + 0x100, RBP: 0xDEAD}, stack, rules)
    assert chain == frames and [s.cfa for s in states] == [BASE + 0x108, BASE + 0x138, BASE + 0x168]
    assert states[1].registers[RSP] == BASE + 0x108  # the caller's rsp is the callee's CFA: its frame base


def test_a_return_address_that_is_not_the_next_frame_stops_the_walk() -> None:
    """Frida's hook of a traced function put its own return address on the stack: the frames past it are not
    guessed at, they say why."""
    stack = stack_of({BASE + 0x100: BASE + 0x200, BASE + 0x108: 0x7F00_DEAD_0000})  # not code of the module
    rules = rules_of({(LEAF, LEAF + 0x40): RBP_BODY, (MIDDLE, MIDDLE + 0x40): RBP_BODY})
    frames = [code(LEAF + 0x8, returns=False), code(MIDDLE + 0x20), code(OUTER + 0x10)]
    known = lambda address: None  # noqa: E731 - nothing known but the backtrace
    chain, states = unwind(frames, {RSP: BASE + 0xF0, RBP: BASE + 0x100}, stack, rules, known=known)
    assert chain == frames and states[0].cfa == BASE + 0x110
    assert states[1].cfa is None and "not the backtrace's next frame" in str(states[1].unreached)
    assert states[2].unreached == states[1].unreached


def test_known_code_on_the_stack_replaces_the_rest_and_extends_the_backtrace() -> None:
    """The agent's backtrace repeats the caller (as Frida's does at a hook) and stops: the stack's chain, through
    code the walk knows, replaces the repeat and goes on to the outermost frame."""
    stack = stack_of({BASE + 0x100: SLIDE + MIDDLE + 0x11, BASE + 0x130: SLIDE + OUTER + 0x5})
    outermost = UnwindRule(RSP, 0x30, {RETURN_ADDRESS: -8}, outermost=True)
    rules = rules_of({(LEAF, LEAF + 1): AT_ENTRY, (MIDDLE, MIDDLE + 0x40): RSP_BODY, (OUTER, OUTER + 0x40): outermost})

    def known(address: int) -> CodeFrame | None:
        return CodeFrame(address, MODULE, SLIDE, True, unwound=True) if address > SLIDE else None

    frames = [code(LEAF, returns=False), code(MIDDLE + 0x11), code(MIDDLE + 0x11)]
    chain, states = unwind(frames, {RSP: BASE + 0x100}, stack, rules, known=known)
    assert [f.address - SLIDE for f in chain] == [LEAF, MIDDLE + 0x11, OUTER + 0x5]
    assert [f.unwound for f in chain] == [False, False, True]
    assert [s.cfa for s in states] == [BASE + 0x108, BASE + 0x138, BASE + 0x168]


def test_a_dump_that_ends_too_soon_and_code_without_cfi() -> None:
    rules = rules_of({(LEAF, LEAF + 0x40): RBP_BODY})
    frames = [code(LEAF + 0x8, returns=False), code(MIDDLE + 0x20), code(OUTER + 0x10)]
    short = StackDump(BASE, bytes(0x100))  # the return address at +0x108 is past its end
    _, states = unwind(frames, {RSP: BASE + 0xF0, RBP: BASE + 0x100}, short, rules)
    assert states[0].cfa == BASE + 0x110 and "outside the dumped stack" in str(states[1].unreached)

    stack = stack_of({BASE + 0x100: BASE + 0x200, BASE + 0x108: SLIDE + MIDDLE + 0x20})
    _, states = unwind(frames, {RSP: BASE + 0xF0, RBP: BASE + 0x100}, stack, rules)
    assert states[1].cfa is None and states[1].registers[RBP] == BASE + 0x200  # entered with these registers
    assert "no call frame information" in str(states[2].unreached)


def test_the_agents_register_names() -> None:
    assert dwarf_registers({"pc": "0x10", "sp": "0x20", "rbp": "0x30", "rax": "0x1", "r15": "0x2"}) == {
        RSP: 0x20, RBP: 0x30, 0: 1, 15: 2}
