"""The index of a Rust program, with legacy and v0 mangling: module paths, generics, methods, closures."""

from __future__ import annotations

import re

import pytest

from strobe.symbols import FunctionIndex, FunctionInfo, build_index
from tests.symbols.conftest import Programs, line_of

SOURCE = "rsprog.rs"
HASH = re.compile(r"::h[0-9a-f]{16}\b")


@pytest.fixture(scope="module", params=["rust-legacy", "rust-v0"])
def index(request: pytest.FixtureRequest, programs: Programs) -> FunctionIndex:
    return build_index(programs.build(request.param))


def one(index: FunctionIndex, name: str) -> FunctionInfo:
    found = [f for f in index.functions if f.name == name and not f.inlined_only]
    assert len(found) == 1, f"{name}: {found}"
    return found[0]


@pytest.mark.parametrize(
    ("name", "marker", "params"),
    [
        ("rsprog::submit::handle", "submit::handle", 1),
        ("rsprog::submit::Queue::push", "Queue::push", 2),  # a method: `self` counts
        ("rsprog::largest<u32>", "largest", 1),
        ("rsprog::largest<f64>", "largest", 1),
        ("rsprog::main::{closure#0}", "closure", 1),
    ],
)
def test_user_functions(index: FunctionIndex, name: str, marker: str, params: int) -> None:
    function = one(index, name)
    assert function.file is not None and function.file.endswith(f"/programs/{SOURCE}")
    assert (function.line, function.params) == (line_of(SOURCE, marker), params)
    assert function.signature == name and function.address > 0 and function.size > 0


def test_generic_instances_and_closures_are_distinct(index: FunctionIndex) -> None:
    assert one(index, "rsprog::largest<u32>").address != one(index, "rsprog::largest<f64>").address
    second = one(index, "rsprog::main::{closure#1}")
    assert second.address != one(index, "rsprog::main::{closure#0}").address
    assert second.line == line_of(SOURCE, "closure") + 1
    assert one(index, "rsprog::main").line is not None


def test_no_hashes_in_names(index: FunctionIndex) -> None:
    assert not [f.name for f in index.functions if HASH.search(f.name)]
    assert not [f.name for f in index.functions if "{{closure}}" in f.name and f.file is not None]


def test_both_manglings_name_user_functions_alike(programs: Programs) -> None:
    def user(variant: str) -> set[tuple[str, int | None]]:
        index = build_index(programs.build(variant))
        return {(f.name, f.line) for f in index.functions if f.file and f.file.endswith(SOURCE)}

    legacy, v0 = user("rust-legacy"), user("rust-v0")
    assert legacy == v0
    assert ("rsprog::submit::handle", line_of(SOURCE, "submit::handle")) in legacy
