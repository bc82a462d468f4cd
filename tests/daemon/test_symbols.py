"""load_session_symbols: one index per loaded module with DWARF, relocated by its own slide, and
plan_hooks over those indexes selecting what the per-function path selected."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from strobe.daemon.symbols import ModuleSymbols, SessionSymbols, TraceableFunction, load_session_symbols
from strobe.daemon.tracing import plan_hooks
from strobe.instrument.protocol import ModuleInfo
from strobe.symbols.patterns import Pattern, parse_pattern

TARGETS = Path(__file__).parents[1] / "targets"
MAIN_BASE = 0x400000  # a non-PIE executable is loaded at its image base: slide 0
LIB_BASE = 0x7F12_3456_0000


class Scanned:
    """The per-function path: the flat list of every relocated function, each tested with Pattern.matches."""

    dialect = "native"

    def __init__(self, functions: Sequence[TraceableFunction]) -> None:
        self.functions = functions

    def positions(self, pattern: Pattern) -> list[int]:
        return [i for i, function in enumerate(self.functions) if pattern.matches(function)]

    def functions_at(self, positions: Sequence[int]) -> list[TraceableFunction]:
        return [self.functions[i] for i in positions]


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """uses_lib (non-PIE) linked against libmathlib.so (PIC, with DWARF), and a library without DWARF."""
    out = tmp_path_factory.mktemp("symbols")
    lib = out / "libmathlib.so"
    subprocess.run(["gcc", "-g", "-O0", "-shared", "-fPIC", "-o", str(lib), str(TARGETS / "mathlib.c")], check=True)
    plain = out / "libplain.so"
    subprocess.run(["gcc", "-O0", "-shared", "-fPIC", "-o", str(plain), str(TARGETS / "mathlib.c")], check=True)
    binary = out / "uses_lib"
    subprocess.run(
        ["gcc", "-g", "-O0", "-no-pie", "-o", str(binary), str(TARGETS / "uses_lib.c"), f"-L{out}", "-lmathlib",
         f"-Wl,-rpath,{out}"],
        check=True,
    )
    return binary, lib, plain


def load(program: tuple[Path, Path, Path], cache_dir: Path) -> SessionSymbols:
    binary, lib, plain = program
    modules = [
        ModuleInfo(name="uses_lib", path=str(binary), base=hex(MAIN_BASE), size=0x1000),
        ModuleInfo(name="linux-vdso.so.1", path="linux-vdso.so.1", base="0x7fff00000000", size=0x1000),
        ModuleInfo(name="libplain.so", path=str(plain), base="0x7f0000000000", size=0x1000),
        ModuleInfo(name="libmathlib.so", path=str(lib), base=hex(LIB_BASE), size=0x1000),
    ]
    return load_session_symbols(str(binary), modules, cache_dir)


def test_each_module_with_dwarf_gets_its_index_and_slide(program: tuple[Path, Path, Path], tmp_path: Path) -> None:
    binary, lib, _ = program
    symbols = load(program, tmp_path)
    assert symbols.main_has_dwarf
    assert symbols.modules == (str(binary), str(lib))
    main, library = symbols.indexes
    assert main.index.elf.image_base == MAIN_BASE and main.slide == 0
    assert library.index.elf.image_base == 0 and library.slide == LIB_BASE
    assert all("functions" not in m.index.__dict__ for m in symbols.indexes)  # nothing built yet

    (scale,) = library.functions_at(library.positions(parse_pattern("lib_scale", None)))
    assert scale.module == str(lib) and scale.runtime_address == LIB_BASE + scale.info.address
    assert scale.key == (str(lib), scale.info.address, "lib_scale")
    (entry,) = main.functions_at(main.positions(parse_pattern("main", None)))
    assert entry.runtime_address == entry.info.address >= MAIN_BASE


@pytest.mark.parametrize(
    "add",
    [["lib_scale", "main"], ["**"], ["*"], ["@usercode"], ["@file:mathlib.c"], ["@file:uses_lib"], ["exists", "nope"]],
)
def test_plan_through_indexes_equals_the_per_function_plan(
    program: tuple[Path, Path, Path], tmp_path: Path, add: list[str]
) -> None:
    by_index = plan_hooks([], add, [], load(program, tmp_path).indexes, str(TARGETS))
    flat = load(program, tmp_path).functions
    by_scan = plan_hooks([], add, [], [Scanned(flat)], str(TARGETS))
    assert list(by_index.desired.items()) == list(by_scan.desired.items())
    assert (by_index.patterns, by_index.matched, by_index.warnings) == (
        by_scan.patterns, by_scan.matched, by_scan.warnings
    )


def test_the_flat_list_is_every_function_relocated(program: tuple[Path, Path, Path], tmp_path: Path) -> None:
    symbols = load(program, tmp_path)
    modules: list[ModuleSymbols] = list(symbols.indexes)
    expected = [
        (m.path, f.address + m.slide if f.address else 0, f) for m in modules for f in m.index.functions
    ]
    assert [(f.module, f.runtime_address, f.info) for f in symbols.functions] == expected
