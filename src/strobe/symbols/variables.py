"""Global and static variables of one binary by name, their types, and its functions' signatures.

    index = variable_index("/path/to/app")          # shared per binary (path, size, mtime)
    var = index.lookup("gClock")                     # exact qualified name, else a unique last part
    index.layout(var, depth=2)                       # ValueLayout of its type
    index.signature(0x1139, depth=1)                 # parameters and return type of the function there

Nothing is read until first use: the first lookup scans .debug_info for variables (dwarf_vars: one pass,
type subtrees skipped); types are read on demand, DIE by DIE (dwarf_dies, dwarf_types). Names:
"gTempo", "audio::Clock::instances", "main::count" (a function-local static), "vars_rs::engine::LEVEL".
A name is found exactly, else by its last "::" parts when that is unique ("instances", "Clock::instances",
"count"); two file statics with one name are told apart by their file: "util.c::counter".
"""

from __future__ import annotations

import difflib
import os
import re
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from strobe.errors import NoDebugSymbols, ValidationError
from strobe.symbols import debug_files
from strobe.symbols.dwarf_dies import AT_ABSTRACT_ORIGIN, AT_SPECIFICATION, AT_TYPE, Die, DieReader
from strobe.symbols.dwarf_types import TypeRef, TypeTable
from strobe.symbols.dwarf_unit import DwarfSections
from strobe.symbols.dwarf_vars import ScannedVariable, scan_variables
from strobe.symbols.elf import SECTION_ERRORS, ElfInfo, elf_info, read_dwarf_sections
from strobe.symbols.signatures import FunctionSignature, SignatureReader
from strobe.symbols.types import ValueLayout

_FILE_QUALIFIED = re.compile(r"^([^:\s]+\.[A-Za-z0-9+]+)::(.+)$")


@dataclass(frozen=True, slots=True)
class Variable:
    name: str  # qualified
    address: int | None  # static (unrelocated) address; None for a thread-local
    die: int  # .debug_info offset of the defining DIE
    unit: int  # .debug_info offset of its compile unit
    external: bool  # False: a file or function-local static
    file: str  # the compile unit's source file ("" if unknown)

    @property
    def thread_local(self) -> bool:
        return self.address is None

    def describe(self) -> str:
        where = f"static in {os.path.basename(self.file)}" if not self.external and self.file else "global"
        at = f"0x{self.address:x}" if self.address is not None else "thread-local"
        return f"{self.name} ({where}, {at})"


class VariableNotFound(ValidationError):
    def __init__(self, name: str, binary: str, close: Sequence[str]) -> None:
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        super().__init__(
            f"Variable '{name}' not found in the debug symbols of {os.path.basename(binary)}.{hint} Only globals "
            "and statics (file, function-local, namespace and class static members) have a fixed address; for a "
            "local or an argument, trace its function with debug_trace and look at the arguments. A known address "
            "can be read with debug_read({ address: '0x...', size, type })."
        )
        self.candidates = list(close)


class AmbiguousVariable(ValidationError):
    def __init__(self, name: str, matches: Sequence[Variable]) -> None:
        listed = "; ".join(v.describe() for v in matches[:10])
        more = f" and {len(matches) - 10} more" if len(matches) > 10 else ""
        names = [v.name for v in matches]
        if len(set(names)) == len(names):
            advice = f"Use a qualified name, e.g. '{names[0]}'."
        else:
            first = next((v for v in matches if v.file), matches[0])
            advice = (f"Use a qualified name, or put the file first for file statics, e.g. "
                      f"'{os.path.basename(first.file)}::{first.name}'.")
        super().__init__(f"'{name}' matches {len(matches)} variables: {listed}{more}. {advice}")
        self.candidates = names


