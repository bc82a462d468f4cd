"""Where a binary's DWARF is: in the binary itself, or in a separate debug file found the way gdb finds one.

    found = locate("/usr/bin/app")     # DebugFile, cached per version of every file involved
    found.path       # the file whose sections hold the DWARF: the binary, a separate debug file, or None
    found.separate   # a separate file: read DWARF (and .symtab when the binary has none) from it, but code bytes,
                     # .eh_frame and program headers from the binary (its code sections are NOBITS in the debug file)
    found.reason     # when none was found: the places searched and what was refused, and how to fix it

A separate debug file (`objcopy --only-keep-debug`) has the binary's section addresses, so DWARF addresses read
from it are the binary's static addresses. It is looked for in this order (gdb's):
1. the symbolsPath given at launch (`use_symbols_path`): a debug file, or a directory searched like a global debug
   directory (build-id layout, then the debuglink name, alone and under the binary's directory);
2. the build id (NT_GNU_BUILD_ID) in each global debug directory: `<dir>/.build-id/xx/yyyy….debug` (where Debian's
   -dbgsym packages install them);
3. `.gnu_debuglink` (a file name and the CRC32 of that file): next to the binary, in its `.debug/` subdirectory, and
   under each global debug directory followed by the binary's directory.
A candidate is taken only when it has `.debug_info` and is this build's: the same build id when both have one, and
for a debuglink name the CRC32 the link records. The global debug directories are `/usr/lib/debug` unless the
`symbols.debugDirectories` setting says otherwise (`set_debug_directories`, called at each launch).
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from elftools.elf.elffile import ELFFile

from strobe.errors import ValidationError
from strobe.symbols.elf import SECTION_ERRORS, build_id_of, has_dwarf, open_elf
from strobe.symbols.per_file import PerFile

T = TypeVar("T")

DEFAULT_DIRECTORIES = ("/usr/lib/debug",)
_CRC_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class DebugFile:
    """Where the DWARF of `binary` is (see the module docstring)."""

    binary: str
    path: str | None  # the binary itself when it has its own DWARF; a separate file; None when there is none
    how: str  # "own", "symbolsPath", "build-id", "debuglink" or "none"
    searched: tuple[str, ...] = ()  # the candidate paths looked at for a separate file
    refused: tuple[str, ...] = ()  # candidates that exist but are not this build's debug file, and why

    @property
    def separate(self) -> bool:
        return self.path is not None and self.path != self.binary

    @property
    def identity(self) -> str | None:
        """The separate file and its version (for cache keys); None when the DWARF is the binary's or absent."""
        if not self.separate:
            return None
        assert self.path is not None
        try:
            stat = os.stat(self.path)
        except OSError:
            return None
        return f"{self.path}:{stat.st_size}:{stat.st_mtime_ns}"

    @property
    def reason(self) -> str | None:
        """Why no DWARF was found, and what to do (None when some was)."""
        if self.path is not None:
            return None
        name = os.path.basename(self.binary)
        looked = (", ".join(self.searched) if self.searched
                  else "nowhere: it has neither a build id nor a .gnu_debuglink")
        refused = f" Refused: {'; '.join(self.refused)}." if self.refused else ""
        return (f"{name} has no DWARF debug info and no separate debug file was found (looked in: {looked}).{refused} "
                "Install its debug symbols (Debian/Ubuntu: its -dbgsym or -dbg package), pass symbolsPath to "
                "debug_launch (the debug file, or a directory holding <build-id>.debug files or the file named by its "
                ".gnu_debuglink), or rebuild it with -g.")


@dataclass(frozen=True, slots=True)
class _Facts:
    """What the search needs from one ELF file."""

    build_id: str | None
    debuglink: tuple[str, int] | None  # (file name, CRC32)
    has_dwarf: bool


# --- configuration -------------------------------------------------------------------------------------------

_config_lock = threading.Lock()
_directories: tuple[str, ...] = DEFAULT_DIRECTORIES
_symbols_paths: dict[str, tuple[str, ...]] = {}  # binary's real path -> the symbolsPath given for it


def set_debug_directories(directories: Sequence[str]) -> None:
    """The global debug directories searched by build id and debuglink (the symbols.debugDirectories setting)."""
    global _directories
    with _config_lock:
        _directories = tuple(directories)


def debug_directories() -> tuple[str, ...]:
    return _directories


