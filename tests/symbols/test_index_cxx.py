"""The index of a C++ program: qualified demangled names, overloads, templates, members, lambdas."""

from __future__ import annotations

import pytest

from strobe.symbols import FunctionIndex, FunctionInfo, build_index
from tests.symbols.conftest import Programs, line_of

MAIN = "cxxprog.cpp"


@pytest.fixture(scope="module", params=["cxx", "cxx-dwarf4"])
def index(request: pytest.FixtureRequest, programs: Programs) -> FunctionIndex:
    return build_index(programs.build(request.param))


def named(index: FunctionIndex, name: str) -> list[FunctionInfo]:
    found = [f for f in index.functions if f.name == name]
    assert found, f"{name} not in the index"
    return found


def one(index: FunctionIndex, name: str) -> FunctionInfo:
    [function] = named(index, name)
    return function


def test_index_is_sorted_and_unique(index: FunctionIndex) -> None:
    keys = [(f.address, f.name) for f in index.functions]
    assert len(keys) == len(set(keys))
    assert [f.address for f in index.functions] == sorted(f.address for f in index.functions)


@pytest.mark.parametrize(
    ("name", "marker", "params", "signature"),
    [
        ("auth::User::validate", "User::validate", 2, "auth::User::validate(int) const"),  # out-of-class, `this`
        ("auth::User::id", "User::id", 1, "auth::User::id() const"),
        ("auth::User::operator bool", "User::operator bool", 1, "auth::User::operator bool() const"),
        ("auth::detail::deep::depth", "deep::depth", 1, "auth::detail::deep::depth(int)"),
        ("(anonymous namespace)::helper", "anon helper", 1, "(anonymous namespace)::helper(int)"),
        ("Outer::Inner::twice", "Inner::twice", 2, "Outer::Inner::twice(int) const"),
        ("Adder::operator()", "Adder::operator()", 2, "Adder::operator()(int) const"),
        ("Square::area", "Square::area", 1, "Square::area() const"),
        ("Shape::area", "Shape::area", 1, "Shape::area() const"),
        ("apply", "apply", 2, "apply(int (*)(int), int)"),
        ("make_label", "make_label", 1, "make_label[abi:cxx11](int)"),
        ("main", None, 2, "main"),
    ],
)
def test_members_and_free_functions(
    index: FunctionIndex, name: str, marker: str | None, params: int, signature: str
) -> None:
    function = one(index, name)
    assert function.file is not None and function.file.endswith(f"/programs/{MAIN}")
    if marker is not None:
        assert function.line == line_of(MAIN, marker)
    assert (function.params, function.signature) == (params, signature)
    assert function.address > 0 and function.size > 0 and not function.inlined_only
    assert index.by_address(function.address) is function


def test_constructor_counts_this(index: FunctionIndex) -> None:
    constructors = named(index, "auth::User::User")
    assert {f.signature for f in constructors} == {"auth::User::User(int)"}
    assert all(f.params == 2 and f.line == line_of(MAIN, "User::User") for f in constructors)
    assert all(f.raw.startswith("_ZN4auth4UserC") for f in constructors)


def test_overloads_have_two_addresses_and_signatures(index: FunctionIndex) -> None:
    overloads = named(index, "auth::check")
    assert {(f.signature, f.line, f.params) for f in overloads} == {
        ("auth::check(int)", line_of(MAIN, "check(int)"), 1),
        ("auth::check(char const*, int)", line_of(MAIN, "check(const char*, int)"), 2),
    }
    assert len({f.address for f in overloads}) == 2


def test_templates_instantiated_twice(index: FunctionIndex) -> None:
    for method, marker in (("get", "Box::get"), ("operator<", "Box::operator<")):
        instances = [one(index, f"geo::Box<{t}>::{method}") for t in ("int", "double")]
        assert len({f.address for f in instances}) == 2
        for function in instances:
            assert function.file is not None and function.file.endswith("/programs/cxxprog_geo.h")
            assert function.line == line_of("cxxprog_geo.h", marker)
    # Box<int> is instantiated in both translation units; the linker kept one copy and so does the index.
    assert len(named(index, "geo::Box<int>::get")) == 1


def test_virtual_destructors_and_lambdas(index: FunctionIndex) -> None:
    # Deleting and complete-object destructors are two functions with the same name.
    assert len({f.address for f in named(index, "Square::~Square")}) == 2
    # gcc gives lambdas no linkage name and no decl_file: the name comes from the symbol table.
    lam = one(index, "main::{lambda(int)#1}::operator()")
    assert lam.raw == "_ZZ4mainENKUliE_clEi" and lam.signature == "main::{lambda(int)#1}::operator()(int) const"
    assert lam.params == 2 and lam.file is None
    assert one(index, "main::{lambda(int)#2}::operator()").address != lam.address


def test_symbol_table_only_functions_are_listed(index: FunctionIndex) -> None:
    start = one(index, "_start")
    assert start.file is None and start.line is None and start.params == 0


def test_optimised_build(programs: Programs) -> None:
    index = build_index(programs.build("cxx-O2"))
    names = {f.name for f in index.functions}
    assert {"main", "box_total", "make_label"} <= names
    keys = [(f.address, f.name) for f in index.functions]
    assert len(keys) == len(set(keys))
    assert all(f.address == 0 for f in index.functions if f.inlined_only)
