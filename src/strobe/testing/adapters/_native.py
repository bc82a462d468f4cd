"""Helpers for the adapters whose tests are a compiled C/C++ binary (Catch2, GoogleTest).

Such a binary can't be recognised by its project files alone, and running an unknown program to see what it
is can be harmful: a GoogleTest binary ignores flags it doesn't know and runs its whole suite, a shell script
may do anything. So a binary is only ever run as a probe after its bytes show the framework's own strings.
"""

from __future__ import annotations

import mmap
import os
import re
import shlex
import shutil
import signal
import subprocess
from pathlib import Path

from strobe.errors import ValidationError
from strobe.testing.model import ProjectInfo

# Magic numbers of executables: ELF, Mach-O (32/64-bit, both byte orders, universal), PE.
_EXECUTABLE_MAGIC = (b"\x7fELF", b"\xcf\xfa\xed\xfe", b"\xce\xfa\xed\xfe", b"\xfe\xed\xfa\xcf", b"\xca\xfe\xba\xbe",
                     b"MZ")
_SOURCE_SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".c++", ".h", ".hh", ".hpp", ".hxx", ".ipp", ".inl"}
_BUILD_FILES = ("CMakeLists.txt", "meson.build", "Makefile", "BUILD", "BUILD.bazel", "conanfile.txt", "vcpkg.json")
_PRUNED_DIRS = {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", "target", ".cache", "CMakeFiles"}
_MAX_FILES_SCANNED = 4000  # detection runs on every debug_test: bound the walk on huge trees
_MAX_BINARY_BYTES = 1 << 30


def split_command(command: str) -> list[str]:
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise ValidationError(f"Could not split `command` {command!r} into arguments ({exc}): check its quotes.") \
            from exc
    if not argv:
        raise ValidationError("`command` is empty: pass the path of the test binary, e.g. `build/tests`.")
    return argv


def executable_path(project_root: Path, program: str) -> Path | None:
    """The file `program` names: a path relative to the project root (or absolute), else a name on PATH."""
    candidate = Path(program).expanduser()
    if not candidate.is_absolute():
        candidate = project_root / candidate
    if candidate.is_file():
        return candidate.resolve()
    if os.sep not in program:
        found = shutil.which(program)
        if found:
            return Path(found)
    return None


def has_markers(path: Path, markers: tuple[bytes, ...]) -> bool:
    """Whether `path` is an executable whose bytes contain one of `markers` (a string the framework compiles
    into every test binary, or the mangled prefix of its symbols when it is linked dynamically)."""
    try:
        size = path.stat().st_size
        if size < 64 or size > _MAX_BINARY_BYTES:
            return False
        with path.open("rb") as handle:
            if not handle.read(4).startswith(_EXECUTABLE_MAGIC):
                return False
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return any(data.find(marker) != -1 for marker in markers)
    except (OSError, ValueError):
        return False


def probe(argv: list[str], cwd: Path, timeout: float = 5.0) -> tuple[int, str] | None:
    """Run a listing/identification command of a test binary: (exit code, stdout+stderr), or None if it
    could not start or took longer than `timeout` (its whole process group is then killed)."""
    try:
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
    except OSError:
        return None
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    return proc.returncode, out.decode(errors="replace")


def _walk(project_root: Path) -> list[Path]:
    """Files under the project, skipping VCS/dependency directories, at most _MAX_FILES_SCANNED."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(project_root):
        dirnames[:] = sorted(d for d in dirnames if d not in _PRUNED_DIRS and not d.startswith("."))
        for name in sorted(filenames):
            found.append(Path(dirpath) / name)
            if len(found) >= _MAX_FILES_SCANNED:
                return found
    return found


def _mentions(path: Path, needles: tuple[str, ...], limit: int = 65536) -> bool:
    try:
        with path.open("rb") as handle:
            head = handle.read(limit).decode(errors="replace")
    except OSError:
        return False
    return any(needle in head for needle in needles)


def build_files_mentioning(project_root: Path, needles: tuple[str, ...]) -> list[Path]:
    """Build files (CMakeLists.txt, meson.build, Makefile, …) that mention one of `needles`."""
    return [p for p in _walk(project_root) if p.name in _BUILD_FILES and _mentions(p, needles)]


def sources_mentioning(project_root: Path, needles: tuple[str, ...], stop_after: int | None = 1) -> list[Path]:
    """C/C++ sources whose first 8 KiB mention one of `needles` (the framework's #include lines)."""
    hits: list[Path] = []
    for path in _walk(project_root):
        if path.suffix.lower() in _SOURCE_SUFFIXES and _mentions(path, needles, limit=8192):  # #includes come first
            hits.append(path)
            if stop_after is not None and len(hits) >= stop_after:
                break
    return hits


def find_binaries(project_root: Path, markers: tuple[bytes, ...]) -> list[Path]:
    """Built test binaries carrying `markers`: in the project root itself and in its build directories
    (build*, cmake-build-*, out, bin), a few levels deep."""
    roots = [p for p in sorted(project_root.iterdir()) if p.is_dir() and (
        p.name.startswith(("build", "cmake-build-", "_build")) or p.name in ("out", "bin"))]
    found = [p for p in sorted(project_root.iterdir()) if p.is_file() and os.access(p, os.X_OK)
             and has_markers(p, markers)]
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            depth = len(Path(dirpath).relative_to(root).parts)
            dirnames[:] = sorted(d for d in dirnames if d not in _PRUNED_DIRS and depth < 3)
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if os.access(path, os.X_OK) and not name.endswith((".so", ".dylib", ".a", ".o")) \
                        and has_markers(path, markers):
                    found.append(path)
    return found


def binary_argv(project_root: Path, command: str | None, markers: tuple[bytes, ...], framework: str) -> list[str]:
    """`command` split into argv with its program resolved to an absolute path; without `command`, the one
    built test binary found under the project. Raises ValidationError saying what to pass otherwise."""
    if command is None:
        binaries = find_binaries(project_root, markers)
        if len(binaries) == 1:
            return [str(binaries[0])]
        if binaries:
            listed = [str(b.relative_to(project_root)) for b in binaries]
            raise ValidationError(f"{framework} tests run from a compiled test binary and this project has several "
                                  f"({', '.join(listed)}): pass `command` with the one to run, e.g. "
                                  f"`command: \"{listed[0]}\"`.")
        raise ValidationError(f"{framework} tests run from a compiled test binary: build the tests, then pass its "
                              f"path as `command` (relative to projectRoot, e.g. `command: \"build/tests\"`). No "
                              f"built {framework} binary was found in the project root or its build directories.")
    argv = split_command(command)
    path = executable_path(project_root, argv[0])
    if path is None:
        raise ValidationError(f"`command` names {argv[0]!r}, which is neither a file under {project_root} nor a "
                              f"program on PATH. Build the tests first (e.g. `cmake --build build`), then pass the "
                              f"test binary's path relative to projectRoot.")
    return [str(path), *argv[1:]]


def describe_exit(code: int) -> str:
    """`exited with code 3` / `was killed by SIGSEGV` (negative codes are signals, as subprocess reports them)."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


# `ns::f(`, `a::B::method (`, `ns::tmpl<int>(`: qualified calls named in an assertion.
_QUALIFIED_CALL = re.compile(r"((?:[A-Za-z_]\w*::)+)~?[A-Za-z_]\w*\s*(?:<[^<>()]*>)?\s*\(")
_LIBRARY_NAMESPACES = ("std::", "testing::", "Catch::", "__gnu_cxx::", "boost::")


def qualified_patterns(text: str | None) -> list[str]:
    """Trace patterns for the user functions a failing assertion calls: `calc::add(x) == 4` -> `calc::*`."""
    out: list[str] = []
    for match in _QUALIFIED_CALL.finditer(text or ""):
        head = match.group(1)
        if head.startswith(_LIBRARY_NAMESPACES):
            continue
        pattern = f"{head}*"
        if pattern not in out:
            out.append(pattern)
    return out


def project_info(project_root: Path, language: str, needles: tuple[str, ...]) -> ProjectInfo:
    """What a C/C++ project that ran no tests looks like: its build system and the sources using the framework."""
    systems = (("CMakeLists.txt", "cmake"), ("meson.build", "meson"), ("Makefile", "make"), ("BUILD.bazel", "bazel"))
    system = next((name for file, name in systems if (project_root / file).is_file()), "unknown")
    files = sources_mentioning(project_root, needles, stop_after=20)
    return ProjectInfo(language=language, build_system=system,
                       test_files=[str(p.relative_to(project_root)) for p in files])
