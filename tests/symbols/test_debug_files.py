"""Separate debug files (symbols/debug_files.py) on binaries built now: gcc -g, objcopy --only-keep-debug, then
strip --strip-debug or --strip-all, with or without --add-gnu-debuglink. The unstripped binary is the oracle: every
reader must see the same DWARF through the stripped one and its debug file. No test looks at /usr/lib/debug: the
global debug directories are temp directories."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from strobe.errors import NoDebugSymbols, ValidationError
from strobe.symbols import debug_files, dwarf_worker
from strobe.symbols.addresses import locate
from strobe.symbols.cfi import cfa_rule
from strobe.symbols.debug_files import locate as locate_debug
from strobe.symbols.elf import open_elf, read_elf_info, read_symbol_table
from strobe.symbols.index import build_index, load_index
from strobe.symbols.variables import variable_index

SOURCE = Path(__file__).parents[1] / "targets" / "debugfile.c"


@dataclass(frozen=True)
class Build:
    full: Path  # with its own DWARF: the oracle
    debug: Path  # objcopy --only-keep-debug of it
    build_id: str


def _run(*command: str | Path) -> None:
    subprocess.run([str(part) for part in command], check=True, capture_output=True)


def _build(directory: Path, *flags: str) -> Build:
    directory.mkdir(parents=True, exist_ok=True)
    full = directory / "full"
    _run("gcc", "-g", "-O0", "-Wl,--build-id", *flags, "-o", full, SOURCE)
    debug = directory / "full.debug"
    _run("objcopy", "--only-keep-debug", full, debug)
    build_id = read_elf_info(full).build_id
    assert build_id
    return Build(full, debug, build_id)


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Build:
    return _build(tmp_path_factory.mktemp("debugfile-build"))


@pytest.fixture(autouse=True)
def global_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temp directory stands for /usr/lib/debug; no symbolsPath is registered from another test."""
    directory = tmp_path / "global-debug"
    directory.mkdir()
    monkeypatch.setattr(debug_files, "_symbols_paths", {})
    previous = debug_files.debug_directories()
    debug_files.set_debug_directories([str(directory)])
    yield directory
    debug_files.set_debug_directories(previous)


def stripped(build: Build, where: Path, name: str = "app", *, strip_all: bool = False, link: bool = True,
             debug_name: str = "app.debug") -> tuple[Path, Path]:
    """A stripped copy of the build at where/name and its debug file (where/debug_name, not yet placed: the
    caller moves it where the test wants it). With `link`, the binary's .gnu_debuglink names debug_name."""
    where.mkdir(parents=True, exist_ok=True)
    binary, debug = where / name, where / debug_name
    shutil.copy(build.debug, debug)
    _run("objcopy", "--strip-all" if strip_all else "--strip-debug", build.full, binary)
    if link:
        _run("objcopy", f"--add-gnu-debuglink={debug}", binary)
    return binary, debug


def function_view(path: Path) -> list[tuple[str, int, int, str | None, int | None, int]]:
    return sorted((f.name, f.address, f.size, f.file, f.line, f.params) for f in build_index(path).functions)


# --- where the debug file is found ---------------------------------------------------------------------------

def test_a_binary_with_its_own_dwarf_is_its_own_debug_file(build: Build) -> None:
    found = locate_debug(build.full)
    assert (found.path, found.how, found.separate) == (str(build.full), "own", False)


@pytest.mark.parametrize("strip_all", [False, True], ids=["strip-debug", "strip-all"])
def test_debuglink_next_to_the_binary(build: Build, tmp_path: Path, strip_all: bool) -> None:
    binary, debug = stripped(build, tmp_path / "bin", strip_all=strip_all)
    assert not read_elf_info(binary).has_dwarf
    found = locate_debug(binary)
    assert (found.path, found.how) == (str(debug), "debuglink")
    # every function, with its source file and line and parameters, as the unstripped binary has them
    assert function_view(binary) == function_view(build.full)
    index = build_index(binary)
    assert index.elf.has_dwarf and index.elf.debug_file == str(debug)


def test_debuglink_in_the_debug_subdirectory(build: Build, tmp_path: Path) -> None:
    binary, debug = stripped(build, tmp_path / "bin")
    (tmp_path / "bin" / ".debug").mkdir()
    moved = debug.rename(tmp_path / "bin" / ".debug" / debug.name)
    found = locate_debug(binary)
    assert (found.path, found.how) == (str(moved), "debuglink")


