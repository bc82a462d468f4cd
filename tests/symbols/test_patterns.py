"""Pattern syntax: the spec's table, plain C names, @usercode, @file:, and invalid patterns."""

from __future__ import annotations

from dataclasses import astuple, dataclass
from pathlib import Path

import pytest

from strobe.errors import ErrorCode, InvalidPattern
from strobe.symbols.cache import FunctionTable
from strobe.symbols.elf import ElfInfo
from strobe.symbols.index import FunctionIndex, FunctionInfo
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
