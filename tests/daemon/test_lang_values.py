"""Language values: which Rust and C++ library types a layout is (daemon/lang_values.py), the follow plan that
copies what they own at call time, and how the copied bytes show (daemon/follow.py). Layouts here are built the
way the DWARF type table builds them for rustc 1.95 and libstdc++ (field names and offsets as they are there)."""

from __future__ import annotations

from typing import Any

from strobe.daemon import lang_values as lang
from strobe.daemon.follow import follow_plan
from strobe.daemon.follow_decode import FollowDecoder
from strobe.symbols.signatures import FunctionSignature, Parameter
from strobe.symbols.types import MAX_ARRAY_ITEMS, MAX_STRING, Field, ValueLayout, Variant

U8 = ValueLayout("uint", "u8", 1)
I32 = ValueLayout("int", "i32", 4)
USIZE = ValueLayout("uint", "usize", 8)
CHAR = ValueLayout("char", "char", 1)
EMPTY = ValueLayout("struct", "Global", 0)


def struct(name: str, size: int, *fields: tuple[str, int, ValueLayout]) -> ValueLayout:
    return ValueLayout("struct", name, size, fields=tuple(Field(n, o, f) for n, o, f in fields))


def pointer(name: str, pointee: ValueLayout | None) -> ValueLayout:
    return ValueLayout("pointer", name, 8, pointee=pointee)


def rust_vec(element: str) -> ValueLayout:
    erased = struct("NonNull<u8>", 8, ("pointer", 0, pointer("*const u8", U8)))
    unique = struct("Unique<u8>", 8, ("pointer", 0, erased))
    inner = struct("RawVecInner<alloc::alloc::Global>", 16, ("ptr", 8, unique),
                   ("cap", 0, struct("UsizeNoHighBit", 8, ("__0", 0, USIZE))), ("alloc", 16, EMPTY))
    raw = struct(f"RawVec<{element}, alloc::alloc::Global>", 16, ("inner", 0, inner))
    return struct(f"Vec<{element}, alloc::alloc::Global>", 24, ("buf", 0, raw), ("len", 16, USIZE))


STRING = struct("String", 24, ("vec", 0, rust_vec("u8")))
STR = struct("&str", 16, ("data_ptr", 0, pointer("u8*", U8)), ("length", 8, USIZE))
SLICE = struct("&[i32]", 16, ("data_ptr", 0, pointer("i32*", I32)), ("length", 8, USIZE))
VEC_STRING = rust_vec("alloc::string::String")
POINT = struct("Point", 8, ("x", 0, I32), ("y", 4, I32))


def unit(name: str, size: int) -> ValueLayout:
    return ValueLayout("struct", name, size)


def result_i32_string() -> ValueLayout:
    """Result<i32, String>: a niche in String's capacity, Ok = 0x8000000000000000, Err the dataful default."""
    ok = Variant(1 << 63, Field("Ok", 0, struct("Ok", 24, ("__0", 8, I32))))
    err = Variant(None, Field("Err", 0, struct("Err", 24, ("__0", 0, STRING))))
    return ValueLayout("enum", "Result<i32, alloc::string::String>", 24,
                       discriminant=Field("<discriminant>", 0, USIZE), variants=(ok, err))


def option_of(payload: ValueLayout, at: int, discriminant: ValueLayout, none: int, some: int | None) -> ValueLayout:
    size = at + payload.size
    return ValueLayout("enum", f"Option<{payload.type_name}>", size,
                       discriminant=Field("<discriminant>", 0, discriminant),
                       variants=(Variant(none, Field("None", 0, unit("None", size))),
                                 Variant(some, Field("Some", 0, struct("Some", size, ("__0", at, payload))))))


def words(*values: int) -> str:
    return b"".join(v.to_bytes(8, "little") for v in values).hex()


def pair_entry(name: str) -> dict[str, Any]:
    return {"name": name, "value": {"kind": "struct", "size": 16},
            "pieces": [{"at": 0, "size": 8, "reg": "rdi"}, {"at": 8, "size": 8, "reg": "rsi"}]}


def by_reference(name: str, reg: str = "rdi") -> dict[str, Any]:
    return {"name": name, "value": {"kind": "pointer", "size": 8}, "pieces": [{"at": 0, "size": 8, "reg": reg}],
            "reference": True}