def test_debuglink_under_the_global_directory_and_the_binary_path(build: Build, tmp_path: Path,
                                                                   global_dir: Path) -> None:
    binary, debug = stripped(build, tmp_path / "bin")
    place = global_dir / str(binary.parent).lstrip("/")
    place.mkdir(parents=True)
    moved = debug.rename(place / debug.name)
    found = locate_debug(binary)
    assert (found.path, found.how) == (str(moved), "debuglink")
    assert str(global_dir) in found.searched[0]  # the build-id path is looked at first


def test_build_id_layout_under_the_global_directory(build: Build, tmp_path: Path, global_dir: Path) -> None:
    binary, debug = stripped(build, tmp_path / "bin", strip_all=True, link=False)
    place = global_dir / ".build-id" / build.build_id[:2]
    place.mkdir(parents=True)
    moved = debug.rename(place / f"{build.build_id[2:]}.debug")
    found = locate_debug(binary)
    assert (found.path, found.how) == (str(moved), "build-id")
    assert function_view(binary) == function_view(build.full)


def test_a_debug_file_of_another_content_is_refused_by_its_crc(build: Build, tmp_path: Path) -> None:
    binary, debug = stripped(build, tmp_path / "bin")
    with debug.open("ab") as stream:  # still ELF, same build id, but not the file the link's CRC32 was taken of
        stream.write(b"\0" * 16)
    found = locate_debug(binary)
    assert found.path is None and found.how == "none"
    assert any("CRC32" in why and str(debug) in why for why in found.refused), found.refused
    assert not build_index(binary).elf.has_dwarf


def test_a_debug_file_of_another_build_is_refused_by_its_build_id(tmp_path: Path, build: Build,
                                                                  global_dir: Path) -> None:
    other = _build(tmp_path / "other", "-O1")  # the same program built differently: another build id
    assert other.build_id != build.build_id
    binary, _ = stripped(build, tmp_path / "bin", link=False)
    place = global_dir / ".build-id" / build.build_id[:2]
    place.mkdir(parents=True)
    shutil.copy(other.debug, place / f"{build.build_id[2:]}.debug")
    found = locate_debug(binary)
    assert found.path is None
    assert any("build id" in why for why in found.refused), found.refused


def test_nothing_found_says_where_it_looked_and_what_to_do(build: Build, tmp_path: Path, global_dir: Path) -> None:
    binary, debug = stripped(build, tmp_path / "bin")
    debug.unlink()
    found = locate_debug(binary)
    assert found.path is None
    reason = found.reason or ""
    assert str(global_dir / ".build-id" / build.build_id[:2]) in reason
    assert str(tmp_path / "bin" / ".debug" / "app.debug") in reason
    assert "-dbgsym" in reason and "symbolsPath" in reason
    with pytest.raises(NoDebugSymbols):
        variable_index(binary).lookup("g_level")


# --- symbolsPath ---------------------------------------------------------------------------------------------

def test_symbols_path_names_the_debug_file(build: Build, tmp_path: Path) -> None:
    binary, debug = stripped(build, tmp_path / "bin", link=False)
    elsewhere = tmp_path / "mine" / "anything.dbg"
    elsewhere.parent.mkdir()
    debug.rename(elsewhere)
    assert locate_debug(binary).path is None
    found = debug_files.use_symbols_path(binary, elsewhere)
    assert (found.path, found.how) == (str(elsewhere), "symbolsPath")
    assert locate_debug(binary).path == str(elsewhere)  # remembered for every reader


@pytest.mark.parametrize("layout", ["build-id", "debuglink name", "debuglink name under the binary's path"])
def test_symbols_path_directory(build: Build, tmp_path: Path, layout: str) -> None:
    binary, debug = stripped(build, tmp_path / "bin", link=layout != "build-id")
    mine = tmp_path / "mine"
    place = {"build-id": mine / ".build-id" / build.build_id[:2],
             "debuglink name": mine,
             "debuglink name under the binary's path": mine / str(binary.parent).lstrip("/")}[layout]
    place.mkdir(parents=True)
    moved = debug.rename(place / (f"{build.build_id[2:]}.debug" if layout == "build-id" else debug.name))
    found = debug_files.use_symbols_path(binary, mine)
    assert (found.path, found.how) == (str(moved), "symbolsPath")


def test_bad_symbols_paths_are_refused_with_what_to_give(build: Build, tmp_path: Path) -> None:
    binary, debug = stripped(build, tmp_path / "bin")
    with pytest.raises(ValidationError, match="does not exist"):
        debug_files.use_symbols_path(binary, tmp_path / "nope.debug")
    with pytest.raises(ValidationError, match="absolute"):
        debug_files.use_symbols_path(binary, "relative/app.debug")
    other = _build(tmp_path / "other", "-O1")
    with pytest.raises(ValidationError, match=r"build id .* is not the binary's") as caught:
        debug_files.use_symbols_path(binary, other.debug)
    assert "objcopy --only-keep-debug" in caught.value.message
    with pytest.raises(ValidationError, match=r"no \.debug_info"):
        debug_files.use_symbols_path(binary, binary)  # the stripped binary itself
    assert debug_files.use_symbols_path(binary, tmp_path / "bin").path == str(debug)  # a directory is searched


