"""Register plans from DWARF signatures (System V x86-64, Itanium C++ ABI), without a process: which captured
register holds which parameter, what is not captured and why, decoded by the store's plan reader. One test
checks the plans against the registers gdb sees at the entry and exit of each function of tests/targets/abi.c."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.mcp.wire_pages import query_wire

from strobe.daemon.signatures import CLOSURE_ENVIRONMENT, register_plan
from strobe.instrument.records import WATCH_CAPTURE_RETURN, WATCH_CAPTURE_STACK, WATCH_CAPTURE_XMM
from strobe.store.functions import insert_functions, set_signatures
from strobe.store.query import EventFilter
from strobe.store.registers import parse_plan
from strobe.store.schema import EventKind, connect
from strobe.store.sessions import insert_session
from strobe.symbols.demangle import demangle
from strobe.symbols.elf import function_symbols, open_elf

MASK = (1 << 64) - 1
GARBAGE = 0xDEAD_BEEF << 32  # what may sit above a narrow value in its register
LATE = "<not captured: recorded before the function's argument plan reached the program>"


def address_of(binary: Path, name: str) -> int:
    """Static address of a function, by its plain or demangled qualified name."""
    with open_elf(binary) as elf:
        symbols = function_symbols(elf)
    for symbol in symbols:
        if "." in symbol.name:  # a compiler-made part or clone (foo.cold, foo.isra.0)
            continue
        if symbol.name == name or demangle(symbol.name).name == name:
            return symbol.address
    raise AssertionError(f"{name} not in {binary}")


def plan_of(binary: Path, name: str) -> dict[str, Any]:
    text = register_plan(str(binary), address_of(binary, name))
    assert text is not None
    plan: dict[str, Any] = json.loads(text)
    return plan


def where(slot: dict[str, Any]) -> Any:
    """The registers of a parameter (or return value) in order, a missing piece's note, or the slot's note."""
    if "note" in slot:
        return slot["note"]
    return [p.get("reg") or p["missing"] for p in slot.get("pieces", [])]


def params(plan: dict[str, Any]) -> list[tuple[str, str, Any]]:
    return [(p["name"], p["type"], where(p)) for p in plan["params"]]


def call(binary: Path, name: str, words: list[int], rax: int | None = None,
         exit_words: list[int] | None = None) -> tuple[list[Any], Any]:
    """The arguments (and return value) the store shows for these words: an enter's integer registers (then
    xmm0-5 and six stack words when its plan captures them), an exit's rax and rdx, xmm0, xmm1."""
    text = register_plan(str(binary), address_of(binary, name))
    plan = parse_plan(text)
    assert plan is not None
    signed = [w - (1 << 64) if w >> 63 else w for w in words]
    return plan.arguments(signed), plan.return_value(rax, [w - (1 << 64) if w >> 63 else w for w in exit_words or []])


def bits(value: float, fmt: str = "<d") -> int:
    """The register word holding a float or double (its low bytes)."""
    return int.from_bytes(struct.pack(fmt, value).ljust(8, b"\0"), "little")


def wide(gprs: list[int], xmm: list[int] = (), stack: list[int] = ()) -> list[int]:  # type: ignore[assignment]
    """An enter's WIDE_WORDS: six integer registers, xmm0-5, six stack words."""
    return [*gprs, *[0] * (6 - len(gprs)), *xmm, *[0] * (6 - len(xmm)), *stack, *[0] * (6 - len(stack))]


@pytest.fixture(scope="module")
def abi(c_target: Callable[[str], Path]) -> Path:
    return c_target("abi")


@pytest.fixture(scope="module")
def abi_cpp(cpp_target: Callable[[str], Path]) -> Path:
    return cpp_target("abi_cpp")


# ---- integer scalars -------------------------------------------------------------------------------


def test_integer_scalars_take_the_argument_registers_in_order(abi: Path) -> None:
    plan = plan_of(abi, "scalars")
    assert params(plan) == [
        ("i", "int", ["rdi"]), ("u", "unsigned int", ["rsi"]), ("s", "short int", ["rdx"]),
        ("c", "char", ["rcx"]), ("b", "_Bool", ["r8"]), ("col", "color", ["r9"]),
    ]
    assert plan["registers"] == 6 and plan["variadic"] is False
    assert plan["returns"]["type"] == "int" and where(plan["returns"]) == ["rax"]


def test_narrow_values_use_only_their_low_bytes(abi: Path) -> None:
    # -1 arrives as 0x00000000ffffffff (or with garbage above), a short's sign extension stops at 32 bits.
    words = [GARBAGE | 0xFFFF_FFFF, GARBAGE | 4_000_000_000, 0xFFFF_FFFE, GARBAGE | ord("x"), GARBAGE | 0x01,
             0xFFFF_FFFF]
    arguments, returned = call(abi, "scalars", words, rax=GARBAGE | 0xFFFF_FF9C)
    assert arguments == [-1, 4_000_000_000, -2, "x", True, "BLUE"]
    assert returned == -100


