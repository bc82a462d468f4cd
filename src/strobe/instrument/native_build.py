"""The native fast path (agent/src/native/fastpath.c) as a shared object built by gcc -O2, which Frida's CModule
loads instead of compiling the same source with its built-in TinyCC: the fast path's C runs per traced call, and
TinyCC's code for it is about twice as slow (measured in the traced thread, same loaded 2-core VM: 170-220 ns a
call with TinyCC's, 72-115 ns with gcc's). Without gcc, or if the build fails, the agent compiles the source with
TinyCC (the embedded object is empty).

The object is built with the same #define prelude the agent gives TinyCC (layout.ts's cPrelude, evaluated here
from its `export const` lines), freestanding (-nostdlib, no stack protector, general registers only) and may
refer only to the symbols cmodule.ts hands it (`ALLOWED_IMPORTS`): anything else and it is not used.
"""

from __future__ import annotations

import ast
import logging
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

# What cmodule.ts passes to the fast path's CModule: the shared area and libc functions.
ALLOWED_IMPORTS = frozenset({
    "shared", "clock_gettime", "pthread_self", "pthread_getname_np", "pthread_key_create", "pthread_key_delete",
    "pthread_getspecific", "pthread_setspecific", "calloc", "realloc", "write", "abort", "gettid",
})
FREESTANDING = "freestanding"  # agent/src/native/freestanding: the <glib.h> gcc sees
GCC_FLAGS = ["-std=gnu11", "-O2", "-fPIC", "-shared", "-nostdlib", "-fno-stack-protector", "-mgeneral-regs-only",
             "-fno-tree-loop-distribute-patterns", "-fno-builtin", "-fvisibility=default", "-Wl,-z,norelro",
             "-Wl,--hash-style=both"]
BUILD_TIMEOUT_S = 60

_CONST = re.compile(r"^export const ([A-Z][A-Z0-9_]*)(?::\s*number)?\s*=\s*([^;{]+);", re.MULTILINE)
_C_LAYOUT = re.compile(r"export const C_LAYOUT[^=]*=\s*\{([^}]*)\}", re.DOTALL)


class LayoutError(ValueError):
    pass


def _evaluate(expr: str, known: dict[str, int]) -> int:
    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in known:
            return known[node.id]
        if isinstance(node, ast.BinOp):
            left, right = value(node.left), value(node.right)
            op = node.op
            if isinstance(op, ast.Add):
                return left + right
            if isinstance(op, ast.Sub):
                return left - right
            if isinstance(op, ast.Mult):
                return left * right
            if isinstance(op, ast.LShift):
                return left << right
            if isinstance(op, ast.RShift):
                return left >> right
            if isinstance(op, ast.BitOr):
                return left | right
            if isinstance(op, ast.BitAnd):
                return left & right
        raise LayoutError(f"cannot evaluate {ast.unparse(node)!r} in layout.ts")

    return value(ast.parse(expr.strip(), mode="eval").body)


def c_prelude(layout_ts: Path, use_tsc: bool) -> str:
    """What layout.ts's cPrelude(useTsc) returns, computed from the file's constants."""
    text = layout_ts.read_text(encoding="utf-8")
    known: dict[str, int] = {}
    for name, expr in _CONST.findall(text):
        known[name] = _evaluate(expr, known)
    listed = _C_LAYOUT.search(text)
    if listed is None:
        raise LayoutError("layout.ts has no C_LAYOUT object")
    lines = ["/* Generated from agent/src/native/layout.ts (cPrelude). */"]
    if use_tsc:
        lines.append("#define USE_TSC 1")
    for name in re.findall(r"[A-Z][A-Z0-9_]*", listed.group(1)):
        if name not in known or not 0 <= known[name] <= 0xFFFFFFFF:
            raise LayoutError(f"layout constant {name} is not an unsigned 32-bit integer here")
        lines.append(f"#define {name} {known[name]}u")
    return "\n".join(lines) + "\n"


def build_shared_object(source: str, include_dir: Path) -> bytes | None:
    """`source` (prelude and C, includes inlined) compiled and linked by gcc; None when gcc is missing, fails, or
    the object needs a symbol the agent does not provide (logged)."""
    gcc = shutil.which("gcc")
    if gcc is None:
        return None
    with tempfile.TemporaryDirectory(prefix="strobe-native-") as scratch:
        c_file, so_file = Path(scratch) / "fastpath.c", Path(scratch) / "fastpath.so"
        c_file.write_text(source, encoding="utf-8")
        try:
            done = subprocess.run([gcc, *GCC_FLAGS, f"-I{include_dir}", "-o", str(so_file), str(c_file)],
                                  capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("the native fast path was not built with gcc (%s): TinyCC compiles it", exc)
            return None
        if done.returncode != 0:
            log.warning("the native fast path was not built with gcc: TinyCC compiles it\n%s", done.stderr[-2000:])
            return None
        imports = undefined_symbols(so_file)
        if imports is None or not imports <= ALLOWED_IMPORTS:
            log.warning("the native fast path built by gcc needs %s: TinyCC compiles it",
                        sorted((imports or set()) - ALLOWED_IMPORTS) or "symbols nm could not list")
            return None
        return so_file.read_bytes()


def undefined_symbols(so_file: Path) -> set[str] | None:
    nm = shutil.which("nm")
    if nm is None:
        return None
    done = subprocess.run([nm, "-D", "--undefined-only", str(so_file)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return None
    return {line.split()[-1].split("@")[0] for line in done.stdout.splitlines() if line.strip()}