def use_symbols_path(binary: str | Path, symbols_path: str | Path) -> DebugFile:
    """Search `symbols_path` first for `binary`'s debug file from now on (debug_launch's symbolsPath), and return
    what is found. Raises ValidationError, saying what to give instead, for a path that does not exist, or a file
    that is not this build's debug file; a directory without it is not an error (the answer says so)."""
    path = Path(symbols_path).expanduser()
    if not path.is_absolute():
        raise ValidationError(f"symbolsPath '{symbols_path}' must be an absolute path (the debug file or a directory "
                              "of debug files).")
    if not path.exists():
        raise ValidationError(f"symbolsPath {path} does not exist. Give the separate debug file of the program "
                              "(made by objcopy --only-keep-debug, or installed by its -dbgsym package under "
                              "/usr/lib/debug), or a directory holding it.")
    if not path.is_dir():
        binary_facts = _facts(str(binary))
        why = _mismatch(str(path), binary_facts, expected_crc=None)
        if why is not None:
            raise ValidationError(f"symbolsPath {path} is not usable for {os.path.basename(str(binary))}: {why}. "
                                  "Give the debug file made from this very build of the program (objcopy "
                                  "--only-keep-debug), or a directory holding it.")
    with _config_lock:
        _symbols_paths[os.path.realpath(binary)] = (str(path),)
    return locate(binary)


# --- the search ----------------------------------------------------------------------------------------------

def locate(binary: str | Path, extra: Sequence[str] = (), directories: Sequence[str] | None = None) -> DebugFile:
    """The file holding `binary`'s DWARF. `extra`: symbolsPath-like entries searched first (added to the one given
    at launch); `directories`: the global debug directories (default: the configured ones). Raises
    ValidationError when `binary` itself cannot be read as ELF."""
    real = os.path.realpath(binary)
    facts = _facts(real)
    if facts.has_dwarf:
        return DebugFile(real, real, "own")
    with _config_lock:
        users = (*extra, *_symbols_paths.get(real, ()))
        globals_ = tuple(directories) if directories is not None else _directories
    searched: list[str] = []
    refused: list[str] = []

    def take(candidate: str, crc: int | None) -> bool:
        if candidate in searched:
            return False
        searched.append(candidate)
        if not os.path.isfile(candidate) or os.path.realpath(candidate) == real:
            return False
        why = _mismatch(candidate, facts, crc)
        if why is not None:
            refused.append(f"{candidate} ({why})")
        return why is None

    for how, candidate, crc in _candidates(real, facts, users, globals_):
        if take(candidate, crc):
            return DebugFile(real, candidate, how, tuple(searched), tuple(refused))
    return DebugFile(real, None, "none", tuple(searched), tuple(refused))


def dwarf_path(binary: str | Path) -> str:
    """The file to read `binary`'s DWARF sections from: its debug file when separate, else the binary."""
    found = locate(binary)
    return found.path if found.separate and found.path is not None else os.path.realpath(binary)


def _candidates(real: str, facts: _Facts, users: Sequence[str], directories: Sequence[str]
                ) -> Iterator[tuple[str, str, int | None]]:
    """(how, path, the debuglink CRC it must have or None) in search order."""
    here = os.path.dirname(real)
    for user in users:
        if not os.path.isdir(user):
            yield "symbolsPath", user, None
            continue
        for candidate, crc in _in_directory(user, here, facts):
            yield "symbolsPath", candidate, crc
    if facts.build_id:
        for directory in directories:
            yield "build-id", _build_id_path(directory, facts.build_id), None
    if facts.debuglink:
        name, crc = facts.debuglink
        yield "debuglink", os.path.join(here, name), crc
        yield "debuglink", os.path.join(here, ".debug", name), crc
        for directory in directories:
            yield "debuglink", os.path.join(directory, here.lstrip("/"), name), crc


def _in_directory(directory: str, here: str, facts: _Facts) -> Iterator[tuple[str, int | None]]:
    if facts.build_id:
        yield _build_id_path(directory, facts.build_id), None
    if facts.debuglink:
        name, crc = facts.debuglink
        yield os.path.join(directory, name), crc
        yield os.path.join(directory, here.lstrip("/"), name), crc


def _build_id_path(directory: str, build_id: str) -> str:
    return os.path.join(directory, ".build-id", build_id[:2], build_id[2:] + ".debug")