def test_widths_and_signs(abi: Path) -> None:
    words = [0xFFFF_FFF9, 65000, -(1 << 50) & MASK, 18_000_000_000_000_000_000]
    arguments, _ = call(abi, "widths", words)
    assert arguments == [-7, 65000, -(1 << 50), 18_000_000_000_000_000_000]
    assert [t for _, t, _ in params(plan_of(abi, "widths"))] == [
        "signed char", "short unsigned int", "long long int", "long unsigned int"
    ]


def test_pointers_are_hex_or_null(abi: Path) -> None:
    arguments, _ = call(abi, "pointers", [0x7FFD_1234_5678, 0x5555_5555_6004, 0])
    assert arguments == ["0x7ffd12345678", "0x555555556004", None]
    assert [t for _, t, _ in params(plan_of(abi, "pointers"))] == ["int*", "char*", "int*"]


def test_enum_values_without_a_name_show_as_numbers(abi: Path) -> None:
    _, returned = call(abi, "pick", [2], rax=5)
    assert returned == "GREEN"
    _, returned = call(abi, "pick", [2], rax=GARBAGE | 7)
    assert returned == 7


# ---- floating point --------------------------------------------------------------------------------


def test_floating_point_parameters_are_in_xmm_registers_and_do_not_shift_the_others(abi: Path) -> None:
    plan = plan_of(abi, "floating")
    assert params(plan) == [
        ("a", "int", ["rdi"]), ("d", "double", ["xmm0"]), ("b", "long int", ["rsi"]), ("f", "float", ["xmm1"]),
        ("c", "unsigned char", ["rdx"]),
    ]
    assert plan["capture"] == WATCH_CAPTURE_XMM
    words = wide([0xFFFF_FFFB, 1 << 40, GARBAGE | 200], xmm=[bits(1.25), GARBAGE | bits(2.5, "<f")])
    assert call(abi, "floating", words)[0] == [-5, 1.25, 1 << 40, 2.5, 200]


def test_a_call_recorded_before_its_plan_reached_the_agent_says_so(abi: Path) -> None:
    arguments, _ = call(abi, "floating", [0xFFFF_FFFB, 1 << 40, 200])  # no xmm words: recorded too early
    assert arguments[1] == arguments[3] == LATE and arguments[0] == -5
    assert call(abi, "half", [17], rax=0x1234)[1] == LATE


def test_float_returns_are_in_xmm0(abi: Path) -> None:
    plan = plan_of(abi, "half")
    assert where(plan["returns"]) == ["xmm0"] and plan["capture"] == WATCH_CAPTURE_RETURN
    assert call(abi, "half", [17], rax=0x1234, exit_words=[0, bits(8.5), 0])[1] == 8.5


def test_long_double_is_on_the_stack_and_returned_in_st0(abi: Path) -> None:
    plan = plan_of(abi, "extended")
    assert params(plan) == [("x", "long double", ["stack0", "stack1"]), ("after", "int", ["rdi"])]
    assert plan["returns"]["note"] == "<long double in st0: not captured>"
    x87 = (0xC000_0000_0000_0000, 0x3FFF)  # 1.5: mantissa 1.1b, biased exponent 16383
    assert call(abi, "extended", wide([22], stack=[x87[0], GARBAGE | x87[1]]))[0] == [1.5, 22]


# ---- structs by value ------------------------------------------------------------------------------


def test_a_small_struct_is_decoded_from_its_register(abi: Path) -> None:
    assert params(plan_of(abi, "by_pair")) == [("p", "pair", ["rdi"]), ("after", "long int", ["rsi"])]
    arguments, _ = call(abi, "by_pair", [(4 << 32) | 0xFFFF_FFFD, -6 & MASK])
    assert arguments == [{"a": -3, "b": 4}, -6]


def test_a_sixteen_byte_struct_takes_two_registers(abi: Path) -> None:
    assert params(plan_of(abi, "by_tagged")) == [("t", "tagged", ["rdi", "rsi"]), ("after", "int", ["rdx"])]
    arguments, _ = call(abi, "by_tagged", [1 << 40, GARBAGE | (ord("z") << 16) | 65535, 8])
    assert arguments == [{"id": 1 << 40, "code": 65535, "tag": "z"}, 8]


