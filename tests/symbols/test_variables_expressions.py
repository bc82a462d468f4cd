"""Variable expressions resolved into read recipes: pointer chains and their limits, what the agent gets
(`to_wire`), and errors that say what to do. Recipes are executed on the binary's file image (see
test_variables.execute), so offsets and pointer chains are checked against real data."""

from __future__ import annotations

import json

import pytest

from strobe.errors import ValidationError
from strobe.symbols.expressions import (
    MAX_EXPRESSION,
    Deref,
    ExpressionError,
    ExpressionLimit,
    UnknownField,
    parse,
    resolve_expression,
)
from strobe.symbols.variables import AmbiguousVariable, VariableIndex, VariableNotFound
from tests.symbols.conftest import Programs
from tests.symbols.test_variables import ElfImage, build, execute


@pytest.fixture(scope="module", params=["c", "c-nopie"])
def c_program(request: pytest.FixtureRequest, programs: Programs) -> tuple[VariableIndex, ElfImage]:
    path = build(programs.root, request.param)
    return VariableIndex(path), ElfImage(path)


@pytest.fixture(scope="module")
def c_index(programs: Programs) -> VariableIndex:
    return VariableIndex(build(programs.root, "c"))


@pytest.fixture(scope="module")
def cxx(programs: Programs) -> tuple[VariableIndex, ElfImage]:
    path = build(programs.root, "cxx")
    return VariableIndex(path), ElfImage(path)


def error(index: VariableIndex, text: str, kind: type[ValidationError] = ExpressionError) -> str:
    with pytest.raises(kind) as caught:
        resolve_expression(index, text)
    assert caught.value.code == "VALIDATION_ERROR"
    return caught.value.message


def test_four_dereferences_follow_the_chain(c_program: tuple[VariableIndex, ElfImage]) -> None:
    index, image = c_program
    recipe = resolve_expression(index, "gHead->next->next->next->value")
    assert recipe.address == index.lookup("gHead").address
    assert recipe.derefs == (Deref(0, "gHead"), Deref(8, "gHead->next"), Deref(8, "gHead->next->next"),
                             Deref(8, "gHead->next->next->next"))
    assert (recipe.offset, recipe.layout.kind, recipe.size) == (0, "int", 4)
    assert execute(recipe, image) == 4


def test_fifth_dereference_is_refused_with_a_way_out(c_index: VariableIndex) -> None:
    message = error(c_index, "gHead->next->next->next->next->value", ExpressionLimit)
    assert "limit is 4" in message and "debug_read" in message and "'gHead->next->next->next->next'" in message
    # Checked before the variable is looked up, and an index applied to a pointer counts too.
    assert "limit is 4" in error(c_index, "nosuch->a->b->c->d->e", ExpressionLimit)
    assert "limit is 4" in error(c_index, "gHead[0].next->next->next->next->value", ExpressionLimit)


def test_mixed_dots_and_arrows(c_program: tuple[VariableIndex, ElfImage]) -> None:
    index, image = c_program
    recipe = resolve_expression(index, "gRoot.inner.link->next->value")
    assert recipe.derefs == (Deref(16, "gRoot.inner.link"), Deref(8, "gRoot.inner.link->next"))
    assert execute(recipe, image) == 2
    assert execute(resolve_expression(index, "gMidiPtr->origin.y"), image) == 10
    assert execute(resolve_expression(index, "gRoot.inner.link->value"), image) == 1
    chain = resolve_expression(index, "gRoot.inner", depth=2)
    assert execute(chain, image) == {"tag": 3, "link": hex(index.lookup("gLink1").address or 0)}


def test_pointer_to_a_struct_declared_only_in_its_file(c_program: tuple[VariableIndex, ElfImage]) -> None:
    index, image = c_program  # vars_other.c sees `struct Engine;` only: the definition comes from vars_main.c
    assert execute(resolve_expression(index, "gEnginePtr->rpm"), image) == 7200
    assert execute(resolve_expression(index, "gEnginePtr->label"), image) == "v8"
    assert index.layout("gEnginePtr", 2).pointee == index.layout("gEngineStorage", 1)


def test_indexes(c_program: tuple[VariableIndex, ElfImage]) -> None:
    index, image = c_program
    assert execute(resolve_expression(index, "gInts[3]"), image) == 4
    assert execute(resolve_expression(index, "gGrid[1]"), image) == [4, 5, 6]
    assert execute(resolve_expression(index, "gGrid[1][2]"), image) == 6
    assert execute(resolve_expression(index, "gPoints[2].y"), image) == 6
    assert execute(resolve_expression(index, "gPoints[0x1]"), image) == {"x": 3, "y": 4}
    on_pointer = resolve_expression(index, "gHead[0].value")
    assert on_pointer.derefs == (Deref(0, "gHead"),) and execute(on_pointer, image) == 1
    assert "valid indexes are 0 to 4" in error(index, "gInts[5]")
    assert "cannot be indexed" in error(index, "gInt[0]")


