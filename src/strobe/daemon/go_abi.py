"""What Strobe can and cannot do with Go code, and how Go code is told apart from the C next to it.

Go code is never hooked (`GO_HOOK_REFUSAL` says why, with what was measured): a Frida hook runs on the stack of the
thread it stops, and Go code runs on goroutine stacks that Go sizes for Go code alone.

- An exit hook replaces the return address on the goroutine's stack with Frida's trampoline. Go walks goroutine
  stacks by return address (to copy a stack that grows, for the garbage collector, for a panic) and stops the
  program at an address it does not know: "unexpected return pc ... fatal error: unknown caller pc"
  (tests/targets/go_values traced with `main.*`: 1 run in 3 at 16 goroutines).
- An entry-only hook (a probe: no return address replaced) still runs Frida's trampoline on the goroutine's stack:
  it pushes the registers and the 512-byte FPU state and calls into Gum, 841 bytes measured before the listener's
  first instruction. At a function's entry Go guarantees about 800 bytes below the stack pointer (its stack guard:
  928 bytes, less what a small frame may use unchecked), and goroutine stacks (2 KiB at first) have no guard page:
  their neighbour is another goroutine's stack. Measured on go_values' recursive `main.depth` with an empty
  listener: entries 848 bytes above the stack's end, and the neighbouring goroutine's frames overwritten ("fatal
  error: traceback did not unwind completely"), 4 runs in 4.

So in a Go module (one with a `.go.buildinfo` section, which every Go toolchain since 1.13 writes, or Go's
`runtime.buildVersion` symbol) a function is Go code when its name is package-qualified (`main.add`,
`sync.(*WaitGroup).Add`, `github.com/x/y.F`; C names have no dot but gcc's clone suffixes, `f.part.0`, `f.cold`),
or when it lies in Go's own text, between the symbols `runtime.text` and `runtime.etext` (the runtime's assembly:
`gogo`, `cmpbody`, `debugCall32`, `crosscall2`). The C of cgo (its preamble, the `x_cgo_*` runtime helpers),
linked after Go's text, runs on the thread's system stack and is hooked as usual. Without those two symbols (a
stripped symbol table) only functions of C and C++ source files count as C.

    refused = go_functions([(key, function), ...])   # {key: GO_HOOK_REFUSAL} for the Go code among them
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TypeVar

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from strobe.daemon.symbols import TraceableFunction

K = TypeVar("K")

GO_HOOK_REFUSAL = (
    "Go code cannot be hooked safely: Frida's hook runs on the goroutine's own stack, where it needs ~850 bytes "
    "(registers and FPU state) before any of Strobe's code runs, while Go guarantees only ~800 bytes below the stack "
    "pointer at a function's entry and goroutine stacks have no guard page (the hook would overwrite another "
    "goroutine's stack); an exit hook also replaces the return address, which Go's stack copying and garbage "
    "collector reject ('unknown caller pc'). Nothing of this function is recorded, so no argument or return value "
    "is shown, rather than a guess. Trace the program's C functions (cgo), read Go globals with debug_read "
    "('main.counter'), or add prints to the Go code"
)

# gcc's and clang's names for parts and copies of a C function: the only dots a C symbol has.
_C_CLONE = re.compile(r"(\.(part|cold|isra|constprop|lto_priv|localalias|clone|llvm|str)(\.\d+)*)+$")


def is_go_name(name: str) -> bool:
    """Whether a function of a Go module is Go code (Go or Go assembly), by its package-qualified name."""
    return "." in _C_CLONE.sub("", name)


_C_SOURCES = (".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".S", "cgo-gcc-prolog")
_EVERYWHERE = (0, 1 << 64)


@lru_cache(maxsize=256)
def _go_text(path: str, size: int, mtime_ns: int) -> tuple[int, int] | None:
    """Go's own text [runtime.text, runtime.etext) in a Go module (static addresses; everything when the symbols are
    stripped); None for any other file."""
    try:
        with open(path, "rb") as file:
            elf = ELFFile(file)
            symbols = elf.get_section_by_name(".symtab")
            table = symbols if isinstance(symbols, SymbolTableSection) else None
            if elf.get_section_by_name(".go.buildinfo") is None and (
                    table is None or not table.get_symbol_by_name("runtime.buildVersion")):
                return None
            if table is None:
                return _EVERYWHERE
            start, end = table.get_symbol_by_name("runtime.text"), table.get_symbol_by_name("runtime.etext")
            if not start or not end:
                return _EVERYWHERE
            return (int(start[0]["st_value"]), int(end[0]["st_value"]))
    except (OSError, ELFError):
        return None


def go_text(path: str) -> tuple[int, int] | None:
    """Where Go's own code is in the ELF file at `path` (static addresses), None when it is not a Go module;
    remembered per version of the file."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return _go_text(path, stat.st_size, stat.st_mtime_ns)


def is_go_module(path: str) -> bool:
    """Whether the ELF file at `path` holds Go code."""
    return go_text(path) is not None


def is_go_function(function: TraceableFunction) -> bool:
    """Whether a native function is Go code (compiled Go or Go assembly), which runs on goroutine stacks."""
    if function.runtime != "native":
        return False
    text = go_text(function.module)
    if text is None:
        return False
    if is_go_name(function.name):
        return True
    if text is _EVERYWHERE:
        return not (function.file or "").endswith(_C_SOURCES)
    return text[0] <= function.info.address < text[1]


def go_functions(functions: Sequence[tuple[K, TraceableFunction]]) -> dict[K, str]:
    """The Go code among native `functions` (key, function), each with why it is not hooked."""
    return {key: GO_HOOK_REFUSAL for key, function in functions if is_go_function(function)}
