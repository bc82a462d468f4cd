"""The fast paths of the index: scanning in several processes, the packed cache, bulk demangling, and the
FunctionIndex helpers that avoid building every FunctionInfo. Each must give what the plain path gives."""

from __future__ import annotations

import itertools
import logging
import pickle
import re
import sqlite3
import subprocess
from pathlib import Path

import pytest

from strobe.symbols import FunctionIndex, build_index, cache, dwarf_worker, load_index
from strobe.symbols.demangle import demangle, demangle_cxx_names, split_cxx, split_cxx_many
from strobe.symbols.dwarf_scan import scan_dwarf
from strobe.symbols.elf import open_elf, read_dwarf_sections
from tests.symbols.conftest import PROGRAMS, Programs
from tests.symbols.test_generated import generate


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ~2,000-function program of test_generated, split over three units so it can be scanned in parts."""
    root = tmp_path_factory.mktemp("generated-parts")
    source = root / "generated.cpp"
    source.write_text(generate())
    extra = root / "extra.cpp"
    extra.write_text("namespace more { int one(int a) { return a + 1; } struct S { int m(int) const; };\n"
                     "int S::m(int x) const { return x * 2; } }\n")
    third = root / "third.cpp"
    third.write_text("static inline int twice(int x) { return 2 * x; }\nint use_twice(int x) { return twice(x); }\n")
    binary = root / "generated"
    subprocess.run(["g++", "-g", "-O0", "-o", str(binary), str(source), str(extra), str(third)], check=True)
    return binary


def functions(index: FunctionIndex) -> list[tuple[object, ...]]:
    return [(f.name, f.raw, f.signature, f.address, f.size, f.file, f.line, f.inlined_only, f.params)
            for f in index.functions]


def parallel(monkeypatch: pytest.MonkeyPatch, workers: int = 2) -> list[object]:
    """Scan in `workers` processes whatever the size; returns the list of workers started (filled later)."""
    monkeypatch.setattr(dwarf_worker, "WORKERS", workers)
    monkeypatch.setattr(dwarf_worker, "MIN_PARALLEL_BYTES", 0)
    monkeypatch.setattr(dwarf_worker, "might_cross_units", lambda abbrev: False)
    started: list[object] = []
    real = dwarf_worker._start

    def spy(*args: object) -> object:
        worker = real(*args)  # type: ignore[arg-type]
        started.append(worker)
        return worker

    monkeypatch.setattr(dwarf_worker, "_start", spy)
    return started


# --- several processes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [2, 3])
def test_parallel_scan_gives_the_single_process_index(
    generated: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    monkeypatch.setattr(dwarf_worker, "WORKERS", 1)
    alone = build_index(generated)
    started = parallel(monkeypatch, workers)
    assert functions(build_index(generated)) == functions(alone)
    assert len(started) == workers - 1 and len(alone.functions) > 2000


@pytest.mark.parametrize("variant", ["cxx", "cxx-O2", "c-O2", "rust-v0"])
def test_parallel_scan_of_the_test_programs(programs: Programs, monkeypatch: pytest.MonkeyPatch, variant: str) -> None:
    binary = programs.build(variant)
    alone = build_index(binary)
    started = parallel(monkeypatch)
    assert functions(build_index(binary)) == functions(alone)
    assert started


def test_references_across_units_fall_back_to_one_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """LTO output refers to abstract instances in other units: parts cannot be resolved alone."""
    binary = tmp_path / "lto"
    sources = [str(PROGRAMS / name) for name in ("cxxprog.cpp", "cxxprog_b.cpp")]
    subprocess.run(["g++", "-g", "-O2", "-flto", "-o", str(binary), *sources], check=True)
    alone = build_index(binary)
    parallel(monkeypatch)
    with caplog.at_level(logging.INFO, logger="strobe.symbols.dwarf_worker"):
        assert functions(build_index(binary)) == functions(alone)
    assert "refer across units" in caplog.text


def test_a_failing_worker_is_replaced_by_this_process(
    generated: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    alone = build_index(generated)
    parallel(monkeypatch)
    monkeypatch.setattr(dwarf_worker.sys, "executable", "/bin/false")
    with caplog.at_level(logging.WARNING):
        assert functions(build_index(generated)) == functions(alone)
    assert "symbol worker failed" in caplog.text


def test_split_keeps_whole_units_and_covers_them_all(generated: Path) -> None:
    from strobe.symbols.dwarf_scan import list_units

    with open_elf(generated) as elf:
        units, _ = list_units(read_dwarf_sections(elf))
    for parts in (2, 3, 4):
        spans = dwarf_worker.split(units, parts)
        starts = {unit.offset for unit in units}
        assert spans[0][0] == units[0].offset and spans[-1][1] == units[-1].end
        assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
        assert all(start in starts for start, _ in spans)


# --- the packed cache ----------------------------------------------------------------------------------


def test_cached_index_equals_the_built_one(generated: Path, tmp_path: Path) -> None:
    built = load_index(generated, tmp_path)
    cached = load_index(generated, tmp_path)
    assert "functions" not in cached.__dict__  # nothing materialised by loading
    assert cached.names == built.names
    assert functions(cached) == functions(built) and cached == built and hash(cached) == hash(built)


def test_payload_round_trip_and_lazy_strings(programs: Programs) -> None:
    index = build_index(programs.build("cxx"))
    table = cache.decode(cache.encode(index.table))
    assert isinstance(table._raws, cache.PackedStrings) and isinstance(table._signatures, cache.PackedStrings)
    assert isinstance(table._names, list)  # pattern matching reads them all: decoded on loading
    assert FunctionIndex(index.elf, table) == index
    assert not isinstance(table._raws, cache.PackedStrings)


def test_at_decodes_only_the_blocks_it_reads(generated: Path, tmp_path: Path) -> None:
    built = build_index(generated)
    load_index(generated, tmp_path)
    index = load_index(generated, tmp_path)
    raws, signatures = index.table._raws, index.table._signatures
    assert isinstance(raws, cache.PackedStrings) and isinstance(signatures, cache.PackedStrings)
    last = len(index) - 1
    assert last > 3 * cache.BLOCK
    positions = [last, 0, cache.BLOCK - 1, cache.BLOCK, 5]
    assert index.at(positions) == [built.functions[i] for i in positions]
    assert index.function(-1) == built.functions[-1]
    assert sorted(raws._decoded) == sorted(signatures._decoded) == [0, 1, last // cache.BLOCK]
    assert index.table._raws is raws and "functions" not in index.__dict__
    again = pickle.loads(pickle.dumps(index))  # still packed, and the same functions
    assert isinstance(again.table._raws, cache.PackedStrings) and again == built


@pytest.mark.parametrize("count", [0, 1, cache.BLOCK - 1, cache.BLOCK, cache.BLOCK + 1, 3 * cache.BLOCK + 7])
def test_packed_strings_read_like_the_list(count: int) -> None:
    values = [f"ns{i % 7}::f{i}(é, {'x' * (i % 5)})" if i % 11 else ("" if i % 2 else "bad\udcffbyte")
              for i in range(count)]
    packed = cache.PackedStrings.pack(values)
    assert len(packed) == count and packed.strings() == values
    picks = [i for i in (0, count // 2, count - 1, -1, -count, cache.BLOCK) if count and -count <= i < count]
    assert packed.pick(picks) == [values[i] for i in picks]
    assert pickle.loads(pickle.dumps(packed)).strings() == values
    with pytest.raises(IndexError):
        packed.pick([count])
    with pytest.raises(ValueError):
        cache.PackedStrings(packed.data, packed.bounds[:-1], count)


def test_integer_columns_round_trip_at_any_width() -> None:
    """Columns are stored narrowed (addresses as differences, unknown lines marked): any value comes back."""
    rows: list[cache.Row] = [
        ("a", "a", "a", 2**64 - 1, 2**63 - 1, "/f", None, False, 0),
        ("b", "b", "b", 0, -5, None, 2**63 - 1, True, 300),
        ("c", "c", "c", 0x401000, 0, "/g", 0, False, -1),
        ("d", "d", "d", 17, 1, "/f", 65535, False, 2**31),
        ("e", "e", "e", 17, 2, "/h", -3, False, 7),
    ]
    for chosen in (rows, rows[2:4], rows[2:], rows[:1], rows[1:2], []):
        for ordered in (False, True):
            table = cache.FunctionTable.from_rows(sorted(chosen, key=lambda row: row[3]) if ordered else chosen,
                                                  sorted_by_address=ordered)
            assert list(cache.decode(cache.encode(table)).rows()) == list(table.rows())


def test_a_name_with_nul_is_not_cached(
    programs: Programs, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rows = list(build_index(programs.build("c")).table.rows())
    rows[0] = ("odd\0name", *rows[0][1:])
    with caplog.at_level(logging.WARNING):
        cache.store(tmp_path, "key", cache.FunctionTable.from_rows(rows))
    assert "not cached" in caplog.text and cache.fetch(tmp_path, "key") is None


@pytest.mark.parametrize("damage", ["flip", "truncate", "magic"])
def test_damaged_payload_is_a_miss(programs: Programs, tmp_path: Path, damage: str) -> None:
    binary = programs.build("cxx")
    expected = load_index(binary, tmp_path)
    with sqlite3.connect(tmp_path / cache.DB_NAME) as db:
        [(payload,)] = db.execute("SELECT payload FROM function_indexes").fetchall()
        data = bytearray(payload)
        if damage == "flip":
            data[-10] ^= 0xFF
        elif damage == "truncate":
            del data[len(data) // 2 :]
        else:
            data[:4] = b"JUNK"
        db.execute("UPDATE function_indexes SET payload = ?", (bytes(data),))
    db.close()
    assert cache.fetch(tmp_path, cache.cache_key(expected.elf.build_id, binary)) is None
    assert load_index(binary, tmp_path) == expected


def test_out_of_range_numbers_survive_the_cache(programs: Programs, tmp_path: Path) -> None:
    """Sizes from malformed DWARF can exceed int64: such a column is kept as a list, in memory and cache."""
    index = build_index(programs.build("c"))
    rows = [(f.name, f.raw, f.signature, f.address, f.size, f.file, f.line, f.inlined_only, f.params)
            for f in index.functions]
    rows[0] = (*rows[0][:4], 2**64 - 1, *rows[0][5:])
    odd = FunctionIndex(index.elf, cache.FunctionTable.from_rows(rows))
    assert isinstance(odd.table.sizes, list)
    assert FunctionIndex(index.elf, cache.decode(cache.encode(odd.table))) == odd


# --- FunctionIndex helpers -----------------------------------------------------------------------------


def test_match_is_the_filter_callers_write(generated: Path) -> None:
    index = build_index(generated)
    for pattern in (r"gen3::inner::Worker::step1\d?", r".*::hidden2", r"nothing", r"(?:.*::)?use_twice"):
        regex = re.compile(pattern, re.DOTALL)
        fresh = build_index(generated)
        expected = [f for f in index.functions if regex.fullmatch(f.name)]
        assert fresh.match(regex) == expected == index.match(pattern)
        assert fresh.matching(regex) == [i for i, f in enumerate(index.functions) if regex.fullmatch(f.name)]
        assert "functions" not in fresh.__dict__


def test_in_files_is_the_filter_callers_write(programs: Programs, tmp_path: Path) -> None:
    binary = programs.build("c")
    built = build_index(binary)
    load_index(binary, tmp_path)
    index = load_index(binary, tmp_path)
    for predicate in (lambda file: file is not None and "cprog_util" in file, lambda file: file is None):
        assert index.in_files(predicate) == [f for f in built.functions if predicate(f.file)]
    assert index.matching_files(lambda file: False) == []
    assert "functions" not in index.__dict__


def test_names_function_and_by_address_without_materialising(generated: Path, tmp_path: Path) -> None:
    built = build_index(generated)
    load_index(generated, tmp_path)
    index = load_index(generated, tmp_path)
    assert list(index.names) == [f.name for f in built.functions]
    assert index.function(5) == built.functions[5] and index.function(-1) == built.functions[-1]
    for function in built.functions[::97]:
        if not function.inlined_only:
            assert index.by_address(function.address) == built.by_address(function.address)
    assert index.by_address(0) is None and index.by_address(2**64 + 5) is None and index.by_address(-1) is None
    assert "functions" not in index.__dict__
    with pytest.raises(IndexError):
        index.function(len(built.functions))


def test_from_functions_and_pickling(programs: Programs) -> None:
    index = build_index(programs.build("cxx"))
    again = FunctionIndex.from_functions(index.elf, index.functions)
    assert FunctionIndex(index.elf, index.functions) == again  # type: ignore[arg-type]  # the old constructor
    assert again == index and again.by_address(index.functions[-1].address) == index.by_address(
        index.functions[-1].address
    )
    assert pickle.loads(pickle.dumps(index)) == index
    assert "functions=<" in repr(index)


# --- demangling in bulk --------------------------------------------------------------------------------


def test_bulk_demangling_equals_one_at_a_time(programs: Programs) -> None:
    with open_elf(programs.build("cxx-O2")) as elf:
        raws = [f.linkage for f in scan_dwarf(read_dwarf_sections(elf)) if f.linkage]
    raws += ["_ZN1aC2Ev@@VER_1", "main", "_Zgarbage", "", "_ZN4core3fmt5write17h0123456789abcdefE"]
    names, signatures = demangle_cxx_names(raws)
    assert list(zip(names, signatures, strict=True)) == [tuple(demangle(raw, rust=False)) for raw in raws]


@pytest.mark.parametrize(
    "text",
    [
        "a::b(int)", "(anonymous namespace)::f(int)", "a::(anonymous namespace)::f<int>(x)", "x::operator()(int)",
        "f(a))", "oper(anonymous namespace)ator(int)", "a(b) [clone .isra.0]", "", "(x)", "a()", "a(b)(c)",
        "A::~A() const &&", "int (*f(int))(double)", "non-virtual thunk to a::b()", "a::b(int)]", "a b(c)",
        "a::f(int)\nb::g(int)", "x" * 5000 + "<", "é::f(ü)", "a\tb(c)", "main::{lambda(int)#1}::operator()(int) const",
    ],
)
def test_bulk_split_equals_split_cxx(text: str) -> None:
    texts = [text, "plain::one(int)", text]
    names, signatures = split_cxx_many(texts)
    assert list(zip(names, signatures, strict=True)) == [tuple(split_cxx(t)) for t in texts]


def test_worker_results_round_trip() -> None:
    from strobe.symbols.dwarf_names import NamedRows, Part

    rows = NamedRows(["a", None, "", "c"], ["x", None, "y", "z"], ["s\0t", "u", None, "w"], [1, 2, 3, 4],
                     [0, 0, 0, 0], ["/f", None, "/f", "/g"], [1, None, b"odd", 3], [0, 1, 2, 3], ["k", None, "k", ""])
    part = Part(rows, NamedRows([], [], [], [], [], [], [], [], []), False, 2)
    again = dwarf_worker._unpack(pickle.loads(pickle.dumps(dwarf_worker._pack(part))))
    assert again == part