def test_a_struct_of_ints_and_doubles_splits_between_integer_and_xmm_registers(abi: Path) -> None:
    assert params(plan_of(abi, "by_mixed")) == [("m", "mixed", ["rdi", "xmm0"]), ("after", "int", ["rsi"])]
    arguments, _ = call(abi, "by_mixed", wide([-9 & MASK, 9], xmm=[bits(2.5)]))
    assert arguments == [{"id": -9, "weight": 2.5}, 9]


def test_a_struct_of_floats_is_in_an_xmm_register(abi: Path) -> None:
    assert params(plan_of(abi, "by_floats")) == [("f", "floats", ["xmm0"]), ("after", "int", ["rdi"])]
    pair = bits(1.5, "<f") | bits(2.5, "<f") << 32
    assert call(abi, "by_floats", wide([10], xmm=[pair]))[0] == [{"x": 1.5, "y": 2.5}, 10]


def test_a_big_struct_is_passed_on_the_stack_and_takes_no_register(abi: Path) -> None:
    plan = plan_of(abi, "by_big")
    assert params(plan) == [("b", "big", ["stack0", "stack1", "stack2", "stack3"]), ("after", "int", ["rdi"])]
    assert plan["capture"] == WATCH_CAPTURE_STACK
    assert call(abi, "by_big", wide([11], stack=[1, 2, 3, 4]))[0] == [{"v": [1, 2, 3, 4]}, 11]


def test_a_packed_struct_with_a_misaligned_field_is_passed_on_the_stack(abi: Path) -> None:
    assert params(plan_of(abi, "by_packed"))[0] == ("k", "packed", ["stack0"])
    assert call(abi, "by_packed", wide([12], stack=[GARBAGE << 8 | 77 << 8 | ord("k")]))[0][0] == {"c": "k", "i": 77}


def test_bitfields(abi: Path) -> None:
    # ready=1 (bit 0), count=5 (bits 1-3), level=-3 (bits 4-7, signed)
    word = 1 | (5 << 1) | ((-3 & 0xF) << 4)
    assert call(abi, "by_flags", [GARBAGE | word])[0] == [{"ready": 1, "count": 5, "level": -3}]


def test_a_nested_struct(abi: Path) -> None:
    assert params(plan_of(abi, "by_nested"))[0] == ("n", "nested", ["rdi", "rsi"])
    arguments, _ = call(abi, "by_nested", [((-20 & 0xFFFF_FFFF) << 32) | 10, GARBAGE | 0xFFE2, 13])
    assert arguments == [{"p": {"a": 10, "b": -20}, "s": -30}, 13]


def test_struct_returns(abi: Path) -> None:
    plan = plan_of(abi, "make_pair")
    assert plan["returns"]["type"] == "pair" and where(plan["returns"]) == ["rax"]
    assert call(abi, "make_pair", [18, 19], rax=(19 << 32) | 18)[1] == {"a": 18, "b": 19}
    plan = plan_of(abi, "make_mixed")
    assert where(plan["returns"]) == ["rax", "xmm0"]
    assert call(abi, "make_mixed", [20], rax=20, exit_words=[0, bits(0.5), 0])[1] == {"id": 20, "weight": 0.5}


def test_a_big_struct_return_takes_rdi_for_its_address(abi: Path) -> None:
    plan = plan_of(abi, "make_big")
    assert params(plan) == [("seed", "int", ["rsi"])]
    assert plan["returns"]["address"] is True and plan["registers"] == 2
    arguments, returned = call(abi, "make_big", [0x7FFD_0000_1000, 21], rax=0x7FFD_0000_1000)
    assert arguments == [21] and returned == "0x7ffd00001000"


def test_int128_takes_two_registers_and_returns_in_rdx_rax(abi: Path) -> None:
    plan = plan_of(abi, "wide")
    assert params(plan) == [("v", "__int128", ["rdi", "rsi"]), ("after", "int", ["rdx"])]
    assert call(abi, "wide", [0, 64, 23], rax=23)[0] == [1 << 70, 23]
    assert call(abi, "wide", [0, 64, 23], rax=23, exit_words=[64, 0, 0])[1] == (1 << 70) + 23


# ---- running out of registers ----------------------------------------------------------------------


def test_parameters_beyond_six_registers_are_on_the_stack(abi: Path) -> None:
    plan = plan_of(abi, "many")
    assert [w for _, _, w in params(plan)] == [["rdi"], ["rsi"], ["rdx"], ["rcx"], ["r8"], ["r9"],
                                               ["stack0"], ["stack1"]]
    arguments, _ = call(abi, "many", wide([1, 2, 3, 4, 5, 6], stack=[7, 8]))
    assert arguments == [1, 2, 3, 4, 5, 6, 7, 8]


