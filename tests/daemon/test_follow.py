"""Follow plans (which pointers the agent follows, what it copies) and the decoding of what it sent back."""

from __future__ import annotations

from typing import Any

from strobe.daemon.follow import MAX_POINTERS, RAX, follow_plan
from strobe.daemon.follow_decode import FollowDecoder
from strobe.symbols.signatures import FunctionSignature, Parameter
from strobe.symbols.types import Field, ValueLayout

INT = ValueLayout("int", "int", 4)
CSTR = ValueLayout("pointer", "const char*", 8, cstring=True)
INT_PTR = ValueLayout("pointer", "int*", 8, pointee=INT)


def node(depth: int) -> ValueLayout:
    """struct node {int value; const char* name; struct node* next;} as the type table lays it out to `depth`
    (a pointer and a struct each take one level)."""
    if depth <= 0:
        return ValueLayout("struct", "node", 24, truncated=True)
    pointee = node(depth - 2) if depth >= 2 else None
    next_ptr = ValueLayout("pointer", "node*", 8, pointee=pointee)
    return ValueLayout("struct", "node", 24, fields=(Field("value", 0, INT), Field("name", 8, CSTR),
                                                      Field("next", 16, next_ptr)))


def pointer_to(layout: ValueLayout) -> ValueLayout:
    return ValueLayout("pointer", f"{layout.type_name}*", 8, pointee=layout)


def in_register(name: str, reg: str, kind: str = "pointer", **extra: Any) -> dict[str, Any]:
    return {"name": name, "value": {"kind": kind, "size": 8}, "pieces": [{"at": 0, "size": 8, "reg": reg}], **extra}


def signature(*params: tuple[str, ValueLayout], returns: ValueLayout | None = None) -> FunctionSignature:
    return FunctionSignature("f", 0x1000, tuple(Parameter(n, layout) for n, layout in params), returns)


def node_bytes(value: int, name_ptr: int, next_ptr: int) -> str:
    return (value.to_bytes(4, "little") + bytes(4) + name_ptr.to_bytes(8, "little")
            + next_ptr.to_bytes(8, "little")).hex()


def test_a_list_is_followed_to_the_levels() -> None:
    plan = follow_plan({"params": [in_register("head", "rdi"), in_register("n", "rsi", kind="int")]},
                       signature(("head", pointer_to(node(5))), ("n", INT)), levels=2)
    assert plan is not None
    [slot] = plan.slots
    assert (slot.key, slot.register, slot.name) == ("0", 0, "head")
    first, second = (plan.nodes[slot.node].wire(), plan.nodes[plan.nodes[slot.node].children[0].node].wire())
    assert first == {"n": 24, "s": [8], "p": [[16, 1]]}
    assert second == {"n": 24, "s": [8]}  # the second level: its next is not followed

    decoder = FollowDecoder()
    decoder.add(7, 1, plan)
    captured = {"0": {"a": "0x1000", "h": node_bytes(1, 0x5000, 0x2000), "s": {"8": "alpha"},
                      "p": {"16": {"a": "0x2000", "h": node_bytes(2, 0x5010, 0x3000), "s": {"8": "beta"}}}}}
    assert decoder.decode(7, 1, captured) == {
        "0": {"value": 1, "name": "alpha", "next": {"value": 2, "name": "beta", "next": "0x3000"}}
    }
    assert decoder.decode(7, 2, captured) == {}  # another plan version: not this plan's values


def test_cycles_and_unreadable_memory_are_named() -> None:
    plan = follow_plan({"params": [in_register("ring", "rdi")]}, signature(("ring", pointer_to(node(9)))), 4)
    assert plan is not None
    decoder = FollowDecoder()
    decoder.add(1, 1, plan)
    back = {"a": "0x2000", "h": node_bytes(2, 0, 0x1000), "p": {"16": {"c": "0x1000"}}}
    value = decoder.decode(1, 1, {"0": {"a": "0x1000", "h": node_bytes(1, 0, 0x2000), "p": {"16": back}}})["0"]
    assert value == {"value": 1, "name": None, "next": {"value": 2, "name": None, "next": "<circular ref to ring>"}}

    deeper = {"a": "0x3000", "h": node_bytes(3, 0, 0x2000), "p": {"16": {"c": "0x2000"}}}
    middle = {"a": "0x2000", "h": node_bytes(2, 0, 0x3000), "p": {"16": deeper}}
    value = decoder.decode(1, 1, {"0": {"a": "0x1000", "h": node_bytes(1, 0, 0x2000), "p": {"16": middle}}})["0"]
    assert value["next"]["next"]["next"] == "<circular ref to ring->next>"

    bad = decoder.decode(1, 1, {"0": {"a": "0x10", "e": "address 0x10 not readable"}})
    assert bad == {"0": "<unreadable: address 0x10 not readable>"}