def _mismatch(candidate: str, binary: _Facts, expected_crc: int | None) -> str | None:
    """Why `candidate` is not the binary's debug file (None: it is)."""
    try:
        facts = _facts(candidate)
    except ValidationError as exc:
        return exc.message.rstrip(".")
    if not facts.has_dwarf:
        return "it has no .debug_info"
    if binary.build_id and facts.build_id and binary.build_id != facts.build_id:
        return f"its build id {facts.build_id} is not the binary's {binary.build_id}"
    if expected_crc is not None:
        crc = _crc32(candidate)
        if crc != expected_crc:
            return f"its CRC32 {crc:08x} is not the {expected_crc:08x} the binary's .gnu_debuglink records"
    return None


# --- per-file facts, cached by path, size and mtime ------------------------------------------------------------

_facts_cache: dict[tuple[str, int, int], _Facts] = {}
_crc_cache: dict[tuple[str, int, int], int] = {}
_cache_lock = threading.Lock()
_MAX_CACHED = 1024


def _version(path: str) -> tuple[str, int, int]:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        raise ValidationError(f"Binary not found: {path}. Check the path (it must exist on this machine).") from None
    except OSError as exc:
        raise ValidationError(f"Cannot read {path}: {exc.strerror}. Check its permissions.") from None
    return (path, stat.st_size, stat.st_mtime_ns)


def _remember(cache: dict[tuple[str, int, int], T], key: tuple[str, int, int], value: T) -> T:
    with _cache_lock:
        for old in [k for k in cache if k[0] == key[0]]:
            del cache[old]
        if len(cache) >= _MAX_CACHED:
            cache.pop(next(iter(cache)))
        cache[key] = value
    return value


def _facts(path: str) -> _Facts:
    key = _version(path)
    found = _facts_cache.get(key)
    if found is not None:
        return found
    with open_elf(path) as elf:
        try:
            facts = _Facts(build_id_of(elf), _debuglink(elf), has_dwarf(elf))
        except SECTION_ERRORS as exc:
            raise ValidationError(f"{path} is a damaged ELF file ({exc}).") from None
    return _remember(_facts_cache, key, facts)


def _debuglink(elf: ELFFile) -> tuple[str, int] | None:
    section = elf.get_section_by_name(".gnu_debuglink")
    if section is None or section["sh_type"] == "SHT_NOBITS":
        return None
    data = bytes(section.data())
    end = data.find(b"\0")
    if end <= 0:
        return None
    at = (end + 4) & ~3  # the name, its NUL, padding to 4 bytes, then the CRC
    if len(data) < at + 4:
        return None
    (crc,) = struct.unpack_from("<I" if elf.little_endian else ">I", data, at)
    return data[:end].decode("utf-8", "surrogateescape"), crc


def _crc32(path: str) -> int | None:
    try:
        key = _version(path)
    except ValidationError:
        return None
    known = _crc_cache.get(key)
    if known is not None:
        return known
    crc = 0
    try:
        with open(path, "rb") as stream:
            while chunk := stream.read(_CRC_CHUNK):
                crc = zlib.crc32(chunk, crc)
    except OSError:
        return None
    return _remember(_crc_cache, key, crc)


# --- reading -------------------------------------------------------------------------------------------------

@contextmanager
def open_dwarf_elf(binary: str | Path, found: DebugFile | None = None) -> Iterator[tuple[ELFFile, ELFFile]]:
    """(the binary, the file holding its DWARF): the same ELFFile twice unless the debug file is separate. Code,
    program headers, .eh_frame and .dynsym come from the first; .debug_* sections (and .symtab when the binary
    has none, see elf.read_symbol_table) from the second."""
    if found is None:
        found = locate(binary)
    with ExitStack() as stack:
        elf = stack.enter_context(open_elf(binary))
        debug = elf
        if found.separate and found.path is not None:
            debug = stack.enter_context(open_elf(found.path))
        yield elf, debug


class _Slot(Generic[T]):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.identity: tuple[str | None, str] | None = None
        self.item: T | None = None


class PerDebugFile(Generic[T]):
    """PerFile (per binary: real path, size, mtime) whose objects are built again when the debug file found for
    the binary changes (installed, given with symbolsPath, or rebuilt since)."""

    def __init__(self, build: Callable[[str], T], keep: int) -> None:
        self._build = build
        self._slots: PerFile[_Slot[T]] = PerFile(lambda _path: _Slot(), keep)

    def get(self, path: str | Path) -> T | None:
        slot = self._slots.get(path)
        if slot is None:
            return None
        real = os.path.realpath(path)
        try:
            found = locate(real)
            identity = (found.identity, found.how)
        except ValidationError:
            identity = (None, "unreadable")
        with slot.lock:
            if slot.item is None or slot.identity != identity:
                slot.item = self._build(real)
                slot.identity = identity
            return slot.item