def signature(*params: tuple[str, ValueLayout], returns: ValueLayout | None = None) -> FunctionSignature:
    return FunctionSignature("f", 0x1000, tuple(Parameter(n, layout) for n, layout in params), returns)


def decoded(plan_json: dict[str, Any], sig: FunctionSignature, captured: dict[str, Any], levels: int = 3,
            args: lang.TemplateArgs | None = None) -> dict[str, Any]:
    plan = follow_plan(plan_json, sig, levels, args)
    assert plan is not None
    decoder = FollowDecoder()
    decoder.add(1, 1, plan)
    return decoder.decode(1, 1, captured)


# --- recognition -------------------------------------------------------------------------------------

def test_rust_strings_slices_and_vectors_are_counted_data() -> None:
    assert lang.shape(STR) == lang.Counted(0, 8, False, lang._U8, True, MAX_STRING)
    assert lang.shape(STRING) == lang.Counted(8, 16, False, lang._U8, True, MAX_STRING)
    assert lang.shape(SLICE) == lang.Counted(0, 8, False, I32, False, MAX_ARRAY_ITEMS)
    assert lang.shape(VEC_STRING, lambda layout: [STRING]) == lang.Counted(8, 16, False, STRING, False,
                                                                           MAX_ARRAY_ITEMS)
    assert lang.shape(VEC_STRING) == lang.Counted(8, 16, False, None, False, MAX_ARRAY_ITEMS)  # element unknown
    assert lang.shape(POINT) is None and lang.shape(I32) is None


def test_owning_pointers_and_cpp_containers() -> None:
    box = pointer("alloc::boxed::Box<rust_values::Point, alloc::alloc::Global>", POINT)
    assert lang.shape(box) == lang.Smart(0, POINT, "box")
    assert lang.shape(pointer("Point*", POINT)) is None
    inner = struct("RcInner<Point>", 24, ("strong", 0, USIZE), ("weak", 8, USIZE), ("value", 16, POINT))
    rc = struct("Rc<rust_values::Point, alloc::alloc::Global>", 8,
                ("ptr", 0, struct("NonNull<RcInner<Point>>", 8, ("pointer", 0, pointer("*const RcInner", inner)))))
    assert lang.shape(rc) == lang.Smart(0, inner, "rc")

    text = struct("basic_string<char, std::char_traits<char>, std::allocator<char> >", 32,
                  ("_M_dataplus", 0, struct("_Alloc_hider", 8, ("_M_p", 0, pointer("pointer", CHAR)))),
                  ("_M_string_length", 8, USIZE))
    assert lang.shape(text) == lang.Counted(0, 8, False, lang._U8, True, MAX_STRING)
    ends = (("_M_start", 0, pointer("pointer", I32)), ("_M_finish", 8, pointer("pointer", I32)),
            ("_M_end_of_storage", 16, pointer("pointer", I32)))
    impl = struct("_Vector_impl", 24, *ends)
    assert lang.shape(struct("vector<int, std::allocator<int> >", 24, ("_M_impl", 0, impl))) == lang.Counted(
        0, 8, True, I32, False, MAX_ARRAY_ITEMS)
    tree = struct("_Rb_tree_impl", 48, ("_M_node_count", 40, USIZE))
    assert lang.shape(struct("map<int, int>", 48, ("_M_t", 0, struct("_Rep_type", 48, ("_M_impl", 0, tree))))) == (
        lang.Sized(40))


# --- plans and values --------------------------------------------------------------------------------

def test_a_str_in_two_registers_is_copied_as_its_text() -> None:
    plan = follow_plan({"params": [pair_entry("s")]}, signature(("s", STR)), 3)
    assert plan is not None
    wire = plan.wire(1, 1)
    assert wire["slots"] == [] and wire["words"] == [["0", [0, 1], 0]]  # rdi and rsi, copied as the &str's bytes
    assert wire["nodes"] == [{"n": 16, "q": [[0, 8, 0, 1]]}, {"n": 1, "t": 2, "m": MAX_STRING}]
    text = "héllo".encode()
    captured = {"0": {"a": "0x7000", "h": words(0x5000, len(text)),
                      "q": {"0": {"a": "0x5000", "k": len(text), "h": text.hex()}}}}
    assert decoded({"params": [pair_entry("s")]}, signature(("s", STR)), captured) == {"0": "héllo"}