class VariableIndex:
    """Variables, types and signatures of one ELF binary, read lazily and thread-safely."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.scan_seconds: float | None = None  # how long the variable scan took, once done
        self.lock = threading.RLock()
        self._elf: ElfInfo | None = None
        self._sections: DwarfSections | None = None
        self._reader: DieReader | None = None
        self._types: TypeTable | None = None
        self._signatures: SignatureReader | None = None
        self._variables: tuple[Variable, ...] | None = None
        self._by_name: dict[str, list[Variable]] = {}
        self._by_last: dict[str, list[Variable]] = {}
        self._struct_types: dict[str, int] = {}

    # --- loading ---------------------------------------------------------------------------------
    def _load(self) -> DieReader:
        with self.lock:
            if self._reader is None:
                found = debug_files.locate(self.path)
                with debug_files.open_dwarf_elf(self.path, found) as (elf, dwarf_elf):
                    self._elf = elf_info(elf, self.path)
                    if found.path is None:
                        raise NoDebugSymbols(
                            f"{os.path.basename(self.path)} has no DWARF debug info, so variables and types cannot "
                            "be resolved by name. Rebuild it with -g (Rust: debug = true), install its debug file "
                            "(-dbgsym package) or pass symbolsPath to debug_launch, or read raw memory with "
                            "debug_read({ address: '0x...', size, type })."
                        )
                    if found.separate:
                        self._elf = replace(self._elf, has_dwarf=True, debug_file=found.path)
                    try:
                        self._sections = read_dwarf_sections(dwarf_elf)
                    except SECTION_ERRORS as exc:
                        raise ValidationError(f"Cannot read the DWARF sections of {self.path} ({exc}).") from None
                self._reader = DieReader(self._sections)
                self._types = TypeTable(self._reader)
                self._types.find_definition = self._definition
                self._signatures = SignatureReader(self._reader, self._types)
            return self._reader

    @property
    def elf(self) -> ElfInfo:
        self._load()
        assert self._elf is not None
        return self._elf

    @property
    def types(self) -> TypeTable:
        self._load()
        assert self._types is not None
        return self._types

    @property
    def variables(self) -> tuple[Variable, ...]:
        """Every variable with a static address (or thread-local), scanned on first use."""
        with self.lock:
            if self._variables is None:
                reader = self._load()
                assert self._sections is not None
                started = time.perf_counter()
                scanned, self._struct_types = scan_variables(self._sections, reader)
                self._variables = self._index(scanned, reader)
                self.scan_seconds = time.perf_counter() - started
            return self._variables

    def _index(self, scanned: list[ScannedVariable], reader: DieReader) -> tuple[Variable, ...]:
        files: dict[int, str] = {}
        seen: set[tuple[str, int | None]] = set()
        result: list[Variable] = []
        for item in scanned:
            if (item.name, item.address) in seen:
                continue  # the same definition in several units (inline variables, templates)
            seen.add((item.name, item.address))
            file = files.get(item.unit)
            if file is None:
                unit = reader.unit_at(item.unit)
                file = files[item.unit] = unit.name if unit is not None else ""
            variable = Variable(item.name, item.address, item.die, item.unit, item.external, file)
            result.append(variable)
            self._by_name.setdefault(item.name, []).append(variable)
            self._by_last.setdefault(_last_part(item.name), []).append(variable)
        return tuple(result)

    # --- lookup ----------------------------------------------------------------------------------
    def find(self, name: str) -> list[Variable]:
        """The variables `name` designates: its exact qualified name, else those whose last "::" parts it
        is, else (a "file.c::name" form) those of that file."""
        self.variables  # noqa: B018 - scan if not done
        name = name.strip().removeprefix("::")
        exact = self._by_name.get(name)
        if exact:
            return list(exact)
        last = _last_part(name)
        found = [v for v in self._by_last.get(last, []) if v.name == name or v.name.endswith("::" + name)]
        if found:
            return found
        match = _FILE_QUALIFIED.match(name)
        if match:
            file, rest = match.groups()
            return [v for v in self.find(rest) if os.path.basename(v.file) == file or v.file.endswith("/" + file)]
        return []

    def lookup(self, name: str) -> Variable:
        """The one variable `name` designates; VariableNotFound / AmbiguousVariable otherwise."""
        found = self.find(name)
        if len(found) == 1:
            return found[0]
        if not found:
            raise VariableNotFound(name, self.path, self.close_names(name))
        raise AmbiguousVariable(name, found)

    def close_names(self, name: str, limit: int = 5) -> list[str]:
        """Qualified names resembling `name`: containing it (any case), then by spelling."""
        self.variables  # noqa: B018 - scan if not done
        wanted = _last_part(name.strip()).lower()
        close: list[str] = []
        if wanted:
            close += sorted({v.name for v in self.variables if wanted in _last_part(v.name).lower()})[:limit]
        lasts = {last.lower(): last for last in self._by_last}
        for guess in difflib.get_close_matches(wanted, list(lasts), n=limit, cutoff=0.6):
            close += [v.name for v in self._by_last[lasts[guess]]]
        return list(dict.fromkeys(close))[:limit]

    # --- types -----------------------------------------------------------------------------------
    def type_of(self, variable: Variable) -> TypeRef:
        """The type of a variable: its DW_AT_type, or that of the declaration its definition refers to."""
        reader = self._load()
        with self.lock:
            die = reader.die(variable.die)
            for _ in range(8):
                if AT_TYPE in die.attrs:
                    return TypeRef(die.ref(AT_TYPE))
                target = reader.follow(die, AT_SPECIFICATION) or reader.follow(die, AT_ABSTRACT_ORIGIN)
                if target is None:
                    break
                die = target
            return TypeRef(None)

    def layout(self, variable: Variable | str, depth: int = 1) -> ValueLayout:
        """The layout of a variable's type, structs expanded `depth` levels deep."""
        if isinstance(variable, str):
            variable = self.lookup(variable)
        t = self.type_of(variable)
        with self.lock:
            return self.types.layout(t.die, depth, t.skipped)

    def _definition(self, declaration: Die) -> int | None:
        """A struct/class/union definition with the name of `declaration` (the first one in the file: two
        different types sharing a name in different files are not told apart). Called with the lock held."""
        name = declaration.name
        if name is None:
            return None
        self.variables  # noqa: B018 - the scan collects the definitions
        return self._struct_types.get(name)

    # --- functions -------------------------------------------------------------------------------
    def function_die(self, address: int) -> Die | None:
        """The DIE of the function whose static low_pc is `address`, or None."""
        self._load()
        with self.lock:
            assert self._signatures is not None
            return self._signatures.function_die(address)

    def signature(self, address: int, depth: int = 1) -> FunctionSignature | None:
        """Parameters (with `this`) and return type of the function whose static low_pc is `address`;
        None if DWARF describes no function there. Cached per (address, depth)."""
        self._load()
        with self.lock:
            assert self._signatures is not None
            return self._signatures.signature(address, depth)


