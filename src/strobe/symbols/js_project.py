"""A JavaScript/TypeScript project's functions: every source file under a root indexed with
`js_index.index_source`, bounded, with what was left out and why.

    index = index_project(Path("/proj"))            # every .js .cjs .mjs .jsx .ts .mts .cts .tsx outside
    index.skipped                                   #   node_modules and dot-directories, bounded
    # (("/proj/src/broken.js", "syntax error at line 4, column 9 ..."), ...)
    index.at(index.matching(re.compile("auth.log.*")))   # a pattern matches `name` or `module.name`
    index_package(find_package(Path("/proj"), "semver"), "semver")   # an installed package, module "semver"
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from re import Pattern

from strobe.symbols.js_index import JsFunction, JsSourceError, dialect_of, index_source
from strobe.symbols.source_maps import source_map_of

DECLARATION_SUFFIXES = (".d.ts", ".d.mts", ".d.cts")  # types only: no function has a body
MAX_FILES = 20_000  # source files indexed per project; the walk stops there
MAX_FILE_BYTES = 1024 * 1024  # bigger files are bundles or generated code, not what a user traces by name


@dataclass(frozen=True, eq=False)
class JsIndex:
    """The functions of a project, file by file in walk order, each file's in source order, with what was
    left out: `skipped` (path, reason) per file, `notes` for limits that cut the walk short.

    Offers what `patterns.Pattern.positions` needs (`matching`, `matching_files`)."""

    functions: tuple[JsFunction, ...]
    skipped: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    files: int = 0  # files indexed
    _by_file: dict[str, list[int]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        by_file: dict[str, list[int]] = {}
        for position, function in enumerate(self.functions):
            by_file.setdefault(function.file, []).append(position)
            if function.source is not None and function.source != function.file:
                by_file.setdefault(function.source, []).append(position)
        object.__setattr__(self, "_by_file", by_file)

    def matching(self, pattern: Pattern[str]) -> list[int]:
        """Positions of the functions whose whole `name` (`Class.method`, `func`) or module-qualified name
        (`auth.login`, the module being `js_index.module_of` the file) matches `pattern`."""
        match = pattern.fullmatch
        return [i for i, f in enumerate(self.functions) if match(f.name) or match(f"{f.module}.{f.name}")]

    def matching_files(self, predicate: Callable[[str | None], bool]) -> list[int]:
        """Positions of the functions whose file, or the source their source map names, satisfies `predicate`,
        called once per file."""
        return sorted({p for file, positions in self._by_file.items() if predicate(file) for p in positions})

    def at(self, positions: Sequence[int]) -> list[JsFunction]:
        return [self.functions[position] for position in positions]

    def __len__(self) -> int:
        return len(self.functions)


def _source_files(root: str, include_node_modules: bool, max_files: int) -> tuple[list[str], bool]:
    """The JS/TS files under `root` in walk order (a directory's files by name, then its subdirectories by
    name; dot-directories and, unless asked, node_modules left out; symlinked directories not followed), and
    whether `max_files` cut the list short."""
    files: list[str] = []
    for directory, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and (include_node_modules or d != "node_modules"))
        for name in sorted(names):
            if dialect_of(name) is None or name.endswith(DECLARATION_SUFFIXES):
                continue
            if len(files) == max_files:
                return files, True
            files.append(os.path.join(directory, name))
    return files, False


def _size(count: int) -> str:
    return f"{count / 1024:.0f} KiB" if count < 1024 * 1024 else f"{count / 1024 / 1024:.1f} MiB"


def index_project(
    root: Path,
    *,
    include_node_modules: bool = False,
    max_files: int = MAX_FILES,
    max_file_bytes: int = MAX_FILE_BYTES,
) -> JsIndex:
    """Index every .js .cjs .mjs .jsx .ts .mts .cts .tsx file under `root`, except `.d.ts` files, dot-directories
    (.git, .next, .cache, …) and node_modules (unless `include_node_modules`). `dist/` and `build/` are indexed:
    compiled output is what `node dist/index.js` runs. Files over `max_file_bytes` (bundles, generated code),
    unreadable, not UTF-8 or with a syntax error are listed in `skipped`; the walk stops after `max_files`
    files, which a note says. A leading BOM is dropped, as Node's CommonJS loader does."""
    top = os.path.abspath(root)
    paths, truncated = _source_files(top, include_node_modules, max_files)
    functions: list[JsFunction] = []
    skipped: list[tuple[str, str]] = []
    notes: list[str] = []
    indexed = 0
    for path in paths:
        try:
            size = os.path.getsize(path)
            if size > max_file_bytes:
                skipped.append((path, f"{_size(size)}, over the {_size(max_file_bytes)} limit: a bundle or generated "
                                      "code, not indexed"))  # fmt: skip
                continue
            with open(path, "rb") as source:
                text = source.read().decode("utf-8").removeprefix("\ufeff")
            found = index_source(text, path)
            functions += _mapped(found, path, text, notes) if "sourceMappingURL" in text and found else found
            indexed += 1
        except JsSourceError as error:
            skipped.append((path, error.reason))
        except UnicodeDecodeError as error:
            skipped.append((path, f"not UTF-8 ({error.reason} at byte {error.start}): not indexed; save it as UTF-8"))
        except OSError as error:
            skipped.append((path, f"cannot be read ({error.strerror or error}): not indexed; check its permissions"))
    if truncated:
        notes.append(
            f"Stopped after the first {max_files} source files under {top}: files after them (in walk order) were "
            "not indexed. Point the project root at the application's own directory."
        )
    if not paths:
        where = "" if include_node_modules else " outside node_modules"
        notes.append(f"No .js/.cjs/.mjs/.jsx/.ts/.mts/.cts/.tsx file under {top}{where} and dot-directories.")
    return JsIndex(tuple(functions), tuple(skipped), tuple(notes), indexed)