# --- every reader through the debug file ------------------------------------------------------------------------

@pytest.mark.parametrize("strip_all", [False, True], ids=["strip-debug", "strip-all"])
def test_readers_see_through_the_debug_file_as_through_the_full_binary(build: Build, tmp_path: Path,
                                                                       strip_all: bool) -> None:
    binary, _ = stripped(build, tmp_path / "bin", strip_all=strip_all)
    measure = next(f for f in build_index(build.full).functions if f.name == "measure")
    # variables and types
    full, split = variable_index(build.full), variable_index(binary)
    assert split.lookup("g_level").address == full.lookup("g_level").address
    assert split.lookup("s_total").address == full.lookup("s_total").address
    signature = split.signature(measure.address, depth=1)
    assert signature is not None and [p.name for p in signature.params] == ["box", "scale", "label"]
    assert [p.layout.type_name for p in signature.params] == [
        p.layout.type_name for p in (full.signature(measure.address, depth=1) or signature).params]
    # source lines of code addresses (backtraces, breakpoints)
    for offset in range(0, measure.size, 3):
        assert locate(str(binary), measure.address + offset) == locate(str(build.full), measure.address + offset)
    assert locate(str(binary), measure.address).line == measure.line  # type: ignore[union-attr]
    # call frame information stays the binary's .eh_frame
    assert cfa_rule(str(binary), measure.address + 8) == cfa_rule(str(build.full), measure.address + 8)


def test_strip_all_takes_the_symbol_table_from_the_debug_file(build: Build, tmp_path: Path) -> None:
    binary, debug = stripped(build, tmp_path / "bin", strip_all=True)
    with open_elf(binary) as elf:
        assert elf.get_section_by_name(".symtab") is None
        alone = {read_symbol_table(elf).name(i) for i in range(len(read_symbol_table(elf)))}
        with open_elf(debug) as debug_elf:
            table = read_symbol_table(elf, debug_elf)
            names = {table.name(i) for i in range(len(table))}
    assert "wait_for" not in alone and {"wait_for", "measure", "crash_here", "main"} <= names


def test_the_cached_index_is_rebuilt_once_the_debug_file_appears(build: Build, tmp_path: Path) -> None:
    binary, debug = stripped(build, tmp_path / "bin")
    hidden = debug.rename(tmp_path / "hidden.debug")
    cache_dir = tmp_path / "cache"
    before = load_index(binary, cache_dir)
    assert not before.elf.has_dwarf and all(f.file is None for f in before.functions)
    with pytest.raises(NoDebugSymbols):
        variable_index(binary).lookup("g_level")
    hidden.rename(debug)
    after = load_index(binary, cache_dir)
    assert after.elf.has_dwarf and after.elf.debug_file == str(debug)
    assert sorted((f.name, f.file, f.line) for f in after.functions) == sorted(
        (f.name, f.file, f.line) for f in build_index(build.full).functions)
    assert variable_index(binary).lookup("g_level").address == variable_index(build.full).lookup("g_level").address
    assert load_index(binary, cache_dir).elf.debug_file == str(debug)  # and that one is cached apart


def test_worker_processes_scan_the_debug_file_with_the_binary_s_symbols(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    programs = Path(__file__).parent / "programs"
    full = tmp_path / "multi"
    _run("gcc", "-g", "-O0", "-Wl,--build-id", "-I", programs, "-o", full, programs / "cprog_main.c",
         programs / "cprog_util.c")
    debug = tmp_path / "multi.debug"
    _run("objcopy", "--only-keep-debug", full, debug)
    binary = tmp_path / "multi.stripped"
    _run("strip", "--strip-all", "-o", binary, full)
    _run("objcopy", f"--add-gnu-debuglink={debug}", binary)
    expected = function_view(full)
    started: list[tuple[object, ...]] = []
    real_start = dwarf_worker._start

    def counting(*args: object) -> object:
        started.append(args)
        return real_start(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(dwarf_worker, "WORKERS", 2)
    monkeypatch.setattr(dwarf_worker, "MIN_PARALLEL_BYTES", 0)
    monkeypatch.setattr(dwarf_worker, "_start", counting)
    assert function_view(binary) == expected
    assert started and started[0][0] == str(debug) and started[0][-1] == str(binary)  # a worker ran on it
