"""Pattern syntax: the spec's table, plain C names, generic and template functions by their name without arguments
(unit cases, then the names the index really holds for tests/targets/rust_generics and templates.cpp, checked against
`nm -C`), @usercode, @file:, and invalid patterns."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import astuple, dataclass
from pathlib import Path

import pytest

from strobe.errors import ErrorCode, InvalidPattern
from strobe.symbols.cache import FunctionTable
from strobe.symbols.elf import ElfInfo
from strobe.symbols.index import FunctionIndex, FunctionInfo, build_index
from strobe.symbols.patterns import parse_pattern


@dataclass(frozen=True)
class Fn:
    name: str
    file: str | None = None


@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        ("foo::bar", ["foo::bar"], ["foo::baz", "x::foo::bar", "foo::bar::qux"]),
        ("foo::*", ["foo::bar", "foo::baz"], ["foo::bar::qux", "foo", "other::bar"]),
        ("foo::**", ["foo::bar", "foo::bar::baz"], ["other::bar", "foo", "foobar::x"]),
        ("*::validate", ["auth::validate", "form::validate"], ["auth::deep::validate", "validate"]),
        ("auth::**::validate", ["auth::validate", "auth::user::validate", "auth::a::b::validate"],
         ["form::validate", "auth::validated"]),
        ("processCommand", ["processCommand"], ["processCommand2", "ns::processCommand"]),
        ("**::draw", ["draw", "a::draw", "a::b::draw"], ["drawer", "a::redraw"]),
        ("twice<*>", ["twice<int>", "twice<double>"], ["twice"]),
        ("twice", ["twice", "twice<int>", "twice<double>"], ["twice_x", "x::twice"]),
        ("geo::Box<int>::get", ["geo::Box<int>::get"], ["geo::Box<long>::get"]),
        ("parse_*", ["parse_line", "parse_"], ["x::parse_line"]),
        ("operator()", ["operator()"], ["operator"]),
    ],
)
def test_glob_patterns(pattern: str, matching: list[str], not_matching: list[str]) -> None:
    compiled = parse_pattern(pattern, None)
    for name in matching:
        assert compiled.matches(Fn(name)), (pattern, name)
    for name in not_matching:
        assert not compiled.matches(Fn(name)), (pattern, name)


STD_STRING = "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >"


@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        # A part without arguments: any instantiation, Rust (v0 and legacy mangling) and C++ alike.
        ("*::print_all",
         ["Printer<W>::print_all<X>", "Printer<u32>::print_all<f64>", "Printer::print_all",
          "Printer<std::string>::print_all", f"Printer<{STD_STRING} >::print_all<int>",
          "Printer<alloc::vec::Vec<alloc::string::String>>::print_all<&str>"],
         ["print_all", "print_all_items", "app::print_all_items", "app::Printer::print_all",
          "Printer<u32>::print_all_x", "Printer<u32>::print_all<f64>::{closure#0}"]),
        ("app::Printer::print_all",
         ["app::Printer<W>::print_all<X>", "app::Printer<Vec<u8>>::print_all", "app::Printer<W>::print_all<u32, f64>",
          "app::Printer::print_all", "app::Printer<alloc::string::String>::print_all<i64>"],
         ["app::Printer::print_all_items", "app::Printers::print_all", "app::Printer<u8>::x::print_all",
          "x::app::Printer<u8>::print_all", "app::Printer<u8>::print_all::{closure#0}"]),
        ("Stack::push", ["Stack<int>::push", "Stack<double>::push", "Stack::push"],
         ["Stack<int>::push_back", "Stacks<int>::push", "ns::Stack<int>::push"]),
        ("app::**::print_all",
         ["app::Printer<std::string>::print_all<int>", "app::print_all", "app::a<b::c>::d::print_all"],
         ["app::print_all_items", "app::Printer<u8>::print_all::x"]),
        ("**::print_all", ["print_all<int>", "a::b<c::d>::print_all<e::f>"], ["a<b::print_all>", "a::print_all_items"]),
        # A part that spells its arguments: only that instantiation.
        ("app::Printer<u32>::*", ["app::Printer<u32>::print_all<f64>", "app::Printer<u32>::new"],
         ["app::Printer<u64>::print_all<f64>", "app::Printer::print_all", "app::Printer<u32>::a::b",
          "app::Printer<W>::print_all<u32, f64>", "app::Printer<Vec<u32>>::new"]),
        ("app::Printer<u32>::print_all", ["app::Printer<u32>::print_all<f64>", "app::Printer<u32>::print_all"],
         ["app::Printer<i32>::print_all<f64>", "app::Printer<u32>::print_all_items"]),
        ("Printer<u32>::print_all<f64>", ["Printer<u32>::print_all<f64>"], ["Printer<u32>::print_all<&str>"]),
        ("Printer<*>::*",
         ["Printer<u32>::print_all<f64>", "Printer<alloc::string::String>::new", "Printer<Vec<u8>>::x"],
         ["Printer::new", "Printer<u32>::a::b"]),
        ("Printer<*::String>::new", ["Printer<alloc::string::String>::new"], ["Printer<u32>::new"]),
        ("Printer<std::string>::print_all", ["Printer<std::string>::print_all", "Printer<std::string>::print_all<int>"],
         ["Printer<std::wstring>::print_all"]),
        (f"Printer<{STD_STRING} >::*", [f"Printer<{STD_STRING} >::print_all<int>"], ["Printer<int>::print_all<int>"]),
        ("Pair<Box<int>,int>::get", ["Pair<Box<int>, int>::get", "Pair<Box<int>,int>::get"],
         ["Pair<Box<int>, long>::get"]),
        ("Box<Box<int>>::get", ["Box<Box<int> >::get", "Box<Box<int>>::get"], ["Box<Box<long> >::get"]),
        ("Call<fn(u8) -> bool>::call", ["Call<fn(u8) -> bool>::call"], ["Call<fn(u8) -> u8>::call"]),
        # Operators whose names hold angle brackets, parentheses or an arrow.
        ("app::operator<<", ["app::operator<<", "app::operator<< <int>"], ["app::operator<", "app::operator<<="]),
        ("app::operator<", ["app::operator<", "app::operator< <int>"], ["app::operator<<", "app::operator<="]),
        ("Stack::operator->", ["Stack<int>::operator->"], ["Stack<int>::operator->*", "Stack<int>::operator-"]),
        ("Stack::operator()", ["Stack<int>::operator()"], ["Stack<int>::operator[]"]),
        ("Stack::*",
         ["Stack<int>::operator<", "Stack<int>::operator->", "Stack<int>::operator()", "Stack<int>::operator<<",
          "Stack<int>::operator<=>", "Stack<int>::operator>>=", "Stack<int>::push", "Stack<int>::~Stack"],
         ["Stack<int>::a::b", "Stack<int>"]),
        ("Stack<int>::operator<", ["Stack<int>::operator<"], ["Stack<long>::operator<"]),
        # Rust's qualified paths and closures are one part each.
        ("*::describe",
         ["<app::Printer<u32> as app::Describe>::describe", "<impl app::Describe for app::Printer<u32>>::describe"],
         ["app::Printer<u32>::x::describe"]),
        ("**::describe", ["<app::Printer<u32> as app::Describe>::describe", "describe", "a::<b as c::D>::describe"],
         ["describer"]),
        ("<app::Printer<u32> as app::Describe>::describe", ["<app::Printer<u32> as app::Describe>::describe"],
         ["<app::Printer<u64> as app::Describe>::describe"]),
        ("<*Printer<u32> as *>::*", ["<app::Printer<u32> as app::Describe>::describe"],
         ["<app::Printer<u64> as app::Describe>::describe"]),
        ("main::*", ["main::{closure#0}", "main::{{closure}}"], ["main::{closure#0}::{closure#0}"]),
        ("run_round::*", ["run_round<i32>::{closure#0}", "run_round::{{closure}}"], ["run_round_x::{closure#0}"]),
        ("*::call", ["<fn(i32) -> bool as Fn>::call", "Foo<fn() -> u8>::call"], ["a::b::call"]),
        ("print_*", ["print_all<f64>", "print_all<alloc::string::String>", "print_"], ["x::print_all"]),
        ("*::*", ["a<b::c>::d<e::f>", "x::y"], ["a::b::c", "x"]),
    ],
)
def test_generic_functions_by_their_name(pattern: str, matching: list[str], not_matching: list[str]) -> None:
    compiled = parse_pattern(pattern, None)
    for name in matching:
        assert compiled.matches(Fn(name)), (pattern, name)
    for name in not_matching:
        assert not compiled.matches(Fn(name)), (pattern, name)


def test_deep_generic_arguments_and_long_names_stay_cheap() -> None:
    """Arguments nested 12 deep, and a glob over a long name that does not match (no catastrophic backtracking)."""
    deep = "a::" + "V<" * 12 + "u8" + ">" * 12 + "::f<" + "W<" * 12 + "x::y" + ">" * 12 + ">"
    assert parse_pattern("a::V::f", None).matches(Fn(deep))
    assert parse_pattern("*::*::f", None).matches(Fn(deep))
    long_name = "::".join(f"m{i}<a::b<c, d::e>, f>" for i in range(40)) + "::nope"
    for text in ("**::*x*y*", "*::*::*::*z", "**::*_*::new"):
        assert not parse_pattern(text, None).matches(Fn(long_name))


def test_usercode_is_functions_declared_under_the_project(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    usercode = parse_pattern("@usercode", str(project))
    assert usercode.matches(Fn("main", str(project / "src" / "main.c")))
    assert not usercode.matches(Fn("printf", "/usr/include/stdio.h"))
    assert not usercode.matches(Fn("f", str(tmp_path / "proj-other" / "x.c")))  # a sibling with the same prefix
    assert not usercode.matches(Fn("lambda", None))


def test_file_pattern_is_a_path_substring() -> None:
    by_file = parse_pattern("@file:render/draw.cpp", None)
    assert by_file.matches(Fn("a", "/home/me/app/src/render/draw.cpp"))
    assert not by_file.matches(Fn("a", "/home/me/app/src/render/paint.cpp"))
    assert not by_file.matches(Fn("a", None))


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("", "empty"),
        ("   ", "empty"),
        (" foo", "whitespace"),
        ("@foo", "unknown directive"),
        ("@file:", "name a file"),
        ("a::***", "ambiguous"),
        ("::foo", "'::'"),
        ("foo::", "'::'"),
        ("a:::b", "'::'"),
        ("x" * 600, "longer than"),
        ("app::Printer<u32::print_all", "'<' is never closed"),
        ("app::Printer>::print_all", "'>' closes no '<'"),
        ("Printer<<u32>::x", "'<' is never closed"),
    ],
)
def test_invalid_patterns_say_what_is_wrong(pattern: str, fragment: str) -> None:
    with pytest.raises(InvalidPattern) as error:
        parse_pattern(pattern, "/tmp")
    assert error.value.code is ErrorCode.INVALID_PATTERN
    assert fragment in error.value.message


def test_usercode_needs_a_project_root() -> None:
    with pytest.raises(InvalidPattern):
        parse_pattern("@usercode", None)


def test_an_index_selects_what_matches_accepts(tmp_path: Path) -> None:
    """Pattern.positions (names column, files once each) and Pattern.matches (one function) agree."""
    project = tmp_path / "proj"
    (project / "src").mkdir(parents=True)
    (tmp_path / "link").symlink_to(project / "src")  # a file reached through a symlink is still user code
    names = ["auth::validate", "auth::user::validate", "validate", "parse_line", "x::parse_line", "twice<int>",
             "ns::a\nb", "main"]
    files = [str(project / "src" / "a.c"), str(tmp_path / "link" / "b.c"), None, "/usr/include/stdio.h",
             str(tmp_path / "proj-other" / "x.c"), str(project / "src" / "a.c"), "/src/render/draw.cpp", None]
    functions = [FunctionInfo(name, name, name, 0x10 * i, 8, file, 1, False, 0)
                 for i, (name, file) in enumerate(zip(names, files, strict=True))]
    table = FunctionTable.from_rows([astuple(f) for f in functions])  # columns only, as a cached index
    index = FunctionIndex(ElfInfo("/bin/x", None, 0, True, True), table)
    for text in ("**", "**::validate", "*::validate", "parse_*", "twice<*>", "ns::**", "main", "nope", "@usercode",
                 "@file:draw.cpp", "@file:src/"):
        pattern = parse_pattern(text, str(project))
        expected = [i for i, f in enumerate(functions) if pattern.matches(f)]
        assert pattern.positions(index) == expected, text
        assert (pattern.name_regex is None) == text.startswith("@")
    assert parse_pattern("@usercode", str(project)).positions(index) == [0, 1, 5]


def nm_functions(binary: Path) -> list[tuple[int, str]]:
    """(address, demangled name) of every function `nm -C` lists: the oracle for what instantiations exist."""
    listed = subprocess.run(["nm", "-C", str(binary)], capture_output=True, text=True, check=True).stdout
    return [(int(line[:16], 16), line[19:]) for line in listed.splitlines() if line[17:18] in ("t", "T", "W")]


def nm_instances(binary: Path, method: str) -> set[int]:
    """The addresses of the functions `nm -C` names `...::<method>`, with or without arguments and parameters, closures
    and lambdas defined in them left out."""
    name = re.compile(rf"::{re.escape(method)}(?:<[^()]*>)?(?:\(.*\)( const)?)?$")
    return {address for address, text in nm_functions(binary) if name.search(text) and "{lambda" not in text}


def test_templates_index_every_instantiation_by_name(cpp_target: Callable[[str], Path]) -> None:
    binary = cpp_target("templates")
    index = build_index(binary)

    def selected(text: str) -> list[FunctionInfo]:
        return index.at(parse_pattern(text, None).positions(index))

    print_alls = selected("app::Printer::print_all")
    assert {f.address for f in print_alls} == nm_instances(binary, "print_all") and len(print_alls) == 3
    assert {f.name for f in print_alls} == {
        "app::Printer<int>::print_all<double>", "app::Printer<int>::print_all<char const*>",
        f"app::Printer<{STD_STRING} >::print_all<int>"}
    assert selected("*::*::print_all") == print_alls == selected("**::print_all")
    assert {f.name for f in selected("app::Printer<int>::*")} == {"app::Printer<int>::print_all<double>",
                                                                  "app::Printer<int>::print_all<char const*>"}
    assert {f.name for f in selected("app::Stack::push")} == {"app::Stack<int>::push", "app::Stack<double>::push"}
    assert {f.address for f in selected("app::Stack::push")} == nm_instances(binary, "push") - {
        f.address for f in index.functions if f.name.startswith("std::")}
    assert [f.name for f in selected("app::operator<<")] == ["app::operator<< <int>"]
    assert {f.name for f in selected("app::Stack<int>::operator*")} == {
        "app::Stack<int>::operator<", "app::Stack<int>::operator->", "app::Stack<int>::operator()"}
    assert [f.name for f in selected("app::print_all_items")] == ["app::print_all_items"]


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")
def test_rust_generics_index_every_instantiation_by_name(rust_target: Callable[[str], Path]) -> None:
    """Cargo's default (legacy) mangling: the index names an impl's generic method "Printer<W>::print_all<u32, f64>"."""
    binary = rust_target("rust_generics")
    index = build_index(binary)

    def names(text: str) -> set[str]:
        return {f.name for f in index.at(parse_pattern(text, None).positions(index))}

    expected = {"rust_generics::app::Printer<W>::print_all<u32, &str>",
                "rust_generics::app::Printer<W>::print_all<u32, f64>",
                "rust_generics::app::Printer<W>::print_all<alloc::string::String, i64>"}
    assert names("rust_generics::app::Printer::print_all") == expected
    assert names("rust_generics::app::*::print_all") == expected == names("**::print_all")
    found = index.at(parse_pattern("rust_generics::app::Printer::print_all", None).positions(index))
    assert {f.address for f in found} == nm_instances(binary, "print_all")
    assert names("*::describe") == {"<rust_generics::app::Printer<u32> as rust_generics::app::Describe>::describe"}
    assert names("rust_generics::app::print_all_items") == {"rust_generics::app::print_all_items"}
    assert names("rust_generics::run_round") == {"rust_generics::run_round<i32>"}
    assert names("rust_generics::main::*") == {"rust_generics::main::{closure#0}"}