def _mapped(functions: list[JsFunction], path: str, text: str, notes: list[str]) -> list[JsFunction]:
    """Compiled functions with the source file and line their file's source map gives (unchanged when it has
    none; a map that cannot be used is noted)."""
    found = source_map_of(Path(path), text)
    if found is None:
        return functions
    if isinstance(found, str):
        notes.append(f"{path}: {found}; its functions are shown at their lines in it")
        return functions
    mapped = []
    for function in functions:
        origin = found.original(function.line, function.column)
        mapped.append(function if origin is None else
                      dataclasses.replace(function, source=origin[0], source_line=origin[1]))
    return mapped


MAX_PACKAGE_FILES = 2_000  # source files indexed per npm package
_PACKAGE_NAME = re.compile(r"(@[a-z0-9][\w.-]*/)?[a-z0-9][\w.-]*", re.IGNORECASE)  # npm names, scoped too


def find_package(root: Path, name: str) -> Path | None:
    """The directory of package `name` as Node resolves it from `root`: the first `node_modules/<name>` holding a
    package.json in `root` or a directory above it, with symlinks resolved (npm link, pnpm: Node runs the files
    at their real paths); None if there is none."""
    if _PACKAGE_NAME.fullmatch(name) is None:
        return None
    directory = Path(os.path.abspath(root))
    for place in (directory, *directory.parents):
        candidate = place / "node_modules" / name
        if (candidate / "package.json").is_file():
            return Path(os.path.realpath(candidate))
    return None


def index_package(directory: Path, name: str) -> JsIndex:
    """The functions of an installed package, its module named after the package (`semver.compare`, whatever
    file defines it); its own node_modules are left out, as for a project, and the walk stops after
    MAX_PACKAGE_FILES files."""
    found = index_project(directory, max_files=MAX_PACKAGE_FILES)
    renamed = tuple(dataclasses.replace(function, module=name) for function in found.functions)
    return JsIndex(renamed, found.skipped, found.notes, found.files)