def test_cut_text_and_elements_say_how_much_more_there_was() -> None:
    captured = {"0": {"a": "0x7000", "h": words(0x5000, 5000),
                      "q": {"0": {"a": "0x5000", "k": 5000, "h": (b"x" * MAX_STRING).hex()}}}}
    assert decoded({"params": [pair_entry("s")]}, signature(("s", STR)), captured) == {
        "0": "x" * MAX_STRING + "…<3976 more bytes>"}
    shown = b"".join(i.to_bytes(4, "little") for i in range(MAX_ARRAY_ITEMS)).hex()
    captured = {"0": {"a": "0x7000", "h": words(0x5000, 5000), "q": {"0": {"a": "0x5000", "k": 5000, "h": shown}}}}
    value = decoded({"params": [pair_entry("v")]}, signature(("v", SLICE)), captured)["0"]
    assert value[:3] == [0, 1, 2] and len(value) == MAX_ARRAY_ITEMS + 1 and value[-1] == "… 4900 more"
    bad = {"a": "0x10", "e": "address 0x10 not readable"}
    unreadable = {"0": {"a": "0x7000", "h": words(0x10, 3), "q": {"0": bad}}}
    assert decoded({"params": [pair_entry("v")]}, signature(("v", SLICE)), unreadable) == {
        "0": "<unreadable: address 0x10 not readable>"}


def test_a_vec_of_strings_follows_each_element() -> None:
    plan_json = {"params": [by_reference("v")]}
    sig = signature(("v", VEC_STRING))
    plan = follow_plan(plan_json, sig, 3, lambda layout: [STRING] if layout is VEC_STRING else [])
    assert plan is not None
    assert plan.wire(1, 1)["nodes"] == [
        {"n": 24, "q": [[8, 16, 0, 1]]}, {"n": 24, "t": 2, "m": MAX_ARRAY_ITEMS, "e": 2},
        {"n": 24, "q": [[8, 16, 0, 3]]}, {"n": 1, "t": 2, "m": MAX_STRING}]
    elements = words(5, 0x6000, 5) + words(4, 0x6100, 4) + words(0, 1, 0)
    captured = {"0": {"a": "0x7000", "h": words(3, 0x5000, 3), "q": {"8": {
        "a": "0x5000", "k": 3, "h": elements,
        "x": [{"q": {"8": {"a": "0x6000", "k": 5, "h": b"alpha".hex()}}},
              {"q": {"8": {"a": "0x6100", "k": 4, "h": b"beta".hex()}}},
              {"q": {"8": {"a": "0x1", "k": 0, "h": ""}}}]}}}}
    assert decoded(plan_json, sig, captured, args=lambda layout: [STRING] if layout is VEC_STRING else []) == {
        "0": ["alpha", "beta", ""]}


def test_result_shows_its_live_variant_and_its_payload() -> None:
    result = result_i32_string()
    plan_json = {"params": [by_reference("r")]}
    sig = signature(("r", result))
    chance = {"a": "0xfffffff7", "e": "not readable"}
    ok = {"0": {"a": "0x7000", "h": words(1 << 63, 0xFFFFFFF7, 0), "q": {"8": chance}}}
    assert decoded(plan_json, sig, ok) == {"0": {"Ok": -9}}  # the Err's pointer, read on the chance, is ignored
    err = {"0": {"a": "0x7000", "h": words(11, 0x5000, 11),
                 "q": {"8": {"a": "0x5000", "k": 11, "h": b"failed here".hex()}}}}
    assert decoded(plan_json, sig, err) == {"0": {"Err": "failed here"}}


def test_options_niche_and_tagged_show_null_or_the_value() -> None:
    tagged = option_of(I32, 4, ValueLayout("uint", "u32", 4), none=0, some=1)
    niche = option_of(STR, 0, USIZE, none=0, some=None)  # a None is a null data pointer
    holder = struct("Holder", 40, ("count", 0, tagged), ("name", 8, niche), ("tail", 24, STR))
    plan_json = {"params": [{"name": "h", "value": {"kind": "pointer", "size": 8},
                             "pieces": [{"at": 0, "size": 8, "reg": "rdi"}]}]}
    sig = signature(("h", pointer("&Holder", holder)))
    some = (1).to_bytes(4, "little") + (17).to_bytes(4, "little")
    data = (some + bytes.fromhex(words(0x5000, 5) + words(0x6000, 2))).hex()
    maybe, ok = {"a": "0x5000", "k": 5, "h": b"maybe".hex()}, {"a": "0x6000", "k": 2, "h": b"ok".hex()}
    captured = {"0": {"a": "0x7000", "h": data, "q": {"8": maybe, "24": ok}}}
    assert decoded(plan_json, sig, captured) == {"0": {"count": 17, "name": "maybe", "tail": "ok"}}
    none = (bytes(8) + bytes.fromhex(words(0, 0) + words(0x6000, 2))).hex()
    captured = {"0": {"a": "0x7000", "h": none, "q": {"8": {"a": "0x0", "k": 0, "h": ""},
                                                      "24": {"a": "0x6000", "k": 2, "h": b"ok".hex()}}}}
    assert decoded(plan_json, sig, captured) == {"0": {"count": None, "name": None, "tail": "ok"}}


