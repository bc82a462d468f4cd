"""Thread stacks of a live process tree, read from outside (no Frida): the stuck detector compares them to tell a
deadlock from a busy loop, and a stuck test's report shows them so the agent sees where every thread was.

eu-stack (elfutils) is the default: 10-60 ms per process, so it can run every couple of seconds. gdb is the
fallback (~0.5 s, but it reads more unwinding formats). Python processes are read with py-spy when it is
installed (interpreter frames instead of ceval internals), else natively like everything else.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from strobe.testing.adapters.base import StackKind

MAX_FRAMES = 64  # per thread: deep recursion would otherwise make each capture megabytes long
TOOL_TIMEOUT_S = 15.0

# Processes that only launch the real test process and wait for it: their stacks say "waiting for a child".
WRAPPERS = frozenset({"sh", "bash", "dash", "zsh", "env", "timeout", "make", "gmake", "cargo", "npm", "npx", "pnpm",
                      "yarn", "uv", "poetry", "go", "ctest", "xargs", "nice", "stdbuf", "setsid"})
# Processes whose CPU use means "building", not "running a test".
BUILD_TOOLS = frozenset({"rustc", "cc1", "cc1plus", "cc", "gcc", "g++", "clang", "clang++", "ld", "ld.lld", "lld",
                         "collect2", "as", "compile", "link", "asm", "cgo", "tsc", "esbuild", "javac", "cmake"})

_SYSTEM_DIRS = ("/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/usr/libexec/")
_RUNTIME_PREFIXES = ("std::", "core::", "alloc::", "test::", "<std::", "<core::", "<alloc::", "__", "_dl_", "_Py",
                     "Py", "v8::", "node::", "uv_", "Builtins_", "runtime.", "syscall.", "internal/", "node:",
                     "testing.", "<frozen ")
_SYSTEM_SOURCES = ("../sysdeps/", "./nptl/", "./csu/", "./misc/", "/rustc/", "/usr/include/", "/usr/src/", "<frozen")
_DEPENDENCY_DIRS = ("/site-packages/", "/dist-packages/", "/node_modules/", "/.cargo/registry/", "/go/pkg/mod/")
_RUNTIME_NAMES = frozenset({"main", "??", "", "<module>", "_start", "start_thread", "clone", "clone3"})
# py-spy --native names a native frame's library by its file name only
_SYSTEM_LIBRARIES = ("libc.so", "libc-", "libpthread", "ld-linux", "libm.so", "libpython", "libstdc++", "libgcc_s")


@dataclass(frozen=True)
class Frame:
    """One frame, innermost first in its thread. `location` is "file:line" when debug info has it; `module` is
    the executable or shared object the code lives in (None when the tool did not say)."""

    function: str
    location: str | None = None
    module: str | None = None

    def __str__(self) -> str:
        if self.location:
            return f"{self.function} at {self.location}"
        if self.module:
            return f"{self.function} in {Path(self.module).name}"
        return self.function

    @property
    def in_system_library(self) -> bool:
        """Code of libc, pthread, the dynamic loader, the vdso or another system library."""
        module = self.module
        return module is not None and (module.startswith(_SYSTEM_DIRS) or "vdso" in module
                                       or Path(module).name.startswith(_SYSTEM_LIBRARIES))

    @property
    def is_user(self) -> bool:
        """True for the program's own code: not libc/pthread/the dynamic loader, not a language runtime."""
        if self.in_system_library:
            return False
        if self.location and (self.location.startswith(_SYSTEM_SOURCES) or self.location.startswith(_SYSTEM_DIRS)
                              or any(part in self.location for part in _DEPENDENCY_DIRS)):
            return False
        return self.function not in _RUNTIME_NAMES and not self.function.startswith(_RUNTIME_PREFIXES)