def test_a_struct_that_does_not_fit_goes_on_the_stack_and_the_next_parameter_takes_the_register(abi: Path) -> None:
    assert [w for _, _, w in params(plan_of(abi, "squeezed"))] == [
        ["rdi"], ["rsi"], ["rdx"], ["rcx"], ["r8"], ["stack0", "stack1"], ["r9"]
    ]


def test_registers_the_recording_did_not_keep_are_not_captured(abi: Path) -> None:
    # The daemon trims argument registers to the parameter count: the second word of `t` may be missing.
    arguments, _ = call(abi, "by_tagged", [1 << 40])
    assert arguments == [{"id": 1 << 40, "code": "<not captured>", "tag": "<not captured>"}, "<not captured>"]


def test_variadic_functions_show_their_named_parameters(abi: Path) -> None:
    plan = plan_of(abi, "sum")
    assert plan["variadic"] is True and params(plan) == [("count", "int", ["rdi"])]
    assert call(abi, "sum", [3, 10, 20, 30])[0] == [3]


# ---- return values ---------------------------------------------------------------------------------


def test_void_bool_char_and_pointer_returns(abi: Path) -> None:
    assert plan_of(abi, "nothing")["returns"] == {"type": "void"}
    parsed = parse_plan(register_plan(str(abi), address_of(abi, "nothing")))
    assert parsed is not None and parsed.return_type == "void" and not parsed.returns_value
    assert plan_of(abi, "is_even")["returns"]["type"] == "_Bool"
    assert call(abi, "is_even", [4], rax=GARBAGE | 0x01)[1] is True
    assert call(abi, "is_even", [5], rax=GARBAGE | 0x00)[1] is False
    assert call(abi, "negative", [16], rax=0xFFFF_FFF0)[1] == -16
    assert call(abi, "low_byte", [0x1FF], rax=0x1FF)[1] == 255
    assert call(abi, "letter", [2], rax=GARBAGE | ord("c"))[1] == "c"
    assert call(abi, "greeting", [], rax=0x5555_5555_6004)[1] == "0x555555556004"
    assert call(abi, "nowhere", [], rax=0)[1] is None


# ---- C++ -------------------------------------------------------------------------------------------


def test_this_takes_the_first_register(abi_cpp: Path) -> None:
    plan = plan_of(abi_cpp, "Counter::add")
    assert params(plan) == [
        ("this", "Counter*", ["rdi"]), ("by", "int", ["rsi"]),
        ("scale", "double", ["xmm0"]), ("extra", "long int", ["rdx"]),
    ]
    assert call(abi_cpp, "Counter::add", wide([0x7FFD_0000_0010, 4, -7 & MASK], xmm=[bits(0.5)]))[0] == [
        "0x7ffd00000010", 4, 0.5, -7
    ]
    assert plan_of(abi_cpp, "Counter::positive")["returns"]["type"] == "bool"
    assert call(abi_cpp, "Counter::positive", [0x10], rax=GARBAGE | 1)[1] is True


def test_a_class_that_is_not_trivially_copyable_is_passed_by_hidden_reference(abi_cpp: Path) -> None:
    plan = plan_of(abi_cpp, "use_handle")
    assert params(plan) == [("h", "Handle", ["rdi"]), ("after", "int", ["rsi"])]
    assert plan["params"][0]["reference"] is True
    assert call(abi_cpp, "use_handle", [0x7FFD_0000_0020, 12])[0] == ["0x7ffd00000020", 12]
    # std::string by value: its address in rdi, whatever its size.
    assert params(plan_of(abi_cpp, "name_length")) == [("name", "string", ["rdi"]), ("extra", "int", ["rsi"])]


def test_a_class_that_is_not_trivially_copyable_is_returned_through_a_hidden_pointer(abi_cpp: Path) -> None:
    plan = plan_of(abi_cpp, "open_handle")
    assert params(plan) == [("fd", "int", ["rsi"])]
    assert plan["returns"]["type"] == "Handle" and plan["returns"]["address"] is True
    plan = plan_of(abi_cpp, "repeat")
    assert params(plan) == [("word", "string&", ["rsi"]), ("times", "int", ["rdx"])]
    assert plan["returns"]["type"] == "string" and plan["returns"]["address"] is True


def test_trivially_copyable_classes_and_enum_classes_are_passed_by_value(abi_cpp: Path) -> None:
    plan = plan_of(abi_cpp, "use_plain")
    assert params(plan) == [("p", "Plain", ["rdi"]), ("level", "Level", ["rsi"])]
    assert call(abi_cpp, "use_plain", [((-15 & 0xFFFF_FFFF) << 32) | 14, GARBAGE | 2])[0] == [
        {"x": 14, "y": -15}, "High"
    ]
    assert call(abi_cpp, "level_of", [16], rax=GARBAGE | 2)[1] == "High"
    assert plan_of(abi_cpp, "level_of")["returns"]["type"] == "Level"