def test_owning_pointers_show_what_they_own_with_its_address() -> None:
    box = pointer("alloc::boxed::Box<rust_values::Point, alloc::alloc::Global>", POINT)
    entry = {"name": "b", "value": {"kind": "pointer", "size": 8}, "pieces": [{"at": 0, "size": 8, "reg": "rdi"}]}
    plan = follow_plan({"params": [entry]}, signature(("b", box)), 3)
    assert plan is not None and plan.wire(1, 1)["words"] == [["0", [0], 0]]
    point = ((5).to_bytes(4, "little") + (-6).to_bytes(4, "little", signed=True)).hex()
    captured = {"0": {"a": "0x7000", "h": words(0x5000), "p": {"0": {"a": "0x5000", "h": point}}}}
    assert decoded({"params": [entry]}, signature(("b", box)), captured) == {
        "0": {"address": "0x5000", "value": {"x": 5, "y": -6}}}

    strong = struct("Cell<usize>", 8, ("value", 0, struct("UnsafeCell<usize>", 8, ("value", 0, USIZE))))
    inner = struct("RcInner<Point>", 24, ("strong", 0, strong), ("weak", 8, strong), ("value", 16, POINT))
    rc = struct("Rc<rust_values::Point, alloc::alloc::Global>", 8,
                ("ptr", 0, struct("NonNull<RcInner<Point>>", 8, ("pointer", 0, pointer("*const RcInner", inner)))))
    captured = {"0": {"a": "0x7000", "h": words(0x5000), "p": {"0": {"a": "0x5000", "h": words(2, 1) + point}}}}
    assert decoded({"params": [entry]}, signature(("r", rc)), captured) == {
        "0": {"address": "0x5000", "strong": 2, "weak": 1, "value": {"x": 5, "y": -6}}}


def test_a_cpp_vector_counts_from_its_end_pointer_and_a_map_shows_its_size() -> None:
    ends = (("_M_start", 0, pointer("pointer", I32)), ("_M_finish", 8, pointer("pointer", I32)),
            ("_M_end_of_storage", 16, pointer("pointer", I32)))
    vector = struct("vector<int, std::allocator<int> >", 24, ("_M_impl", 0, struct("_Vector_impl", 24, *ends)))
    entry = {"name": "v", "value": {"kind": "pointer", "size": 8}, "pieces": [{"at": 0, "size": 8, "reg": "rdi"}]}
    sig = signature(("v", pointer("vector<int>&", vector)))
    plan = follow_plan({"params": [entry]}, sig, 3)
    assert plan is not None and plan.wire(1, 1)["nodes"][0] == {"n": 24, "q": [[0, 8, 1, 1]]}  # 1: an end pointer
    items = b"".join(i.to_bytes(4, "little", signed=True) for i in (4, -8)).hex()
    copied = {"a": "0x5000", "k": 2, "h": items}
    captured = {"0": {"a": "0x7000", "h": words(0x5000, 0x5008, 0x5010), "q": {"0": copied}}}
    assert decoded({"params": [entry]}, sig, captured) == {"0": [4, -8]}

    tree = struct("_Rb_tree_impl", 48, ("_M_node_count", 40, USIZE))
    tree_map = struct("map<int, int>", 48, ("_M_t", 0, struct("_Rep_type", 48, ("_M_impl", 0, tree))))
    sig = signature(("m", pointer("map<int, int>&", tree_map)))
    captured = {"0": {"a": "0x7000", "h": words(0, 0, 0, 0, 0, 4)}}
    assert decoded({"params": [entry]}, sig, captured) == {"0": {"size": 4, "entries": lang.MAP_NOTE}}