@dataclass(frozen=True)
class ThreadStack:
    tid: int
    name: str
    calls: tuple[Frame, ...]

    @property
    def frames(self) -> list[str]:
        """The frames as text, innermost first (what a StuckTest shows)."""
        return [str(frame) for frame in self.calls]

    @property
    def functions(self) -> tuple[str, ...]:
        """Function names only: two captures of a thread parked in the same place compare equal."""
        return tuple(frame.function for frame in self.calls)

    @property
    def user_frames(self) -> list[Frame]:
        return [frame for frame in self.calls if frame.is_user]


@dataclass(frozen=True)
class ProcessStacks:
    """Every thread of one process of a test run's tree. `error` says why `threads` is empty."""

    pid: int
    command: str
    threads: list[ThreadStack] = field(default_factory=list)
    error: str | None = None

    @property
    def is_wrapper(self) -> bool:
        return self.command in WRAPPERS


@dataclass(frozen=True)
class ProcStat:
    """The fields of /proc/<pid>/stat the runner needs."""

    pid: int
    command: str
    state: str
    ppid: int
    pgrp: int
    session: int
    start_ticks: int  # with pid, identifies the process across pid reuse


def read_stat(pid: int, tid: int | None = None) -> ProcStat | None:
    """/proc/<pid>/stat (or a thread's), or None when it is gone. comm may contain spaces and parentheses,
    hence the split at the last ')'."""
    path = f"/proc/{pid}/task/{tid}/stat" if tid is not None else f"/proc/{pid}/stat"
    try:
        text = Path(path).read_text()
    except (OSError, ValueError):
        return None
    head, _, rest = text.rpartition(")")
    fields = rest.split()
    if len(fields) < 20:
        return None
    return ProcStat(pid=pid, command=head.partition("(")[2], state=fields[0], ppid=int(fields[1]),
                    pgrp=int(fields[2]), session=int(fields[3]), start_ticks=int(fields[19]))