# ---- no plan ---------------------------------------------------------------------------------------


def test_no_plan_without_a_function_or_without_dwarf(abi: Path, tmp_path: Path) -> None:
    assert register_plan(str(abi), 0x1) is None
    plain = tmp_path / "abi-nodebug"
    subprocess.run(["gcc", "-O0", "-o", str(plain), str(Path(__file__).parents[1] / "targets" / "abi.c")],
                   check=True)
    assert register_plan(str(plain), address_of(plain, "scalars")) is None


# ---- through the store -----------------------------------------------------------------------------


def test_query_results_show_arguments_through_the_stored_plan(abi: Path, tmp_path: Path) -> None:
    conn = connect(tmp_path / "strobe.db")
    try:
        session = insert_session(conn, "abi", str(abi), str(tmp_path), 100, 0)
        tagged, half = insert_functions(conn, [("by_tagged", None, None, None, 2, None),
                                               ("half", None, None, None, 1, None)])
        set_signatures(conn, [(tagged, register_plan(str(abi), address_of(abi, "by_tagged"))),
                              (half, register_plan(str(abi), address_of(abi, "half")))])
        words = struct.pack("<3Q", 1 << 40, GARBAGE | (ord("z") << 16) | 65535, 8)
        conn.executemany(
            "INSERT INTO events (session, ts, kind, pid, tid, func, args, retval, duration) "
            "VALUES (?, ?, ?, 1, 1, ?, ?, ?, ?)",
            [(session.key, 1, int(EventKind.FUNCTION_ENTER), tagged, words, None, None),
             (session.key, 2, int(EventKind.FUNCTION_EXIT), tagged, None, (1 << 40) + 8, 5),
             (session.key, 3, int(EventKind.FUNCTION_EXIT), half, None, 0x4021_0000_0000_0000, 5),
             (session.key, 4, int(EventKind.FUNCTION_EXIT), half, struct.pack("<3Q", 0, bits(8.5), 0), 17, 5)],
        )
        shown = query_wire(conn, session.key, session.id, EventFilter(), limit=10, offset=0, verbose=True).events
    finally:
        conn.close()
    assert shown[0]["arguments"] == [{"id": 1 << 40, "code": 65535, "tag": "z"}, 8]
    assert shown[0]["argumentNames"] == ["t", "after"] and shown[0]["argumentTypes"] == ["tagged", "int"]
    assert (shown[1]["returnType"], shown[1]["returnValue"]) == ("long int", (1 << 40) + 8)
    assert (shown[2]["returnType"], shown[2]["returnValue"]) == ("double", LATE)  # an exit without its xmm0
    assert (shown[3]["returnValue"], "arguments" in shown[3]) == (8.5, False)


# ---- against the registers of a real run -----------------------------------------------------------

# What main() passes and gets back (tests/targets/abi.c); UNCHECKED: a return value the test does not check.
UNCHECKED: Any = object()
EXPECTED: dict[str, tuple[list[Any], Any]] = {
    "scalars": ([-1, 4_000_000_000, -2, "x", True, "BLUE"], -1 + (4_000_000_000 - (1 << 32)) - 2 + 120 + 1 - 1),
    "widths": ([-7, 65000, -(1 << 50), 18_000_000_000_000_000_000], UNCHECKED),
    "pointers": ([UNCHECKED, UNCHECKED, None], 1 + ord("h")),
    "floating": ([-5, 1.25, 1 << 40, 2.5, 200], -5 + 1 + (1 << 40) + 2 + 200),
    "by_pair": ([{"a": -3, "b": 4}, -6], -5),
    "by_tagged": ([{"id": 1 << 40, "code": 65535, "tag": "z"}, 8], (1 << 40) + 65535 + ord("z") + 8),
    "by_mixed": ([{"id": -9, "weight": 2.5}, 9], 2),
    "by_floats": ([{"x": 1.5, "y": 2.5}, 10], 14),
    "by_big": ([{"v": [1, 2, 3, 4]}, 11], 16),
    "by_packed": ([{"c": "k", "i": 77}, 12], ord("k") + 77 + 12),
    "by_flags": ([{"ready": 1, "count": 5, "level": -3}], 3),
    "by_nested": ([{"p": {"a": 10, "b": -20}, "s": -30}, 13], -27),
    "many": ([1, 2, 3, 4, 5, 6, 7, 8], 36),
    "squeezed": ([1, 2, 3, 4, 5, {"id": 1 << 40, "code": 65535, "tag": "z"}, 14], 15 + (1 << 40) + 14),
    "sum": ([3], 60),
    "nothing": ([15], UNCHECKED),
    "is_even": ([4], True),
    "pick": ([2], "BLUE"),
    "negative": ([16], -16),
    "low_byte": ([0x1FF], 255),
    "letter": ([2], "c"),
    "greeting": ([], UNCHECKED),
    "nowhere": ([], None),
    "half": ([17], 8.5),
    "make_pair": ([18, 19], {"a": 18, "b": 19}),
    "make_mixed": ([20], {"id": 20, "weight": 0.5}),
    "make_big": ([21], UNCHECKED),
    "extended": ([1.5, 22], "<long double in st0: not captured>"),
    "wide": ([1 << 70, 23], (1 << 70) + 23),
}

