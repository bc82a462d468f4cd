"""Layouts of DWARF types, checked by decoding the initial values of globals from the binary's own bytes
(.data/.rodata as loaded; nothing is run): a wrong offset, size, bit position or type shows up as a wrong value."""

from __future__ import annotations

import json
import math
import struct
from typing import Any

import pytest

from strobe.symbols.decode import decode
from strobe.symbols.expressions import resolve_expression
from strobe.symbols.types import (
    MAX_ARRAY_ITEMS,
    Field,
    ValueLayout,
    Variant,
    read_size,
    string_offsets,
    wire,
)
from strobe.symbols.variables import VariableIndex
from tests.symbols.conftest import Programs
from tests.symbols.test_variables import ElfImage, build, execute


@pytest.fixture(scope="module", params=["c", "c-nopie", "c-dwarf4"])
def c_program(request: pytest.FixtureRequest, programs: Programs) -> tuple[VariableIndex, ElfImage]:
    path = build(programs.root, request.param)
    return VariableIndex(path), ElfImage(path)


def value(program: tuple[VariableIndex, ElfImage], name: str, depth: int = 1) -> Any:
    index, image = program
    variable = index.lookup(name)
    assert variable.address is not None
    layout = index.layout(variable, depth)
    return decode(layout, image.read(variable.address, read_size(layout)))


C_VALUES: dict[str, Any] = {
    "gInt": -42,
    "gUint": 4000000000,
    "gDouble": 3.5,
    "gFloat": -0.25,
    "gBool": True,
    "gChar": "x",
    "gWide": -1234567890123,
    "vars_main.c::sFileStatic": 7,
    "vars_other.c::sFileStatic": 8,
    "gLabel": "hello",
    "gInts": [1, 2, 3, 4, 5],
    "gGrid": [[1, 2, 3], [4, 5, 6]],
    "gOpaque": None,
    "gColor": "GREEN",
    "gOddColor": 42,  # no enumerator: the number
    "gPoints": [{"x": 1, "y": 2}, {"x": 3, "y": 4}, {"x": 5, "y": 6}],
    "gMidi": {"size": 128, "capacity": 512, "data": None, "origin": "<struct>", "color": "BLUE"},
    "gFlags": {"a": 5, "b": -3, "c": 1, "d": 1000, "after": 77},
    "bump_calls::calls": 3,
    "other_file_value::calls": 100,
    "main::mainCount": 11,
}


@pytest.mark.parametrize("name", list(C_VALUES))
def test_c_initial_values(c_program: tuple[VariableIndex, ElfImage], name: str) -> None:
    assert value(c_program, name) == C_VALUES[name]


def test_nested_struct_expands_with_depth(c_program: tuple[VariableIndex, ElfImage]) -> None:
    assert value(c_program, "gMidi", depth=2)["origin"] == {"x": 9, "y": 10}
    assert value(c_program, "gHolder", depth=1)["outer"] == "<struct>"
    assert value(c_program, "gHolder", depth=3)["outer"] == {
        "kind": "h", "inner": {"tag": 1, "link": None}, "innerPtr": None}


def test_union_shows_every_member(c_program: tuple[VariableIndex, ElfImage]) -> None:
    index, _ = c_program
    layout = index.layout("gWord")
    assert layout.union and layout.size == 4 and {f.offset for f in layout.fields} == {0}
    word = value(c_program, "gWord")
    assert word["i"] == 0x01020304 and word["bytes"] == [4, 3, 2, 1]
    assert word["f"] == struct.unpack("<f", struct.pack("<i", 0x01020304))[0]


def test_bitfields(c_program: tuple[VariableIndex, ElfImage]) -> None:
    index, _ = c_program
    fields = {f.name: f for f in index.layout("gFlags").fields}
    assert all(fields[n].bit_size == size for n, size in (("a", 3), ("b", 5), ("c", 1), ("d", 12)))
    assert fields["after"].bit_size is None and fields["after"].offset == 4
    assert fields["b"].layout.kind == "int" and fields["a"].layout.kind == "uint"


def test_pointers_chars_and_strings(c_program: tuple[VariableIndex, ElfImage]) -> None:
    index, image = c_program
    name = index.layout("gName")
    assert (name.kind, name.type_name, name.cstring) == ("pointer", "char*", True)
    data = index.layout("gMidi", 1).field("data")
    assert data is not None and data.layout.type_name == "uint8_t*" and not data.layout.cstring
    pointer = value(c_program, "gMidiPtr")
    assert pointer == hex(index.lookup("gMidi").address or 0)
    link = value(c_program, "gLink1")
    assert link == {"value": 1, "next": hex(index.lookup("gLink2").address or 0)}
    # The agent reads the C strings the layout points out; decode shows them in place of the pointer.
    holder = index.layout("gHolder", 1)
    assert string_offsets(holder) == [0]
    raw = image.read(index.lookup("gHolder").address or 0, read_size(holder))
    target = int.from_bytes(raw[:8], "little")
    assert decode(holder, raw, {target: image.c_string(target)})["title"] == "held"
    assert execute(resolve_expression(index, "gName"), image) == "strobe"