def all_processes() -> list[ProcStat]:
    """Every live (non-zombie) process on the machine."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := read_stat(int(entry))) and stat.state not in ("Z", "X"):
            out.append(stat)
    return out


def process_tree(pid: int) -> list[int]:
    """`pid` and all its live descendants, parents before children. Zombies are left out: they have no
    threads to read and nothing left to kill."""
    children: dict[int, list[int]] = {}
    alive = set()
    for stat in all_processes():
        alive.add(stat.pid)
        children.setdefault(stat.ppid, []).append(stat.pid)
    if pid not in alive:
        return []
    order, queue = [], [pid]
    while queue:
        current = queue.pop(0)
        order.append(current)
        queue.extend(sorted(children.get(current, [])))
    return order


def pipe_holders(inodes: set[int]) -> set[int]:
    """Processes (other than this one) with a descriptor on one of these pipes: a test's background process that
    left its session (setsid) is still found through the stdout it inherited."""
    holders = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            fds = os.listdir(f"/proc/{entry}/fd")
        except OSError:
            continue
        for fd in fds:
            with contextlib.suppress(OSError, ValueError):
                target = os.readlink(f"/proc/{entry}/fd/{fd}")
                if target.startswith("pipe:[") and int(target[6:-1]) in inodes:
                    holders.add(int(entry))
                    break
    return holders


def command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def thread_names(pid: int) -> dict[int, str]:
    names = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return {}
    for tid in tids:
        try:
            names[int(tid)] = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
        except OSError:
            continue
    return names


# ---- parsers --------------------------------------------------------------------------------------

_EU_THREAD = re.compile(r"^TID (\d+):")
_EU_FRAME = re.compile(r"^#\d+\s+0x[0-9a-f]+\s*(.*)$")
_EU_SOURCE = re.compile(r"^\s+(\S+?):(\d+)(?::\d+)?$")


def parse_eu_stack(text: str, names: dict[int, str]) -> list[ThreadStack]:
    """`eu-stack -m -s -i` output: "TID n:" headers, "#i 0xADDR func - module" frames, each optionally followed
    by an indented "file:line:column" line."""
    threads: list[ThreadStack] = []
    tid: int | None = None
    frames: list[Frame] = []

    def flush() -> None:
        if tid is not None:
            threads.append(ThreadStack(tid, names.get(tid, str(tid)), tuple(frames)))

    for line in text.splitlines():
        if match := _EU_THREAD.match(line):
            flush()
            tid, frames = int(match.group(1)), []
        elif tid is not None and (match := _EU_FRAME.match(line)):
            rest = match.group(1)
            function, sep, module = ("", "-", rest[2:]) if rest.startswith("- ") else rest.rpartition(" - ")
            if not sep:
                function, module = rest, ""
            frames.append(Frame(function.strip() or "??", None, module.strip() or None))
        elif frames and (match := _EU_SOURCE.match(line)):
            last = frames[-1]
            frames[-1] = Frame(last.function, f"{match.group(1)}:{match.group(2)}", last.module)
    flush()
    return threads


_GDB_THREAD = re.compile(r'^Thread \d+ \((?:.*?LWP|process) (\d+)\)?(?: "(.*)")?\)?:')
_GDB_FRAME = re.compile(r"^#\d+\s+(?:0x[0-9a-f]+ in )?(.+?) \(.*?\)(?: at (\S+:\d+)| from (\S+))?\s*$")


def parse_gdb(text: str) -> list[ThreadStack]:
    """`gdb -batch -ex 'thread apply all bt'`: "Thread N (... (LWP tid) "name"):" then "#i [0xADDR in] func
    (args) at file:line" or "... from /lib/x.so"."""
    threads: list[ThreadStack] = []
    current: tuple[int, str] | None = None
    frames: list[Frame] = []
    for line in [*text.splitlines(), ""]:
        if (match := _GDB_THREAD.match(line)) or (not line.strip() and current):
            if current:
                threads.append(ThreadStack(current[0], current[1], tuple(frames)))
            current, frames = ((int(match.group(1)), match.group(2) or match.group(1)) if match else None), []
        elif current and (match := _GDB_FRAME.match(line)):
            frames.append(Frame(match.group(1), match.group(2), match.group(3)))
    return sorted(threads, key=lambda t: t.tid)


_PY_THREAD = re.compile(r'^Thread (0x[0-9a-fA-F]+|\d+)(?: \(([^)]*)\))?(?:: "(.*)")?')
_PY_FRAME = re.compile(r"^\s+(.+?) \((.+?:\d+)\)\s*$")
_PY_NATIVE_FRAME = re.compile(r"^\s+(.+?) \(([^():]+)\)\s*$")  # --native: "func (libpython3.11.so.1.0)"


def parse_py_spy(text: str) -> list[ThreadStack]:
    """`py-spy dump --pid`: "Thread <id> (<state>): "<name>"" headers, indented "function (file:line)" frames
    (with --native also "function (library)" or "0xADDR (library)")."""
    threads: list[ThreadStack] = []
    header: tuple[int, str] | None = None
    frames: list[Frame] = []
    for line in [*text.splitlines(), "Thread 0"]:
        if match := _PY_THREAD.match(line):
            if header:
                threads.append(ThreadStack(header[0], header[1], tuple(frames)))
            ident = match.group(1)
            header = (int(ident, 16) if ident.startswith("0x") else int(ident), match.group(3) or ident)
            frames = []
        elif header and (match := _PY_FRAME.match(line)):
            frames.append(Frame(match.group(1), match.group(2)))
        elif header and (match := _PY_NATIVE_FRAME.match(line)):
            function = match.group(1)
            frames.append(Frame("??" if function.startswith("0x") else function, None, match.group(2)))
    return threads


# ---- capture --------------------------------------------------------------------------------------

