"""Whether hooking a native function at its entry would break the program.

Frida's Interceptor (17.x, x86-64) hooks a function by overwriting its first bytes with a jump to a trampoline,
padded with NOPs up to the next instruction boundary; the instructions it displaced run, relocated, in the
trampoline. Measured on Frida 17.26 by reading a function's bytes before and after Interceptor.attach:

- a trampoline within ±2 GB (the usual case, main executable and shared libraries alike): `jmp rel32`, 5 bytes,
  rounded up to whole instructions (9 for `test; jle; mov edx, 0`; 5 to 7 in libc's strlen, puts, printf);
- no room for a trampoline within ±2 GB (the neighbourhood reserved): `jmp [rip+2]; ud2; .quad target`, 16 bytes,
  rounded up to whole instructions (19 in the same function). frida-gum's x86 backend names these sizes
  GUM_INTERCEPTOR_NEAR_REDIRECT_SIZE and GUM_INTERCEPTOR_FULL_REDIRECT_SIZE.

The host cannot tell which one a hook will get, so the check is conservative: OVERWRITTEN_BYTES = 16, rounded up
to whole instructions. (The price: of python3.11d's 11,318 sized functions, 424 are refused at 16 bytes, 14 would
be at 5.) A branch of the function that lands inside those bytes (`_PyList_ClearFreeList` of Debian's python3.11d
loops back to +0x4) executes the middle of Frida's jump, or its ud2: SIGILL or SIGSEGV, or wrong results. Such a
function is refused:

    verdict = entry_verdict(code, 0x4CF443)   # code: its 77 bytes
    verdict.safe    # False
    verdict.reason  # "a jump at +0x30 lands at +0x4, inside the first 17 bytes, which Strobe's hook overwrites"

Checked: every direct branch (jmp, jcc, call, loop*, jrcxz, xbegin) found by a linear sweep of the whole function
(capstone, lite API, no detail), from anywhere in it, into [start, start + span) where span is OVERWRITTEN_BYTES
rounded up to whole instructions; branches from inside the span count too (Frida's relocated copy of them goes to
their original targets, except a conditional jump backwards within the copy). A jump to +0 counts (it would run
the hook again without a call); a call to +0 does not (recursion: a real call, which the hook is there to see).
Not checked: indirect branches (jump tables, `jmp rax`), branches from other functions into this one's first bytes
(a compiler's `.cold` part of it included).

`HookSafety` reads a function's bytes from its ELF file on disk (as the loader maps them; no file is kept open) and
remembers each verdict per (build id, address, size), so hooking the same functions again, or in a forked child,
costs nothing. Checking a batch (`entry_verdicts`) first looks for bytes that could start a branch into the span,
vectorised over every function at once, and disassembles only the functions that have one: 10,000 functions of
python3.11d (2.4 MB of code) take ~0.3 s, of libLLVM-15 (4.1 MB) ~0.9 s, on a quiet 2-core machine (one by one:
1.8 and 3.3 s); again, a few ms.

    HOOK_SAFETY.verdicts("/usr/bin/python3.11d", [(0x4CF443, 77)])   # [Verdict(safe=False, reason=...)]
    HOOK_SAFETY.span("/usr/bin/python3.11d", 0x4CF443)               # 17: what a hook there overwrites
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import capstone  # type: ignore[import-untyped]
import numpy as np
from elftools.common.exceptions import ELFError

from strobe.errors import ValidationError
from strobe.symbols.elf import SECTION_ERRORS, ElfInfo, elf_info, open_elf

OVERWRITTEN_BYTES = 16  # what a hook's jump may overwrite at a function's entry, before rounding (see above)
MAX_INSTRUCTION = 15  # x86's longest instruction
MAX_SPAN = OVERWRITTEN_BYTES + MAX_INSTRUCTION - 1  # the most a hook can overwrite, rounded up
MAX_FUNCTION_BYTES = 1 << 20  # a function larger than this is checked in its first MiB only
_MAX_VERDICTS = 500_000
_MAX_MODULES = 64

_DIRECT = frozenset({"jmp", "call", "loop", "loope", "loopne", "jrcxz", "jecxz", "jcxz", "xbegin"})


@dataclass(frozen=True, slots=True)
class Verdict:
    safe: bool
    reason: str | None = None  # why not safe, for the caller's warning


SAFE = Verdict(True)
_local = threading.local()  # a capstone handle per thread: a handle is not meant to be shared


def _cs() -> Any:
    cs = getattr(_local, "cs", None)
    if cs is None:
        cs = _local.cs = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
        cs.detail = False
        cs.skipdata = True  # an undecodable byte (data, padding) becomes a ".byte" and the sweep goes on
    return cs


def overwritten_span(code: bytes, address: int, overwritten: int = OVERWRITTEN_BYTES) -> int:
    """`overwritten` rounded up to the end of the instruction it ends in (`overwritten` itself when the code is
    shorter): the bytes a hook at `address` replaces."""
    for at, size, _mnemonic, _ops in _cs().disasm_lite(code[: overwritten + MAX_INSTRUCTION], address):
        end: int = at + size - address
        if end >= overwritten:
            return end
    return overwritten


def entry_verdict(code: bytes, address: int, overwritten: int = OVERWRITTEN_BYTES) -> Verdict:
    """Whether a hook overwriting `overwritten` bytes (rounded up to whole instructions) at the start of the function
    whose code is `code`, loaded at `address`, leaves every direct branch of it landing on an intact instruction.
    Pure: the bytes and their address are all it reads."""
    return _sweep(code, address, overwritten_span(code, address, overwritten), len(code))


def entry_verdicts(functions: Sequence[tuple[bytes, int]], overwritten: int = OVERWRITTEN_BYTES) -> list[Verdict]:
    """entry_verdict of each (code, address), the same answers faster: a function is disassembled whole only when
    some byte of it could start a branch into its first bytes (_suspects); most have none."""
    spans = [overwritten_span(code, address, overwritten) for code, address in functions]
    last = _suspects([code for code, _ in functions], spans)
    return [_sweep(code, address, span, until) if until >= 0 else SAFE
            for (code, address), span, until in zip(functions, spans, last, strict=True)]


def _sweep(code: bytes, address: int, span: int, until: int) -> Verdict:
    """A linear sweep of `code` up to offset `until` (past it no branch can land in the first `span` bytes)."""
    for at, _size, mnemonic, ops in _cs().disasm_lite(code[: until + MAX_INSTRUCTION], address):
        if at - address > until:
            break
        name = mnemonic.rsplit(" ", 1)[-1]  # "bnd jmp", "notrack jmp"
        if not (name in _DIRECT or name.startswith("j")) or not ops.startswith("0x"):
            continue  # not a branch, or an indirect one (a register, memory)
        landing = int(ops, 16) - address
        if not 0 <= landing < span or (landing == 0 and name == "call"):
            continue  # a call to +0 is recursion: a call like any other, which the hook is there to see
        origin = f"a {'call' if name == 'call' else 'jump'} at +{at - address:#x}"
        if landing == 0:
            return Verdict(False, f"{origin} goes back to its first instruction, which Strobe's hook replaces (it "
                                  "would run the hook again without a call)")
        return Verdict(False, f"{origin} lands at +{landing:#x}, inside the first {span} bytes, which Strobe's hook "
                              "overwrites")
    return SAFE


def _suspects(codes: Sequence[bytes], spans: Sequence[int]) -> list[int]:
    """Per function, the offset of the last byte that could start a direct relative branch landing in its first
    `span` bytes (a call to +0 left out), or -1 for none: a superset of the real branches, found in one vectorised
    pass over every function's bytes without decoding (rel8: EB, 70-7F, E0-E3; rel32: E8, E9, 0F 80-8F, C7 F8)."""
    count = len(codes)
    lengths = np.fromiter(map(len, codes), dtype=np.int64, count=count)
    total = int(lengths.sum())
    last = np.full(count, -1, dtype=np.int64)
    if total == 0:
        return last.tolist()
    data = np.frombuffer(b"".join(codes) + bytes(8), dtype=np.uint8)
    starts = np.zeros(count, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    owner = np.repeat(np.arange(count), lengths)
    limit = np.asarray(spans, dtype=np.int64)
    op, following = data[:total], data[1 : total + 1]

    def mark(at: np.ndarray, length: int, rel: np.ndarray, is_call: np.ndarray | None = None) -> None:
        local = at - starts[owner[at]]
        landing = local + length + rel
        hit = (landing >= 0) & (landing < limit[owner[at]])
        if is_call is not None:
            hit &= ~(is_call & (landing == 0))
        np.maximum.at(last, owner[at[hit]], local[hit])

    def rel32(at: np.ndarray) -> np.ndarray:
        word = (data[at].astype(np.uint32) | data[at + 1].astype(np.uint32) << 8
                | data[at + 2].astype(np.uint32) << 16 | data[at + 3].astype(np.uint32) << 24)
        signed: np.ndarray = word.view(np.int32).astype(np.int64)
        return signed

    at = np.flatnonzero((op == 0xEB) | ((op & 0xF0) == 0x70) | ((op >= 0xE0) & (op <= 0xE3)))
    mark(at, 2, data[at + 1].view(np.int8).astype(np.int64))
    at = np.flatnonzero((op == 0xE8) | (op == 0xE9))
    mark(at, 5, rel32(at + 1), op[at] == 0xE8)
    at = np.flatnonzero(((op == 0x0F) & ((following & 0xF0) == 0x80)) | ((op == 0xC7) & (following == 0xF8)))
    mark(at, 6, rel32(at + 2))
    return last.tolist()


class ModuleCode:
    """An ELF file's code as its loader maps it (the file part of its executable PT_LOAD segments). Holds no file
    open: each read opens it."""

    def __init__(self, path: str) -> None:
        with open_elf(path) as elf:
            try:
                self.info: ElfInfo = elf_info(elf, path)
                self._segments = [(s["p_vaddr"], s["p_filesz"], s["p_offset"]) for s in elf.iter_segments()
                                  if s["p_type"] == "PT_LOAD" and s["p_flags"] & 1]  # PF_X
            except (*SECTION_ERRORS, ELFError) as exc:
                raise ValidationError(f"{path} is a damaged ELF file ({exc}).") from None
        self.path = path

    def read(self, address: int, size: int) -> bytes:
        """The code at static `address`, at most `size` bytes (fewer where its segment's file part ends), b"" when
        no executable segment holds it."""
        return self.read_many([(address, size)])[0]

    def read_many(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """`read` of each (address, size), the file opened once."""
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            return [self._read(fd, address, size) for address, size in ranges]
        finally:
            os.close(fd)

    def _read(self, fd: int, address: int, size: int) -> bytes:
        for start, filesz, offset in self._segments:
            if start <= address < start + filesz:
                return os.pread(fd, min(size, start + filesz - address), offset + address - start)
        return b""


class HookSafety:
    """Verdicts for functions of ELF files on disk, remembered per (build, static address, size). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._modules: OrderedDict[tuple[str, int, int], ModuleCode | None] = OrderedDict()
        self._verdicts: dict[tuple[str, int, int], Verdict] = {}

    def verdicts(self, path: str, functions: Sequence[tuple[int, int]]) -> list[Verdict | None]:
        """The verdict on hooking each function (static address, size in bytes) of the ELF file `path`; None for
        one that cannot be checked (size unknown, the file unreadable, the address in no executable segment)."""
        module = self._module(path)
        if module is None:
            return [None] * len(functions)
        build = module.info.build_id or module.info.path
        out: list[Verdict | None] = [None] * len(functions)
        unknown: list[tuple[int, tuple[str, int, int]]] = []
        for i, (address, size) in enumerate(functions):
            if size > 0 and address > 0:
                key = (build, address, size)
                out[i] = self._verdicts.get(key)
                if out[i] is None:
                    unknown.append((i, key))
        try:
            codes = module.read_many([(address, min(size, MAX_FUNCTION_BYTES)) for _, (_, address, size) in unknown])
        except OSError:
            return out
        todo = [(i, key, code, key[1]) for (i, key), code in zip(unknown, codes, strict=True) if code]
        if todo:
            made = entry_verdicts([(code, address) for _, _, code, address in todo])
            with self._lock:
                if len(self._verdicts) + len(made) > _MAX_VERDICTS:
                    self._verdicts.clear()
                for (i, key, _, _), verdict in zip(todo, made, strict=True):
                    self._verdicts[key] = out[i] = verdict
        return out

    def span(self, path: str, address: int) -> int | None:
        """The bytes a hook at static `address` of `path` overwrites (OVERWRITTEN_BYTES rounded up to whole
        instructions); None when its code cannot be read."""
        module = self._module(path)
        try:
            code = module.read(address, MAX_SPAN) if module is not None else b""
        except OSError:
            return None
        return overwritten_span(code, address) if code else None

    def _module(self, path: str) -> ModuleCode | None:
        try:
            stat = os.stat(path)
        except OSError:
            return None
        key = (path, stat.st_size, stat.st_mtime_ns)
        with self._lock:
            if key in self._modules:
                self._modules.move_to_end(key)
                return self._modules[key]
        try:
            module: ModuleCode | None = ModuleCode(path)
        except (ValidationError, OSError, ValueError):
            module = None
        with self._lock:
            self._modules[key] = module
            while len(self._modules) > _MAX_MODULES:
                self._modules.popitem(last=False)
        return module


HOOK_SAFETY = HookSafety()  # the daemon's, shared by its sessions: a verdict holds for every process of a build