def test_bitfield_target(c_program: tuple[VariableIndex, ElfImage]) -> None:
    index, image = c_program
    recipe = resolve_expression(index, "gFlags.b")
    assert (recipe.bit_offset, recipe.bit_size, recipe.offset) == (3, 5, 0)
    assert execute(recipe, image) == -3
    assert execute(resolve_expression(index, "gFlags.d"), image) == 1000
    wire = recipe.to_wire(0)
    assert (wire["bitOffset"], wire["bitSize"], wire["size"]) == (3, 5, 1)


def test_wire_form(c_index: VariableIndex) -> None:
    recipe = resolve_expression(c_index, "gMidiPtr->origin", depth=2)
    form = recipe.to_wire(0x5555_0000_0000)
    assert json.loads(json.dumps(form)) == form
    assert form["address"] == hex((c_index.lookup("gMidiPtr").address or 0) + 0x5555_0000_0000)
    assert form["derefs"] == [{"offset": 0, "label": "gMidiPtr"}]
    assert (form["offset"], form["size"], form["typeKind"], form["typeName"]) == (16, 8, "struct", "Point")
    assert [f["name"] for f in form["layout"]["fields"]] == ["x", "y"]
    holder = resolve_expression(c_index, "gHolder", depth=3).to_wire(0)
    assert holder["strings"] == [0] and holder["label"] == "gHolder"


def test_cxx_members_of_base_classes(cxx: tuple[VariableIndex, ElfImage]) -> None:
    index, image = cxx
    assert execute(resolve_expression(index, "gDerived.base_field"), image) == 10
    assert execute(resolve_expression(index, "gDerived.base_ratio"), image) == 2.5
    other = resolve_expression(index, "gDerived.other_tag")  # the second base sits at offset 16
    assert other.offset == 16 and execute(other, image) == 6
    assert execute(resolve_expression(index, "gDerivedPtr->own"), image) == 20
    assert execute(resolve_expression(index, "audio::gClockPtr->counter"), image) == 41
    assert execute(resolve_expression(index, "gClockPtr->counter"), image) == 41


def test_cxx_references_are_followed(cxx: tuple[VariableIndex, ElfImage]) -> None:
    index, image = cxx
    whole = resolve_expression(index, "gDerivedRef")  # like C++: the referent, not the hidden pointer
    assert whole.derefs == (Deref(0, "gDerivedRef"),) and whole.layout.type_name == "Derived"
    assert execute(whole, image) == {"base_field": 10, "base_ratio": 2.5, "other_tag": 6, "own": 20}
    own = resolve_expression(index, "gDerivedRef.own")
    assert own.derefs == (Deref(0, "gDerivedRef"),) and own.offset == 20 and execute(own, image) == 20


def test_rust_fields_and_indexes(programs: Programs) -> None:
    path = build(programs.root, "rust")
    index, image = VariableIndex(path), ElfImage(path)
    assert execute(resolve_expression(index, "CONFIG.flags[2]"), image) == 3
    assert execute(resolve_expression(index, "vars_rs::CONFIG.ratio"), image) == 0.5


def test_length_limit(c_index: VariableIndex) -> None:
    assert resolve_expression(c_index, "gInt" + " " * (MAX_EXPRESSION - 4)).layout.kind == "int"  # 256: fine
    message = error(c_index, "gInt" + " " * (MAX_EXPRESSION - 3), ExpressionLimit)
    assert "257 characters" in message and "limit is 256" in message and "debug_read" in message


def test_helpful_errors(c_index: VariableIndex) -> None:
    unknown = error(c_index, "gMidi.sise", UnknownField)
    assert "no field 'sise'" in unknown and "Did you mean 'size'" in unknown
    assert "size, capacity, data, origin, color" in unknown
    through = error(c_index, "gMidiPtr->nope", UnknownField)
    assert "points to (MidiBuffer)" in through and "origin" in through
    assert "use '->' instead of '.'" in error(c_index, "gMidiPtr.size")
    assert "is not a pointer" in error(c_index, "gMidi->size") and "use '.'" in error(c_index, "gMidi->size")
    assert "not a struct" in error(c_index, "gInt.x")
    assert "has no type" in error(c_index, "gOpaque->x")
    assert "not a pointer" in error(c_index, "gInt->x")
    assert "thread-local" in error(c_index, "gTls")
    assert "no calls" in error(c_index, "foo(3)")
    assert "does not start with a variable name" in error(c_index, "*gHead")
    assert "field name must follow" in error(c_index, "gMidi.")
    assert "non-negative integer" in error(c_index, "gInts[-1]")
    assert "Did you mean" in error(c_index, "gHeadd->value", VariableNotFound)
    assert "bump_calls::calls" in error(c_index, "calls", AmbiguousVariable)


def test_parse() -> None:
    assert parse("audio::Clock::instances") == ("audio::Clock::instances", [])
    root, steps = parse(" gRoot . inner.link -> next [ 2 ] ")
    assert root == "gRoot" and [(s.op, s.name) for s in steps] == [(".", "inner"), (".", "link"), ("->", "next"),
                                                                   ("[]", "2")]
    assert parse("vars_main.c::sFileStatic")[0] == "vars_main.c::sFileStatic"
    assert parse("ns::Box<int>::count.x")[0] == "ns::Box<int>::count"
