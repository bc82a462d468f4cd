"""The variable index: names and static addresses of globals and statics (C, C++, Rust; PIE and not), lookup
rules and their errors, and function signatures.

Programs (tests/symbols/programs/vars_*) are compiled at test time into the session's symbol-programs dir.
Addresses are checked against the ELF symbol table; values (test_variables_decode.py) against the bytes of
the file, read the way a process sees its image, so nothing is run.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from elftools.elf.elffile import ELFFile

from strobe.errors import NoDebugSymbols
from strobe.symbols import build_index
from strobe.symbols.demangle import demangle
from strobe.symbols.expressions import ReadRecipe, resolve_expression
from strobe.symbols.types import string_offsets
from strobe.symbols.variables import AmbiguousVariable, VariableIndex, VariableNotFound, variable_index
from tests.symbols.conftest import PROGRAMS, Programs

C_SOURCES = ("vars_main.c", "vars_other.c")
VARIANTS: dict[str, list[str]] = {
    "c": ["gcc", "-g", "-O0"],
    "c-nopie": ["gcc", "-g", "-O0", "-no-pie"],
    "c-dwarf4": ["gcc", "-gdwarf-4", "-O0"],
    "c-nodebug": ["gcc", "-O0"],
    "cxx": ["g++", "-g", "-O0"],
    "cxx-dwarf4": ["g++", "-gdwarf-4", "-O0"],
    "cxx-nopie": ["g++", "-g", "-O0", "-no-pie"],
    "rust": ["rustc", "-g", "-C", "opt-level=0"],
    "rust-dwarf5": ["rustc", "-g", "-C", "opt-level=0", "-C", "dwarf-version=5"],  # DW_OP_addrx, strx, rnglistx
}
_built: dict[tuple[Path, str], Path] = {}
_lock = threading.Lock()


def build(root: Path, variant: str) -> Path:
    """Compile the vars_* program of `variant` into `root` once per session."""
    with _lock:
        key = (root, variant)
        if key not in _built:
            _built[key] = _compile(root, variant)
        return _built[key]


def _compile(root: Path, variant: str) -> Path:
    cmd = VARIANTS[variant]
    out = root / f"vars-{variant}"
    if cmd[0] == "rustc":
        if shutil.which("rustc") is None:
            pytest.skip("rustc is not installed")
        sources = [str(PROGRAMS / "vars_rs.rs")]
        cmd = [*cmd, "--crate-name", "vars_rs"]
    elif cmd[0] == "g++":
        sources = [str(PROGRAMS / "vars_cxx.cpp")]
    else:
        sources = [str(PROGRAMS / name) for name in C_SOURCES]
    done = subprocess.run([*cmd, "-o", str(out), *sources], cwd=root, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return out


class ElfImage:
    """The bytes of an ELF file as its process would see them at load (PT_LOAD segments, .bss as zeros)."""

    def __init__(self, path: Path) -> None:
        with path.open("rb") as stream:
            elf = ELFFile(stream)
            self.segments = [(s["p_vaddr"], s["p_memsz"], s.data()) for s in elf.iter_segments("PT_LOAD")]
            self.image_base = min(vaddr for vaddr, _, _ in self.segments) & ~0xFFF

    def read(self, address: int, size: int) -> bytes:
        for vaddr, memsz, data in self.segments:
            if vaddr <= address < vaddr + memsz:
                start = address - vaddr
                chunk = data[start : start + size]
                return chunk + bytes(min(size, memsz - start) - len(chunk))
        raise AssertionError(f"0x{address:x} is not in a loaded segment")

    def pointer(self, address: int) -> int:
        return int.from_bytes(self.read(address, 8), "little")

    def c_string(self, address: int) -> str:
        raw = self.read(address, 1024)
        return raw[: raw.index(0) if 0 in raw else len(raw)].decode()


def execute(recipe: ReadRecipe, image: ElfImage) -> Any:
    """Do what the agent does with a recipe (follow the pointers, read, read C strings) on the file image."""
    address = recipe.address
    for deref in recipe.derefs:
        address = image.pointer(address + deref.offset)
        assert address, f"Null pointer at {deref.label}"
    address += recipe.offset
    data = image.read(address, recipe.size)
    strings = {}
    if recipe.bit_size is None:
        for at in string_offsets(recipe.layout):
            target = int.from_bytes(data[at : at + 8], "little")
            if target:
                strings[target] = image.c_string(target)
    return recipe.decode(data, strings)


def symbols(path: Path) -> dict[str, set[int]]:
    """Defined data symbols of .symtab by name (demangled; `name.N` for gcc's function statics kept too)."""
    found: dict[str, set[int]] = {}
    with path.open("rb") as stream:
        table: Any = ELFFile(stream).get_section_by_name(".symtab")
        assert table is not None
        for symbol in table.iter_symbols():
            if symbol["st_info"]["type"] in ("STT_OBJECT", "STT_TLS") and symbol["st_shndx"] != "SHN_UNDEF":
                found.setdefault(demangle(symbol.name).name, set()).add(symbol["st_value"])
    return found


@pytest.fixture(scope="module")
def c_index(programs: Programs) -> VariableIndex:
    return VariableIndex(build(programs.root, "c"))


C_GLOBALS = ["gInt", "gUint", "gDouble", "gFloat", "gBool", "gChar", "gWide", "gName", "gLabel", "gInts", "gGrid",
             "gOpaque", "gBig", "gColor", "gOddColor", "gPoints", "gMidi", "gMidiPtr", "gWord", "gFlags", "gHead",
             "gLink1", "gRoot", "gHolder", "gEngineStorage", "gEnginePtr"]


@pytest.mark.parametrize("variant", ["c", "c-nopie", "c-dwarf4"])
def test_c_globals_are_at_their_symbol_addresses(programs: Programs, variant: str) -> None:
    path = build(programs.root, variant)
    index = VariableIndex(path)
    table = symbols(path)
    for name in C_GLOBALS:
        variable = index.lookup(name)
        assert (variable.name, variable.external) == (name, True)
        assert {variable.address} == table[name], name
    # File statics and function-local statics (gcc names the latter "calls.0", "calls.1" in .symtab).
    statics = {v.name: v.address for v in index.variables if not v.external}
    assert set(statics) >= {"sFileStatic", "bump_calls::calls", "other_file_value::calls", "main::mainCount"}
    assert {v.address for v in index.find("sFileStatic")} == table["sFileStatic"]
    local = {address for name, addresses in table.items() if name.split(".")[0] in ("calls", "mainCount")
             for address in addresses}
    assert {statics["bump_calls::calls"], statics["other_file_value::calls"], statics["main::mainCount"]} == local


def test_pie_and_non_pie_differ_by_the_image_base(programs: Programs) -> None:
    pie, fixed = VariableIndex(build(programs.root, "c")), VariableIndex(build(programs.root, "c-nopie"))
    assert pie.elf.is_pie and not fixed.elf.is_pie
    assert pie.elf.image_base == 0 and fixed.elf.image_base == 0x400000
    assert fixed.lookup("gInt").address != pie.lookup("gInt").address
    # The caller relocates with slide = module base - image base, whatever the kind of binary.
    for index, base in ((pie, 0x5555_5555_4000), (fixed, 0x400000)):
        recipe = resolve_expression(index, "gInt")
        assert recipe.module == index.path
        address = index.lookup("gInt").address
        assert address is not None
        assert recipe.to_wire(base - index.elf.image_base)["address"] == hex(address - index.elf.image_base + base)


def test_lookup_by_last_part_and_ambiguity(c_index: VariableIndex) -> None:
    assert c_index.lookup("mainCount").name == "main::mainCount"
    assert c_index.lookup("bump_calls::calls").name == "bump_calls::calls"
    with pytest.raises(AmbiguousVariable) as caught:
        c_index.lookup("calls")
    message = caught.value.message
    assert "bump_calls::calls" in message and "other_file_value::calls" in message
    assert "vars_main.c" in message and "vars_other.c" in message
    assert caught.value.code == "VALIDATION_ERROR"


def test_file_statics_are_told_apart_by_file(c_index: VariableIndex) -> None:
    with pytest.raises(AmbiguousVariable) as caught:
        c_index.lookup("sFileStatic")
    assert "'vars_main.c::sFileStatic'" in caught.value.message  # the advice is a name that works
    main, other = c_index.lookup("vars_main.c::sFileStatic"), c_index.lookup("vars_other.c::sFileStatic")
    assert main.address != other.address and not main.external
    assert main.file.endswith("vars_main.c") and other.file.endswith("vars_other.c")


def test_unknown_variable_lists_close_names(c_index: VariableIndex) -> None:
    with pytest.raises(VariableNotFound) as caught:
        c_index.lookup("gMidii")
    assert "gMidi" in caught.value.message and "Did you mean" in caught.value.message
    assert "debug_read" in caught.value.message  # the way out: a raw address
    with pytest.raises(VariableNotFound) as caught:
        c_index.lookup("maincount")
    assert "main::mainCount" in caught.value.candidates


def test_thread_local_is_indexed_without_an_address(c_index: VariableIndex) -> None:
    variable = c_index.lookup("gTls")
    assert variable.thread_local and variable.address is None


def test_no_debug_info_says_how_to_fix_it(programs: Programs) -> None:
    index = VariableIndex(build(programs.root, "c-nodebug"))
    with pytest.raises(NoDebugSymbols) as caught:
        index.lookup("gInt")
    assert "-g" in caught.value.message and caught.value.code == "NO_DEBUG_SYMBOLS"


def test_index_is_built_on_first_use_and_shared(programs: Programs) -> None:
    path = build(programs.root, "c")
    index = VariableIndex(path)
    assert index.scan_seconds is None and index._sections is None  # nothing read yet
    index.lookup("gInt")
    assert index.scan_seconds is not None
    assert variable_index(path) is variable_index(str(path))


@pytest.mark.parametrize("variant", ["cxx", "cxx-dwarf4", "cxx-nopie"])
def test_cxx_qualified_names(programs: Programs, variant: str) -> None:
    path = build(programs.root, variant)
    index = VariableIndex(path)
    table = symbols(path)
    names = {v.name for v in index.variables}
    expected = {"audio::gTempo", "audio::detail::gDepth", "audio::Clock::instances", "audio::Clock::kName",
                "audio::gClock", "audio::gClockPtr", "gDerived", "gDerivedPtr", "(anonymous namespace)::gHidden",
                "sum::sumCalls"}
    assert names >= expected
    for name in expected - {"sum::sumCalls"}:
        assert {index.lookup(name).address} == table[name], name
    # Unique last parts, and partial qualification.
    assert index.lookup("instances").name == "audio::Clock::instances"
    assert index.lookup("Clock::instances").name == "audio::Clock::instances"
    assert index.lookup("gHidden").name == "(anonymous namespace)::gHidden"
    assert index.lookup("detail::gDepth").name == "audio::detail::gDepth"
    assert index.lookup("::audio::gTempo").name == "audio::gTempo"
    assert not index.lookup("gHidden").external and index.lookup("audio::gTempo").external


@pytest.mark.parametrize("variant", ["rust", "rust-dwarf5"])
def test_rust_statics(programs: Programs, variant: str) -> None:
    path = build(programs.root, variant)
    index = VariableIndex(path)
    table = symbols(path)
    for name in ("vars_rs::CONFIG", "vars_rs::MODE", "vars_rs::MAYBE", "vars_rs::GREETING", "vars_rs::engine::LEVEL",
                 "vars_rs::engine::COUNTER"):
        variable = index.lookup(name)
        assert variable.name == name
        assert variable.address in table[name], name
    assert index.lookup("engine::COUNTER").name == "vars_rs::engine::COUNTER"
    assert index.lookup("CONFIG").name == "vars_rs::CONFIG"


# --- signatures ----------------------------------------------------------------------------------
def _address(path: Path, name: str) -> int:
    [function] = build_index(path).match(name)
    return function.address


def test_c_signature(c_index: VariableIndex) -> None:
    path = Path(c_index.path)
    signature = c_index.signature(_address(path, "reset_flags"))
    assert signature is not None and signature.name == "reset_flags"
    assert [(p.name, p.layout.type_name, p.layout.kind) for p in signature.params] == [
        ("flags", "Flags*", "pointer"), ("value", "int", "int")]
    assert signature.returns is None  # void
    flags = signature.params[0].layout.pointee
    assert flags is not None and flags.truncated  # depth 1: the pointer uses it
    deeper = c_index.signature(_address(path, "reset_flags"), depth=2)
    assert deeper is not None and deeper.params[0].layout.pointee is not None
    assert [f.name for f in deeper.params[0].layout.pointee.fields] == ["a", "b", "c", "d", "after"]
    assert c_index.signature(_address(path, "reset_flags")) is signature  # cached
    main = c_index.signature(_address(path, "bump_calls"))
    assert main is not None and main.params == () and main.returns is not None and main.returns.type_name == "int"
    assert c_index.signature(0x1) is None


@pytest.mark.parametrize("variant", ["cxx", "cxx-dwarf4"])
def test_cxx_signatures_with_this_and_references(programs: Programs, variant: str) -> None:
    path = build(programs.root, variant)
    index = VariableIndex(path)
    tick = index.signature(_address(path, "audio::Clock::tick"))
    assert tick is not None and tick.name == "audio::Clock::tick"
    assert [(p.name, p.layout.type_name, p.artificial) for p in tick.params] == [("this", "Clock*", True)]
    assert tick.returns is not None and tick.returns.kind == "int"
    total = index.signature(_address(path, "sum"), depth=2)
    assert total is not None
    assert [(p.name, p.layout.type_name) for p in total.params] == [
        ("d", "Derived&"), ("scale", "int"), ("clock", "Clock*")]
    derived = total.params[0].layout.pointee
    assert derived is not None and [f.name for f in derived.fields] == ["base_field", "base_ratio", "other_tag", "own"]


@pytest.mark.parametrize("variant", ["rust", "rust-dwarf5"])
def test_rust_signature(programs: Programs, variant: str) -> None:
    path = build(programs.root, variant)
    index = VariableIndex(path)
    signature = index.signature(_address(path, "vars_rs::scaled"))
    assert signature is not None
    assert [(p.name, p.layout.kind) for p in signature.params] == [("config", "pointer"), ("factor", "uint")]
    assert signature.params[0].layout.type_name == "&vars_rs::Config"
    assert signature.returns is not None and signature.returns.type_name == "f64"