def _run(argv: list[str]) -> tuple[int, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=TOOL_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    return done.returncode, done.stdout + ("\n" + done.stderr if done.returncode else "")


def _eu_stack(pid: int, detail: bool = True) -> list[ThreadStack]:
    if not shutil.which("eu-stack"):
        return []
    # -s/-i (source lines, inlined frames) read DWARF: ~10x slower, so only when the stacks are to be shown.
    # Exit code 1 means "some frames could not be unwound": the rest is still worth having.
    extra = ["-s", "-i"] if detail else []
    code, out = _run(["eu-stack", "-p", str(pid), "-m", *extra, "-n", str(MAX_FRAMES)])
    return parse_eu_stack(out, thread_names(pid)) if code in (0, 1) else []


def _gdb(pid: int) -> list[ThreadStack]:
    if not shutil.which("gdb"):
        return []
    code, out = _run(["gdb", "-nx", "-batch", "-p", str(pid), "-ex", "set pagination off",
                      "-ex", f"thread apply all bt {MAX_FRAMES}"])
    return parse_gdb(out) if code == 0 else []


def _py_spy(pid: int) -> list[ThreadStack]:
    if not shutil.which("py-spy"):
        return []
    code, out = _run(["py-spy", "dump", "--pid", str(pid)])
    return parse_py_spy(out) if code == 0 else []


def py_spy_path() -> str | None:
    """py-spy on PATH, or next to this interpreter (installed in Strobe's own environment)."""
    beside = Path(sys.executable).parent / "py-spy"
    return shutil.which("py-spy") or (str(beside) if os.access(beside, os.X_OK) else None)


def python_stacks(pid: int) -> list[ThreadStack]:
    """The Python threads of a CPython process by OS thread id, interpreter frames interleaved with the native
    ones they call (`py-spy dump --native`) or, when py-spy cannot unwind the native stacks (through Frida's
    code, for one), interpreter frames only; [] without py-spy or when it cannot read the process."""
    if (spy := py_spy_path()) is None:
        return []
    for native in (["--native"], []):
        code, out = _run([spy, "dump", *native, "--pid", str(pid)])
        if code == 0:
            return parse_py_spy(out)
    return []


def is_python(pid: int) -> bool:
    """The process runs a Python interpreter (by its executable's name)."""
    return _is_python(pid)


def _is_python(pid: int) -> bool:
    try:
        exe = Path(os.readlink(f"/proc/{pid}/exe")).name
    except OSError:
        exe = command_name(pid)
    return exe.startswith(("python", "pypy"))


def capture_stacks(pid: int, kind: StackKind = StackKind.NATIVE, tool: str | None = None,
                   detail: bool = True) -> list[ThreadStack]:
    """Every thread's stack of one process ([] when it is gone or no tool could read it). `tool` forces
    "eu-stack", "gdb" or "py-spy"; otherwise Python processes try py-spy first when `kind` is PYTHON, and
    native capture tries eu-stack, then gdb. Without `detail`, eu-stack skips source lines and inlined frames
    (function names are enough to compare two captures)."""
    readers = {"eu-stack": lambda p: _eu_stack(p, detail), "gdb": _gdb, "py-spy": _py_spy}
    if tool is not None:
        return readers[tool](pid)
    order = ["eu-stack", "gdb"]
    if kind is StackKind.PYTHON and _is_python(pid):
        order.insert(0, "py-spy")
    for name in order:
        if threads := readers[name](pid):
            return threads
    return []


def capture_tree(pid: int, kind: StackKind = StackKind.NATIVE, detail: bool = True) -> list[ProcessStacks]:
    """Stacks of every process in `pid`'s tree, with each one's pid and command name, so the caller can tell
    the test binary from the `cargo`/`sh` wrapper that launched it."""
    out = []
    for member in process_tree(pid):
        threads = capture_stacks(member, kind, detail=detail)
        error = None if threads else "could not read its stacks (it may have exited, or ptrace is not permitted)"
        out.append(ProcessStacks(member, command_name(member), threads, error))
    return out
