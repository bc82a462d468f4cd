"""Where a Python project's sources are and the module names they import under.

One exclusion rule serves the function index (`find_sources`) and the `@usercode` pattern (`user_code_test`):
a directory holding a virtualenv (a `pyvenv.cfg` file, whatever the directory is called), `site-packages`,
`dist-packages`, `node_modules` or `__pycache__` is third-party, never the user's code. Indexing also skips
what is never imported from a checkout: hidden directories (`.git`, `.tox`, `.nox`, `.venv`, …), `build/`
and `dist/`.

    >>> module_name("/proj/src/app/models/user.py", ["/proj", "/proj/src"])
    'app.models.user'
    >>> module_name("/proj/src/app/__init__.py", ["/proj/src"])
    'app'
    >>> module_name("/elsewhere/tool.py", ["/proj"])  # a script outside every root: its stem
    'tool'
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

VENV_MARKER = "pyvenv.cfg"
THIRD_PARTY_DIRS = frozenset({"site-packages", "dist-packages", "node_modules", "__pycache__"})
NEVER_IMPORTED_DIRS = frozenset({"build", "dist"})  # plus every hidden directory
SOURCE_SUFFIX = ".py"
MAX_FILES = 20_000  # files indexed per tree; the rest are counted, not parsed
MAX_FILE_BYTES = 2 * 1024 * 1024  # a bigger .py file is generated data, not code worth tracing by name
MAX_WALK_ENTRIES = 500_000  # directory entries looked at per tree: a root like $HOME must not stall the daemon


def is_third_party_dir(path: str) -> bool:
    """Whether the directory `path` holds code that is not the user's: a virtualenv or an installed-packages dir."""
    return os.path.basename(path) in THIRD_PARTY_DIRS or os.path.isfile(os.path.join(path, VENV_MARKER))


def skipped_when_indexing(path: str) -> bool:
    """Whether `find_sources` leaves out the directory `path` (third-party, hidden, build/ or dist/)."""
    name = os.path.basename(path)
    return name.startswith(".") or name in NEVER_IMPORTED_DIRS or is_third_party_dir(path)


def user_code_test(project_root: str) -> Callable[[str | None], bool]:
    """A predicate for `@usercode`: the file is under `project_root` (symlinks resolved) and no directory
    between the root and the file is third-party. Directory answers are remembered by the predicate."""
    root = os.path.realpath(project_root)
    prefix = os.path.join(root, "")
    third_party: dict[str, bool] = {}

    def in_third_party_dir(directory: str) -> bool:
        known = third_party.get(directory)
        if known is None:
            parent = os.path.dirname(directory)
            known = is_third_party_dir(directory) or (parent != root and in_third_party_dir(parent))
            third_party[directory] = known
        return known

    def is_user_file(file: str | None) -> bool:
        if file is None:
            return False
        real = os.path.realpath(file)
        if not real.startswith(prefix):
            return False
        directory = os.path.dirname(real)
        return directory == root or not in_third_party_dir(directory)

    return is_user_file


def default_roots(project_root: str) -> tuple[str, ...]:
    """The import roots of a checkout: the project root, plus `src/` when it is a src-layout (not a package)."""
    root = os.path.abspath(project_root)
    src = os.path.join(root, "src")
    if os.path.isdir(src) and not os.path.isfile(os.path.join(src, "__init__.py")):
        return (root, src)
    return (root,)


def module_name(path: str, roots: Sequence[str]) -> str | None:
    """The dotted name `path` is imported as when `roots` are on sys.path: under the longest root that
    contains it through importable names (`__init__.py` files are optional: namespace packages count);
    a package's `__init__.py` is the package. A file under no root is a script: its stem.
    None for a file that is not a `.py` source."""
    file = os.path.abspath(path)
    directory, base = os.path.split(file)
    if not base.endswith(SOURCE_SUFFIX) or base == SOURCE_SUFFIX:
        return None
    stem = base[: -len(SOURCE_SUFFIX)]
    for root in sorted({os.path.abspath(r) for r in roots}, key=len, reverse=True):
        if not file.startswith(os.path.join(root, "")):
            continue
        parts = os.path.relpath(directory, root).split(os.sep) if directory != root else []
        if stem != "__init__" or not parts:
            parts.append(stem)
        if all(part.isidentifier() for part in parts):
            return ".".join(parts)
    return stem


@dataclass
class SourceFiles:
    """The `.py` files of a tree, in a deterministic order, and what was left out and why."""

    files: list[tuple[str, int, int]] = field(default_factory=list)  # (absolute path, size, mtime_ns)
    too_large: list[str] = field(default_factory=list)
    over_limit: int = 0  # .py files found after `max_files` were taken
    unreadable: list[str] = field(default_factory=list)  # directories or files that could not be listed/stat'ed
    walk_truncated: bool = False  # stopped after MAX_WALK_ENTRIES entries: there may be more files

    @property
    def skipped(self) -> int:
        return len(self.too_large) + self.over_limit


def find_sources(
    root: str,
    *,
    max_files: int = MAX_FILES,
    max_file_bytes: int = MAX_FILE_BYTES,
    max_entries: int = MAX_WALK_ENTRIES,
) -> SourceFiles:
    """Every `.py` file under `root` that is not in a skipped directory (`skipped_when_indexing`), sorted
    directory by directory; symlinked directories are not followed. At most `max_files` files of at most
    `max_file_bytes` are returned; the others are counted in the result."""
    found = SourceFiles()
    entries = 0

    def unreadable(error: OSError) -> None:
        found.unreadable.append(str(error.filename))

    for directory, dirnames, filenames in os.walk(os.path.abspath(root), onerror=unreadable):
        entries += len(dirnames) + len(filenames)
        if entries > max_entries:
            found.walk_truncated = True
            break
        dirnames[:] = sorted(d for d in dirnames if not skipped_when_indexing(os.path.join(directory, d)))
        for name in sorted(filenames):
            if not name.endswith(SOURCE_SUFFIX):
                continue
            path = os.path.join(directory, name)
            if len(found.files) >= max_files:
                found.over_limit += 1
                continue
            try:
                stat = os.stat(path)
            except OSError:
                found.unreadable.append(path)
                continue
            if stat.st_size > max_file_bytes:
                found.too_large.append(path)
            else:
                found.files.append((path, stat.st_size, stat.st_mtime_ns))
    return found