EXPECTED_CPP: dict[str, tuple[list[Any], Any]] = {
    "Counter::add": ([UNCHECKED, 4, 0.5, -7], 0),
    "Counter::positive": ([UNCHECKED], True),
    "use_handle": ([UNCHECKED, 12], 23),
    "open_handle": ([13], UNCHECKED),
    "use_plain": ([{"x": 14, "y": -15}, "High"], 1),
    "level_of": ([16], "High"),
    "name_length": ([UNCHECKED, 18], 27),
    "repeat": ([UNCHECKED, 3], UNCHECKED),
}


_GDB_SCRIPT = r"""
import gdb, json, os
seen = {}
def word(name):
    return int(gdb.parse_and_eval("$" + name)) & 0xFFFFFFFFFFFFFFFF
def xmm(i):
    return int(gdb.parse_and_eval("$xmm%d.v2_int64[0]" % i)) & 0xFFFFFFFFFFFFFFFF
def stack(i):
    return int(gdb.parse_and_eval("*(unsigned long *)($rsp + %d)" % (8 + 8 * i))) & 0xFFFFFFFFFFFFFFFF
class Exit(gdb.FinishBreakpoint):
    def __init__(self, frame, name):
        super().__init__(frame, internal=True)
        self.function = name
    def stop(self):
        seen[self.function]["rax"] = word("rax")
        seen[self.function]["exit"] = [word("rdx"), xmm(0), xmm(1)]
        return False
    def out_of_scope(self):
        pass
class Enter(gdb.Breakpoint):
    def __init__(self, name):
        super().__init__("*" + name, internal=True)
        self.function = name
    def stop(self):
        seen[self.function] = {"args": [word(r) for r in ("rdi", "rsi", "rdx", "rcx", "r8", "r9")]
                                        + [xmm(i) for i in range(6)] + [stack(i) for i in range(6)]}
        Exit(gdb.newest_frame(), self.function)
        return False
for name in os.environ["ABI_FUNCTIONS"].split(","):
    Enter(name)
gdb.execute("run > /dev/null")
with open(os.environ["ABI_OUT"], "w") as out:
    json.dump(seen, out)
"""