def test_strings_hidden_references_and_what_is_not_followed() -> None:
    big = ValueLayout("struct", "big", 40, fields=tuple(Field(f"f{i}", 8 * i, INT) for i in range(5)))
    plan = follow_plan(
        {"params": [in_register("text", "rdi"), in_register("xs", "rsi"), in_register("obj", "rdx", reference=True)],
         "returns": {"type": "big", "value": {"kind": "pointer", "size": 8},
                     "pieces": [{"at": 0, "size": 8, "reg": "rax"}], "address": True}},
        signature(("text", CSTR), ("xs", INT_PTR), ("obj", big), returns=big), 3)
    assert plan is not None
    assert [(s.key, s.register) for s in plan.slots] == [("0", 0), ("2", 2), ("r", RAX)]  # int* stays an address
    assert plan.nodes[plan.slots[0].node].wire() == {"n": 0, "t": 1}
    decoder = FollowDecoder()
    decoder.add(3, 1, plan)
    row = b"".join(i.to_bytes(4, "little") + bytes(4) for i in range(5)).hex()
    assert decoder.decode(3, 1, {"0": {"t": "hi"}, "2": {"a": "0x9", "h": row}}) == {
        "0": "hi", "2": {"f0": 0, "f1": 1, "f2": 2, "f3": 3, "f4": 4}}

    assert follow_plan({"params": [in_register("xs", "rdi")]}, signature(("xs", INT_PTR)), 3) is None
    stacked = {"name": "p", "note": "<struct on the stack: not captured>"}
    assert follow_plan({"params": [stacked]}, signature(("p", pointer_to(node(5)))), 3) is None


def test_structs_beyond_the_levels_show_their_type_name() -> None:
    inner = ValueLayout("struct", "inner", 4, fields=(Field("x", 0, INT),))
    mid = ValueLayout("struct", "mid", 8, fields=(Field("inner", 0, inner), Field("y", 4, INT)))
    outer = ValueLayout("struct", "outer", 16, fields=(Field("mid", 0, mid), Field("tag", 8, CSTR)))
    plan = follow_plan({"params": [in_register("o", "rdi")]}, signature(("o", pointer_to(outer))), 2)
    assert plan is not None
    decoder = FollowDecoder()
    decoder.add(1, 1, plan)
    data = (7).to_bytes(4, "little") + (8).to_bytes(4, "little") + (0x4000).to_bytes(8, "little")
    assert decoder.decode(1, 1, {"0": {"a": "0x1", "h": data.hex(), "s": {"8": "deep"}}}) == {
        "0": {"mid": {"inner": "<inner>", "y": 8}, "tag": "deep"}}


def test_pointers_inside_arrays_and_the_cap_per_node() -> None:
    leaf = ValueLayout("struct", "leaf", 4, fields=(Field("v", 0, INT),))
    holder = ValueLayout("struct", "holder", 8, fields=(Field("p", 0, pointer_to(leaf)),))
    items = ValueLayout("array", "holder[3]", 24, element=holder, count=3)
    bag = ValueLayout("struct", "bag", 24, fields=(Field("items", 0, items),))
    plan = follow_plan({"params": [in_register("b", "rdi")]}, signature(("b", pointer_to(bag))), 3)
    assert plan is not None
    top = plan.nodes[plan.slots[0].node]
    assert [(c.offset, c.path) for c in top.children] == [(0, ("items", 0, "p")), (8, ("items", 1, "p")),
                                                          (16, ("items", 2, "p"))]
    decoder = FollowDecoder()
    decoder.add(1, 1, plan)
    data = b"".join(a.to_bytes(8, "little") for a in (0x100, 0, 0x300)).hex()
    value = decoder.decode(1, 1, {"0": {"a": "0x1", "h": data, "p": {
        "0": {"a": "0x100", "h": (5).to_bytes(4, "little").hex()}, "16": {"c": "0x1"}}}})["0"]
    assert value == {"items": [{"p": {"v": 5}}, {"p": None}, {"p": "<circular ref to b>"}]}

    pointers = tuple(Field(f"p{i}", 8 * i, pointer_to(leaf)) for i in range(40))
    many = ValueLayout("struct", "many", 8 * 40, fields=pointers)
    plan = follow_plan({"params": [in_register("m", "rdi")]}, signature(("m", pointer_to(many))), 3)
    assert plan is not None and len(plan.nodes[plan.slots[0].node].children) == MAX_POINTERS


def _function_pointers(count: int) -> tuple[Field, ...]:
    slot = ValueLayout("pointer", "int (*)(void)", 8)  # a function pointer: no pointee
    return tuple(Field(f"f{i}", 8 * i, slot) for i in range(count))


def test_type_objects_and_method_tables_stay_addresses_below_the_argument() -> None:
    # A PyObject-like header: following ob_type into a type object (and its tables) is how a `PyObject*` grew
    # to 7.5 KB per event; a data struct with a few pointers among many fields is still followed.
    type_object = ValueLayout("struct", "_typeobject", 8 * 14, fields=_function_pointers(14))
    ops = ValueLayout("struct", "ops", 8 * 12, fields=_function_pointers(12))  # mostly pointers, unnamed as such
    data = ValueLayout("struct", "record", 4 * 12, fields=tuple(Field(f"v{i}", 4 * i, INT) for i in range(12)))
    header = ValueLayout("struct", "_object", 32, fields=(
        Field("ob_refcnt", 0, INT), Field("ob_type", 8, pointer_to(type_object)), Field("ops", 16, pointer_to(ops)),
        Field("data", 24, pointer_to(data))))
    plan = follow_plan({"params": [in_register("o", "rdi")]}, signature(("o", pointer_to(header))), levels=3)
    assert plan is not None
    [slot] = plan.slots
    followed = [child.path for child in plan.nodes[slot.node].children]
    assert followed == [("data",)]
    alone = follow_plan({"params": [in_register("t", "rdi")]}, signature(("t", pointer_to(type_object))), levels=3)
    assert alone is not None and alone.slots  # asked for directly, a type object is shown