def _last_part(name: str) -> str:
    """The last "::" component of a qualified name, not counting "::" inside <…> or (…)."""
    depth = 0
    cut = 0
    i = 0
    while i < len(name):
        c = name[i]
        if c in "<(":
            depth += 1
        elif c in ">)" and depth:
            depth -= 1
        elif c == ":" and depth == 0 and name.startswith("::", i):
            cut = i + 2
            i += 1
        i += 1
    return name[cut:]


_INDEXES: dict[tuple[str, int, int, str | None], VariableIndex] = {}
_INDEXES_LOCK = threading.Lock()


def variable_index(path: str | Path) -> VariableIndex:
    """The shared VariableIndex of a binary (a new one when the file, or the separate debug file found for it,
    changed since)."""
    resolved = os.path.realpath(path)
    key: tuple[str, int, int, str | None]
    try:
        stat = os.stat(resolved)
        found = debug_files.locate(resolved)
        key = (resolved, stat.st_size, stat.st_mtime_ns, found.identity or found.how)
    except (OSError, ValidationError):
        key = (resolved, -1, -1, None)
    with _INDEXES_LOCK:
        index = _INDEXES.get(key)
        if index is None:
            for old in [k for k in _INDEXES if k[0] == resolved]:
                del _INDEXES[old]
            index = _INDEXES[key] = VariableIndex(resolved)
        return index