def test_type_names_and_sizes(c_program: tuple[VariableIndex, ElfImage]) -> None:
    index, _ = c_program
    expected = {
        "gInt": ("int", "int", 4), "gUint": ("unsigned int", "uint", 4), "gBool": ("_Bool", "bool", 1),
        "gChar": ("char", "char", 1), "gDouble": ("double", "float", 8), "gLabel": ("char[16]", "array", 16),
        "gGrid": ("int[2][3]", "array", 24), "gColor": ("Color", "enum", 4), "gMidi": ("MidiBuffer", "struct", 32),
        "gMidiPtr": ("MidiBuffer*", "pointer", 8), "gPoints": ("Point[3]", "array", 24),
        "gOpaque": ("void*", "pointer", 8), "gBig": ("short int[150]", "array", 300),
    }
    for name, (type_name, kind, size) in expected.items():
        layout = index.layout(name)
        assert (layout.type_name, layout.kind, layout.size) == (type_name, kind, size), name
    color = index.layout("gColor")
    assert dict((n, v) for v, n in color.enumerators) == {"RED": 0, "GREEN": 5, "BLUE": 6}


def test_big_arrays_are_capped(c_program: tuple[VariableIndex, ElfImage]) -> None:
    index, _ = c_program
    layout = index.layout("gBig")
    assert read_size(layout) == MAX_ARRAY_ITEMS * 2 < layout.size
    big = value(c_program, "gBig")
    assert big[:4] == [1, 2, 3, 0] and len(big) == MAX_ARRAY_ITEMS + 1 and big[-1] == "<50 more>"


def test_wire_form_is_plain_json(c_program: tuple[VariableIndex, ElfImage]) -> None:
    index, _ = c_program
    form = wire(index.layout("gMidi", 2))
    assert json.loads(json.dumps(form)) == form
    assert form["kind"] == "struct" and form["type"] == "MidiBuffer" and form["size"] == 32
    origin = next(f for f in form["fields"] if f["name"] == "origin")
    assert origin["offset"] == 16 and [f["name"] for f in origin["fields"]] == ["x", "y"]
    flags = wire(index.layout("gFlags"))
    assert {k: flags["fields"][1][k] for k in ("name", "bitSize", "kind")} == {"name": "b", "bitSize": 5,
                                                                             "kind": "int"}
    assert wire(index.layout("gName"))["string"] == 1024
    assert wire(index.layout("gColor"))["enumerators"] == {"0": "RED", "5": "GREEN", "6": "BLUE"}
    assert wire(index.layout("gMidi", 1))["fields"][3]["truncated"] is True


def test_cxx_values(programs: Programs) -> None:
    path = build(programs.root, "cxx")
    index, image = VariableIndex(path), ElfImage(path)
    assert execute(resolve_expression(index, "gDerived"), image) == {
        "base_field": 10, "base_ratio": 2.5, "other_tag": 6, "own": 20}
    assert execute(resolve_expression(index, "audio::gClock"), image) == {"counter": 41, "self": None}
    assert execute(resolve_expression(index, "audio::Clock::kName"), image) == "clock"
    assert execute(resolve_expression(index, "gTempo"), image) == 120.5
    assert execute(resolve_expression(index, "audio::Clock::instances"), image) == 2
    assert execute(resolve_expression(index, "gHidden"), image) == 5


@pytest.mark.parametrize("variant", ["rust", "rust-dwarf5"])
def test_rust_values(programs: Programs, variant: str) -> None:
    path = build(programs.root, variant)
    index, image = VariableIndex(path), ElfImage(path)
    assert execute(resolve_expression(index, "CONFIG"), image) == {
        "retries": 3, "ratio": 0.5, "flags": [1, 2, 3, 4], "enabled": True}
    assert execute(resolve_expression(index, "MODE"), image) == "Busy"
    assert execute(resolve_expression(index, "MAYBE"), image) == {"Some": 5}  # an enum with variant parts
    assert execute(resolve_expression(index, "engine::LEVEL"), image) == -3
    assert execute(resolve_expression(index, "engine::COUNTER"), image) == 7
    config = index.layout("CONFIG")
    assert [(f.name, f.offset) for f in config.fields] == [("retries", 8), ("ratio", 0), ("flags", 12),
                                                          ("enabled", 16)]
    assert index.layout("GREETING").type_name == "&str"


def test_decoder_edge_cases() -> None:
    assert decode(ValueLayout("float", "double", 8), struct.pack("<d", math.inf)) == "Infinity"
    assert decode(ValueLayout("float", "double", 8), struct.pack("<d", math.nan)) == "NaN"
    long_double = struct.pack("<QH", 0xC000000000000000, 0x3FFF) + bytes(6)  # 1.5 as x87 extended
    assert decode(ValueLayout("float", "long double", 16), long_double) == 1.5
    assert decode(ValueLayout("char", "char32_t", 4), (0x263A).to_bytes(4, "little")) == "\u263a"
    assert decode(ValueLayout("int", "int", 4), b"\x01\x00") is None  # a short read
    assert decode(ValueLayout("bytes", "_Complex float", 4), b"\x01\x02\x03\x04") == "01 02 03 04"
    signed = ValueLayout("enum", "E", 1, enumerators=((-1, "MINUS"),), signed=True)
    assert decode(signed, b"\xff") == "MINUS" and decode(signed, b"\xfe") == -2
    u8 = ValueLayout("uint", "u8", 1)
    unit = ValueLayout("struct", "None", 0)
    some = ValueLayout("struct", "Some", 2, fields=(Field("__0", 1, u8),))
    option = ValueLayout("enum", "Option<u8>", 2, discriminant=Field("<discriminant>", 0, u8),
                         variants=(Variant(0, Field("None", 0, unit)), Variant(1, Field("Some", 0, some))))
    assert decode(option, b"\x00\x07") == "None" and decode(option, b"\x01\x07") == {"Some": 7}
    assert decode(option, b"\x05\x07") == "<enum Option<u8>>"
