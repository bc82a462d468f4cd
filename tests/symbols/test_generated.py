"""A generated C++ program with ~2,000 functions: the scanner must agree with pyelftools on all of them.

No timing assertion here; it doubles as a quick benchmark (`pytest -s` prints the scan rate)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from strobe.symbols import build_index
from strobe.symbols.dwarf_scan import scan_dwarf
from strobe.symbols.elf import open_elf, read_dwarf_sections
from tests.symbols.oracle import oracle_functions

NAMESPACES = 20
PER_NAMESPACE = 25  # free functions, methods and template instances each


def generate() -> str:
    lines = ["#include <cstdio>", ""]
    calls = []
    for n in range(NAMESPACES):
        lines.append(f"namespace gen{n} {{ namespace inner {{")
        lines.append("template <typename T> struct Holder { T v; T get(int k) const { return v + T(k); } };")
        lines.append("class Worker {")
        lines.append("public:")
        lines += [f"    int step{i}(int x) const;" for i in range(PER_NAMESPACE)]
        lines.append("    int base = 1;")
        lines.append("};")
        for i in range(PER_NAMESPACE):
            lines.append(f"int Worker::step{i}(int x) const {{ return x * {i} + base; }}")
            lines.append(f"int free{i}(int a, int b) {{ return a - b + {i}; }}")
            lines.append(f"static int hidden{i}(int a) {{ return a ^ {i}; }}")
            lines.append(f"struct Tag{i} {{}};")
            lines.append(f"int use{i}(int a) {{ return Holder<int>{{a}}.get({i}) + hidden{i}(a) + "
                         f"static_cast<int>(Holder<double>{{{i}.5}}.get(a)); }}")
            calls.append(f"gen{n}::inner::use{i}(argc) + gen{n}::inner::free{i}(argc, 1) + w{n}.step{i}(argc)")
        lines.append("}}")
    lines.append("int main(int argc, char **) {")
    lines += [f"    gen{n}::inner::Worker w{n};" for n in range(NAMESPACES)]
    lines.append("    long total = 0;")
    lines += [f"    total += {call};" for call in calls]
    lines.append('    std::printf("%ld\\n", total);')
    lines.append("    return 0;")
    lines.append("}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("generated")
    source = root / "generated.cpp"
    source.write_text(generate())
    binary = root / "generated"
    subprocess.run(["g++", "-g", "-O0", "-o", str(binary), str(source)], check=True)
    return binary


def test_generated_program_matches_pyelftools(generated: Path) -> None:
    started = time.perf_counter()
    with open_elf(generated) as elf:
        functions = scan_dwarf(read_dwarf_sections(elf))
    elapsed = time.perf_counter() - started
    print(f"\nscanned {len(functions)} functions in {elapsed * 1000:.1f} ms ({len(functions) / elapsed:,.0f}/s)")
    assert len(functions) >= NAMESPACES * PER_NAMESPACE * 4
    expected = oracle_functions(generated)
    got = {(f.linkage, f.qualified, f.address, f.file, f.line, f.params, f.inlined_only) for f in functions}
    assert got == expected


def test_generated_program_names(generated: Path) -> None:
    index = build_index(generated)
    names = {f.name for f in index.functions}
    for n in (0, NAMESPACES - 1):
        for i in (0, PER_NAMESPACE - 1):
            assert {
                f"gen{n}::inner::Worker::step{i}", f"gen{n}::inner::free{i}", f"gen{n}::inner::hidden{i}",
                f"gen{n}::inner::use{i}",
            } <= names
        assert {f"gen{n}::inner::Holder<int>::get", f"gen{n}::inner::Holder<double>::get"} <= names