def run_under_gdb(binary: Path, names: list[str], tmp_path: Path) -> dict[str, Any]:
    """The words the agent captures at the entry of each function (integer argument registers, xmm0-5, six stack
    words) and at its return (rax; rdx, xmm0, xmm1), in a real run."""
    if shutil.which("gdb") is None or not sys.platform.startswith("linux"):
        pytest.skip("gdb is not installed")
    tmp_path.mkdir(parents=True, exist_ok=True)
    script, out = tmp_path / "registers.py", tmp_path / "seen.json"
    script.write_text(_GDB_SCRIPT)
    env = {**os.environ, "ABI_FUNCTIONS": ",".join(names), "ABI_OUT": str(out)}
    done = subprocess.run(["gdb", "-nx", "-batch", "-x", str(script), str(binary)], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    if not out.exists():
        pytest.skip(f"gdb could not run the target: {done.stdout[-500:]} {done.stderr[-500:]}")
    seen: dict[str, Any] = json.loads(out.read_text())
    assert set(seen) == set(names)
    return seen


def check_run(binary: Path, expected: dict[str, tuple[list[Any], Any]], seen: dict[str, Any]) -> None:
    for name, (arguments, returned) in expected.items():
        plan = parse_plan(register_plan(str(binary), address_of(binary, name)))
        assert plan is not None, name
        shown = plan.arguments([w - (1 << 64) if w >> 63 else w for w in seen[name]["args"]])
        assert len(shown) == len(arguments), name
        for got, wanted in zip(shown, arguments, strict=True):
            if wanted is UNCHECKED:  # an address
                assert isinstance(got, str) and got.startswith("0x"), name
            else:
                assert got == wanted, name
        if returned is not UNCHECKED:
            exit_words = [w - (1 << 64) if w >> 63 else w for w in seen[name]["exit"]]
            assert plan.return_value(seen[name]["rax"], exit_words) == returned, name


def test_plans_decode_the_registers_of_a_real_run(abi: Path, tmp_path: Path) -> None:
    seen = run_under_gdb(abi, list(EXPECTED), tmp_path)
    check_run(abi, EXPECTED, seen)
    assert seen["make_big"]["rax"] == seen["make_big"]["args"][0]  # the address its caller passed in rdi


def test_cpp_plans_decode_the_registers_of_a_real_run(abi_cpp: Path, tmp_path: Path) -> None:
    seen = run_under_gdb(abi_cpp, list(EXPECTED_CPP), tmp_path)
    check_run(abi_cpp, EXPECTED_CPP, seen)
    for name in ("open_handle", "repeat"):  # returned through the caller's hidden pointer
        assert seen[name]["rax"] == seen[name]["args"][0]


# ---- Rust closures ---------------------------------------------------------------------------------

_ADDRESSES_GDB = r"""
import gdb, json, os
seen = []
def word(expression):
    return int(gdb.parse_and_eval(expression)) & 0xFFFFFFFFFFFFFFFF
def xmm(i):
    return word("$xmm%d.v2_int64[0]" % i)
class Exit(gdb.FinishBreakpoint):
    def __init__(self, frame, call):
        super().__init__(frame, internal=True)
        self.call = call
    def stop(self):
        self.call += [word("$rax"), word("$rdx"), xmm(0), xmm(1)]
        return False
    def out_of_scope(self):
        pass
class Enter(gdb.Breakpoint):
    def stop(self):
        call = [word("$pc") - base] + [word("$" + r) for r in ("rdi", "rsi", "rdx", "rcx", "r8", "r9")]
        stack = bytes(gdb.selected_inferior().read_memory(word("$rsp") + 8, 48))
        call += [xmm(i) for i in range(6)] + [int.from_bytes(stack[i:i + 8], "little") for i in range(0, 48, 8)]
        seen.append(call)
        Exit(gdb.newest_frame(), call)
        return False
gdb.execute("starti > /dev/null")
base = 0x555555554000  # where gdb runs a PIE binary (address randomisation off)
for address in os.environ["AT_ADDRESSES"].split(","):
    Enter("*" + hex(base + int(address)), internal=True)
gdb.execute("continue > /dev/null")
with open(os.environ["AT_OUT"], "w") as out:
    json.dump(seen, out)
"""


def calls_under_gdb(binary: Path, addresses: list[int], tmp_path: Path) -> list[tuple[int, list[int], int, list[int]]]:
    """Each call of these functions in a real run, in order: (static address, the words the agent captures on
    entry (integer argument registers, xmm0-5, six stack words), rax and rdx, xmm0, xmm1 on return)."""
    if shutil.which("gdb") is None:
        pytest.skip("gdb is not installed")
    script, out = tmp_path / "calls.py", tmp_path / "calls.json"
    script.write_text(_ADDRESSES_GDB)
    env = {**os.environ, "AT_ADDRESSES": ",".join(str(a) for a in addresses), "AT_OUT": str(out)}
    subprocess.run(["gdb", "-nx", "-batch", "-x", str(script), str(binary)], env=env, capture_output=True,
                   timeout=120, check=False)
    signed = [[w - (1 << 64) if w >> 63 else w for w in call[1:]] for call in json.loads(out.read_text())]
    return [(call[0], words[:18], words[18] if len(words) > 18 else 0, words[19:]) for call, words
            in zip(json.loads(out.read_text()), signed, strict=True)]


def rust_functions(binary: Path, prefix: str) -> list[tuple[str, int]]:
    """(name without `prefix`, static address) of the functions under `prefix` (closures share one name)."""
    with open_elf(binary) as elf:
        return [(demangle(s.name).name.removeprefix(prefix), s.address) for s in function_symbols(elf)
                if demangle(s.name).name.startswith(prefix) and "." not in s.name]


def test_a_rust_closure_takes_its_environment_in_the_first_register(
    rust_target: Callable[[str], Path], tmp_path: Path
) -> None:
    binary = rust_target("rust_closures")
    closures = sorted(a for name, a in rust_functions(binary, "rust_closures::main::") if "closure" in name)
    assert len(closures) == 4
    plans = {a: json.loads(register_plan(str(binary), a) or "null") for a in closures}
    hidden = [a for a, p in plans.items() if p["params"][0]["name"] == CLOSURE_ENVIRONMENT]
    assert len(hidden) == 3  # the one capturing nothing has its environment in DWARF
    seen = {at: words for at, words, _, _ in calls_under_gdb(binary, closures, tmp_path)}
    shown = sorted(tuple(parse_plan(json.dumps(plans[a])).arguments(seen[a])[1:]) for a in closures)  # type: ignore[union-attr]
    assert shown == [(3, 7), (4, 7), (5,), (9,)]  # what main passes: the declared parameters, none shifted


def test_rust_enums_take_the_registers_rustc_gives_them(rust_target: Callable[[str], Path], tmp_path: Path) -> None:
    binary = rust_target("rust_enums")
    functions = dict(rust_functions(binary, "rust_enums::"))
    expected: dict[str, list[tuple[list[Any], Any]]] = {  # what main passes and gets back, call by call
        "opt_u32": [([17, 5], None), ([None, 6], None)],
        "opt_u8": [([200, 5], None)],
        "opt_f64": [([2.5, 5], None)],  # the tag in rdi, the value in xmm0, `after` in rsi
        "opt_box": [([UNCHECKED, 5], None)],  # a niche: the pointer alone
        "res": [([{"Err": 44}, 5], None), ([{"Ok": 3}, 6], None)],
        "shape": [([{"Circle": 1.5}, 5], None), (["Dot", 6], None)],
        "mixed": [([{"B": 77}, 5], None)],
        "small": [([{"Y": 300}, 5], None)],  # different sizes: one integer register for all of it
        "make_opt": [([4], 8), ([0], None)],  # returned in rax:rdx
        "make_shape": [([0.75], {"Circle": 0.75})],  # rax, xmm0
    }
    calls = calls_under_gdb(binary, [functions[name] for name in [*expected, "opt_str"]], tmp_path)
    by_address = {address: name for name, address in functions.items()}
    shown: dict[str, list[tuple[list[Any], Any]]] = {}
    for address, words, rax, exit_words in calls:
        plan = parse_plan(register_plan(str(binary), address))
        assert plan is not None
        shown.setdefault(by_address[address], []).append((plan.arguments(words), plan.return_value(rax, exit_words)))
    for name, wanted in expected.items():
        for (arguments, returned), (want_arguments, want_returned) in zip(shown[name], wanted, strict=True):
            assert [a for a, w in zip(arguments, want_arguments, strict=True) if w is not UNCHECKED] == [
                w for w in want_arguments if w is not UNCHECKED], name
            if name.startswith("make_"):
                assert returned == want_returned, name
    opt_str = [arguments for arguments, _ in shown["opt_str"]]  # a niche pair: pointer and length
    assert opt_str[0][0]["length"] == 5 and opt_str[0][1] == 5 and opt_str[1] == [None, 6]


# ---- optimized builds ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def optimized(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """abi.c and abi_cpp.cpp built with -O2: parameters live in registers and location lists."""
    out = tmp_path_factory.mktemp("abi-O2")
    targets = Path(__file__).parents[1] / "targets"
    subprocess.run(["gcc", "-g", "-O2", "-o", str(out / "abi"), str(targets / "abi.c")], check=True)
    subprocess.run(["g++", "-g", "-O2", "-o", str(out / "abi_cpp"), str(targets / "abi_cpp.cpp")], check=True)
    return out / "abi", out / "abi_cpp"


def test_optimized_cpp_hidden_references(optimized: tuple[Path, Path]) -> None:
    _, cpp = optimized
    for name, first in (("use_handle", "h"), ("name_length", "name")):
        plan = plan_of(cpp, name)
        assert (plan["params"][0]["name"], where(plan["params"][0]), plan["params"][0].get("reference")) == (
            first, ["rdi"], True
        )
        assert where(plan["params"][1]) == ["rsi"]
    assert plan_of(cpp, "open_handle")["returns"]["address"] is True
    assert plan_of(cpp, "use_plain")["params"][0]["value"]["kind"] == "struct"


def test_no_plan_for_a_copy_the_compiler_made_with_its_own_parameters(optimized: tuple[Path, Path]) -> None:
    _, cpp = optimized
    with open_elf(cpp) as elf:
        clones = [s for s in function_symbols(elf) if ".isra." in s.name or ".constprop." in s.name]
    assert clones, "g++ -O2 no longer makes an IPA-SRA copy of Counter::positive"
    assert all(register_plan(str(cpp), clone.address) is None for clone in clones)


def test_optimized_plans_decode_the_registers_of_a_real_run(optimized: tuple[Path, Path], tmp_path: Path) -> None:
    c, cpp = optimized
    expected = {k: v for k, v in EXPECTED.items() if k != "nothing"}  # (a call without effect: removed)
    check_run(c, expected, run_under_gdb(c, list(expected), tmp_path / "c"))
    expected = {k: v for k, v in EXPECTED_CPP.items() if k != "Counter::positive"}  # (only its .isra copy)
    check_run(cpp, expected, run_under_gdb(cpp, list(expected), tmp_path / "cpp"))
