"""The functions of a Python project, found from source with `ast` before anything is imported.

Every code object CPython makes for a `def`, `async def` or `lambda` is one `PythonFunction`, carrying
both the name a user writes in a trace pattern and the keys a tracer sees on the live code object:

    name        app.models.User.save          app.jobs.run.retry        app.jobs.run.<lambda:12>
    qualname    User.save                     run.<locals>.retry        run.<locals>.<lambda>   (== co_qualname)
    first_line  the first decorator's line for a decorated function     (== co_firstlineno)
    params      posonly, positional, keyword-only, *args, **kwargs, names mangled in classes (== co_varnames[:n])

`name` is the module plus the enclosing classes and functions (`<locals>` left out); a lambda is named
after its line, `<lambda:12>`, and the k-th lambda on that line in the same scope `<lambda:12:k>`.
Class bodies, comprehensions and generator expressions are not functions here. `qualname` follows
the target interpreter (`python=`): before 3.12 a lambda inside a list comprehension is
`run.<locals>.<listcomp>.<lambda>`, from 3.12 on (comprehensions inlined) `run.<locals>.<lambda>`.

    index = index_tree("/proj")                 # every .py under /proj (src/ layout understood)
    index.lookup("/proj/app/jobs.py", 10, "run.<locals>.retry")   # the function a code object is
    parse_python_pattern("app.jobs.**", "/proj").positions(index)  # see patterns.py

Sources are parsed with the daemon's interpreter: syntax newer than it cannot be indexed, and such a file
is reported in the warnings like any file that does not parse, never raised.
"""

from __future__ import annotations

import ast
import os
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter
from re import Pattern

from strobe.symbols.python_paths import (
    MAX_FILE_BYTES,
    MAX_FILES,
    default_roots,
    find_sources,
    module_name,
)

HOST_VERSION: tuple[int, int] = (sys.version_info.major, sys.version_info.minor)
_INLINED_COMPREHENSIONS_SINCE = (3, 12)  # PEP 709: list/set/dict comprehensions make no code object


@dataclass(frozen=True, slots=True)
class PythonFunction:
    name: str  # what patterns match: "pkg.mod.Class.method", "pkg.mod.outer.inner", "pkg.mod.<lambda:5>"
    qualname: str  # the code object's co_qualname: "Class.method", "outer.<locals>.inner", "<lambda>"
    module: str  # dotted module name: "pkg.mod"
    file: str  # absolute path
    line: int  # the `def` / `lambda` line
    first_line: int  # co_firstlineno: the first decorator's line when decorated
    end_line: int
    is_async: bool  # `async def` (a coroutine, or an async generator when is_generator)
    is_generator: bool  # yields at its own level (nested functions do not count)
    params: tuple[str, ...]  # co_varnames order: posonly, positional, keyword-only, *args, **kwargs


_FUNCTION, _LAMBDA, _CLASS, _MODULE, _COMPREHENSION = "function", "lambda", "class", "module", "comprehension"
_COMPREHENSION_NAMES: dict[type[ast.AST], str] = {
    ast.ListComp: "<listcomp>",
    ast.SetComp: "<setcomp>",
    ast.DictComp: "<dictcomp>",
    ast.GeneratorExp: "<genexpr>",
}
_Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


@dataclass(eq=False, slots=True)
class _Scope:
    """One scope of the source: where a name and a qualname are built and where `global` and `yield` count."""

    node: ast.AST
    kind: str
    qualname: str  # "" for the module
    qual_kind: str  # the kind that decides ".<locals>": an inlined comprehension takes its parent's
    private: str | None  # the class name private names are mangled with
    name_parent: _Scope | None  # the nearest enclosing function, lambda, class or module
    segment: str = ""
    name: str = ""
    globals: set[str] = field(default_factory=set)
    yields: bool = False
    children: list[ast.AST] = field(default_factory=list)


def _mangle(private: str | None, name: str) -> str:
    """CPython's private name mangling (`__x` in class `_C` is `_C__x`)."""
    if private is None or not name.startswith("__") or name.endswith("__") or "." in name:
        return name
    stripped = private.lstrip("_")
    return f"_{stripped}{name}" if stripped else name


def _annotations(arguments: ast.arguments) -> list[ast.AST]:
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
    return [arg.annotation for arg in every if arg is not None and arg.annotation is not None]


def _outside_parts(node: ast.AST, postponed_annotations: bool) -> list[ast.AST]:
    """What a definition evaluates in the enclosing scope: decorators, defaults, bases, annotations,
    a comprehension's first iterable."""
    parts: list[ast.AST] = []
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        parts += node.decorator_list + node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
        if not postponed_annotations:
            parts += _annotations(node.args) + ([node.returns] if node.returns is not None else [])
    elif isinstance(node, ast.Lambda):
        parts += node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
    elif isinstance(node, ast.ClassDef):
        parts += [*node.decorator_list, *node.bases, *node.keywords]
    elif isinstance(node, ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
        parts.append(node.generators[0].iter)
    return parts


def _inside_parts(node: ast.AST) -> list[ast.AST]:
    """What a scope evaluates itself."""
    if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return list(node.body)
    if isinstance(node, ast.Lambda):
        return [node.body]
    if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
        elements: list[ast.AST] = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        first, *others = node.generators
        return [*elements, first.target, *first.ifs, *others]
    return []


def _scan(scope: _Scope, postponed_annotations: bool) -> None:
    """Fill `globals`, `yields` and `children` from the nodes evaluated at the scope's own level."""
    stack = _inside_parts(scope.node)[::-1]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef) or (
            type(node) in _COMPREHENSION_NAMES
        ):
            scope.children.append(node)
            stack += _outside_parts(node, postponed_annotations)[::-1]
            continue
        if isinstance(node, ast.Global):
            scope.globals.update(node.names)
        elif isinstance(node, ast.Yield | ast.YieldFrom):
            scope.yields = True
        if isinstance(node, ast.AnnAssign):  # CPython evaluates annotations in modules and classes only
            annotation = [node.annotation] if scope.kind in (_MODULE, _CLASS) and not postponed_annotations else []
            stack += [part for part in (node.value, *annotation, node.target) if part is not None]
            continue
        stack += list(ast.iter_child_nodes(node))[::-1]


def _child_scope(parent: _Scope, node: ast.AST, python: tuple[int, int]) -> _Scope:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        kind, own = (_CLASS if isinstance(node, ast.ClassDef) else _FUNCTION), node.name
    elif isinstance(node, ast.Lambda):
        kind, own = _LAMBDA, "<lambda>"
    else:
        kind, own = _COMPREHENSION, _COMPREHENSION_NAMES[type(node)]
    name_parent = parent if parent.kind != _COMPREHENSION else parent.name_parent
    if kind == _COMPREHENSION and python >= _INLINED_COMPREHENSIONS_SINCE and not isinstance(node, ast.GeneratorExp):
        return _Scope(node, kind, parent.qualname, parent.qual_kind, parent.private, name_parent)
    if kind in (_FUNCTION, _CLASS) and own in parent.globals:
        qualname = own  # `global f` in the enclosing scope: CPython drops the prefix, and f is a module attribute
        while name_parent is not None and name_parent.name_parent is not None:
            name_parent = name_parent.name_parent
    elif parent.qual_kind == _MODULE:
        qualname = own
    elif parent.qual_kind in (_FUNCTION, _LAMBDA):
        qualname = f"{parent.qualname}.<locals>.{own}"
    else:
        qualname = f"{parent.qualname}.{own}"
    private = own if kind == _CLASS else parent.private
    return _Scope(node, kind, qualname, kind, private, name_parent, segment=own)


def _params(arguments: ast.arguments, private: str | None) -> tuple[str, ...]:
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
    return tuple(_mangle(private, arg.arg) for arg in every if arg is not None)


def _name_lambdas(lambdas: list[_Scope]) -> None:
    """`<lambda:LINE>`, and `<lambda:LINE:K>` for the K-th (by column) on that line under the same name."""
    groups: dict[tuple[int, int], list[_Scope]] = {}
    for scope in lambdas:
        assert isinstance(scope.node, ast.Lambda)
        groups.setdefault((id(scope.name_parent), scope.node.lineno), []).append(scope)
    for (_, line), group in groups.items():
        group.sort(key=lambda scope: getattr(scope.node, "col_offset", 0))
        for ordinal, scope in enumerate(group, start=1):
            scope.segment = f"<lambda:{line}>" if ordinal == 1 else f"<lambda:{line}:{ordinal}>"


def _functions(tree: ast.Module, file: str, module: str, python: tuple[int, int]) -> list[PythonFunction]:
    future = [node for node in tree.body if isinstance(node, ast.ImportFrom) and node.module == "__future__"]
    postponed = any(alias.name == "annotations" for node in future for alias in node.names)  # no annotation compiled
    root = _Scope(tree, _MODULE, "", _MODULE, None, None, name=module)
    scopes = [root]
    for scope in scopes:  # grows while iterated: parents before children
        _scan(scope, postponed)
        scopes += [_child_scope(scope, child, python) for child in scope.children]
    _name_lambdas([scope for scope in scopes if scope.kind == _LAMBDA])
    found: list[tuple[int, int, PythonFunction]] = []
    for scope in scopes[1:]:
        if scope.kind == _COMPREHENSION:
            continue
        assert scope.name_parent is not None
        parent_name = scope.name_parent.name
        scope.name = f"{parent_name}.{scope.segment}" if parent_name else scope.segment
        node = scope.node
        if isinstance(node, _Definition):
            decorators = node.decorator_list if not isinstance(node, ast.Lambda) else []
            found.append((node.lineno, node.col_offset, PythonFunction(
                name=scope.name,
                qualname=scope.qualname,
                module=module,
                file=file,
                line=node.lineno,
                first_line=decorators[0].lineno if decorators else node.lineno,
                end_line=node.end_lineno or node.lineno,
                is_async=isinstance(node, ast.AsyncFunctionDef),
                is_generator=scope.yields,
                params=_params(node.args, scope.private),
            )))
    found.sort(key=lambda entry: (entry[0], entry[1]))
    return [function for _, _, function in found]


def _parse_warning(file: str, error: Exception) -> str:
    if isinstance(error, SyntaxError) and "unicode error" not in str(error.msg) and "encoding" not in str(error.msg):
        where = f"{file}:{error.lineno}" if error.lineno else file
        return (
            f"{where}: not indexed, Python {HOST_VERSION[0]}.{HOST_VERSION[1]} cannot parse it ({error.msg}). "
            "Its functions cannot be selected by name until it parses; syntax newer than the daemon's Python "
            "is not understood."
        )
    if isinstance(error, OSError):
        return f"{file}: not indexed, it cannot be read ({error.strerror or error}). Check its permissions."
    return (
        f"{file}: not indexed, its bytes are not valid source text ({error}). Save it as UTF-8 or declare its "
        "encoding with a '# -*- coding: ... -*-' line."
    )


def index_source(
    source: str | bytes,
    file: str,
    module: str,
    *,
    python: tuple[int, int] = HOST_VERSION,
    warnings: list[str] | None = None,
) -> list[PythonFunction]:
    """The functions defined in `source` (the text of `file`, imported as `module`), in source order, with
    qualnames as interpreter `python` (major, minor) makes them. Source that does not parse gives no functions
    and one message appended to `warnings`; nothing is raised. Bytes are decoded as Python does (PEP 263)."""
    try:
        tree = ast.parse(source, filename=file)
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError) as error:
        if warnings is not None:
            warnings.append(_parse_warning(file, error))
        return []
    return _functions(tree, os.path.abspath(file), module, python)


def index_file(
    path: str,
    module: str,
    *,
    python: tuple[int, int] = HOST_VERSION,
    warnings: list[str] | None = None,
) -> list[PythonFunction]:
    """`index_source` over the file at `path`; an unreadable file is a warning too."""
    try:
        with open(path, "rb") as source:
            data = source.read()
    except OSError as error:
        if warnings is not None:
            warnings.append(_parse_warning(path, error))
        return []
    return index_source(data, path, module, python=python, warnings=warnings)


@dataclass(frozen=True, slots=True)
class _Entry:
    stamp: tuple[int, int, str, tuple[int, int]]  # size, mtime_ns, module, python
    functions: tuple[PythonFunction, ...]
    warnings: tuple[str, ...]


class SourceCache:
    """The functions of files already indexed, by path, valid while (size, mtime_ns) and the module name and
    target version stay the same; the oldest of more than `max_files` are dropped. `parses` counts the
    files actually read and parsed. Safe to share between threads."""

    def __init__(self, max_files: int = 4 * MAX_FILES) -> None:
        self.max_files = max_files
        self.parses = 0
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def functions(
        self, path: str, size: int, mtime_ns: int, module: str, python: tuple[int, int], warnings: list[str]
    ) -> tuple[PythonFunction, ...]:
        stamp = (size, mtime_ns, module, python)
        with self._lock:
            entry = self._entries.get(path)
            if entry is not None and entry.stamp == stamp:
                self._entries.move_to_end(path)
                warnings += entry.warnings
                return entry.functions
            self.parses += 1
        own: list[str] = []
        entry = _Entry(stamp, tuple(index_file(path, module, python=python, warnings=own)), tuple(own))
        with self._lock:
            self._entries[path] = entry
            self._entries.move_to_end(path)
            while len(self._entries) > self.max_files:
                self._entries.popitem(last=False)
        warnings += own
        return entry.functions

    def __len__(self) -> int:
        return len(self._entries)


SHARED_CACHE = SourceCache()


@dataclass(frozen=True, eq=False)
class PythonIndex:
    """The functions of a Python tree, file by file in path order, each file's in source order.

    Offers what `patterns.Pattern.positions` needs (`matching`, `matching_files`) and what a tracer needs to
    name a live code object (`lookup`)."""

    functions: tuple[PythonFunction, ...]
    warnings: tuple[str, ...] = ()
    files: int = 0  # files parsed or taken from the cache
    skipped_files: int = 0  # too large or over the file limit (see warnings)
    _by_key: dict[tuple[str, int, str], tuple[PythonFunction, ...]] = field(init=False, repr=False)
    _by_file: dict[str, list[int]] = field(init=False, repr=False)
    _real_files: dict[str, str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        by_key: dict[tuple[str, int, str], list[PythonFunction]] = {}
        by_file: dict[str, list[int]] = {}
        for position, function in enumerate(self.functions):
            by_key.setdefault((function.file, function.first_line, function.qualname), []).append(function)
            by_file.setdefault(function.file, []).append(position)
        object.__setattr__(self, "_by_key", {key: tuple(found) for key, found in by_key.items()})
        object.__setattr__(self, "_by_file", by_file)
        object.__setattr__(self, "_real_files", {os.path.realpath(file): file for file in by_file})

    def matching(self, pattern: Pattern[str]) -> list[int]:
        """Positions of the functions whose whole `name` matches `pattern`."""
        names = map(attrgetter("name"), self.functions)
        return list(compress(range(len(self.functions)), map(pattern.fullmatch, names)))

    def matching_files(self, predicate: Callable[[str | None], bool]) -> list[int]:
        """Positions of the functions whose file satisfies `predicate`, called once per file."""
        return sorted(p for file, positions in self._by_file.items() if predicate(file) for p in positions)

    def at(self, positions: Sequence[int]) -> list[PythonFunction]:
        return [self.functions[position] for position in positions]

    def lookup(self, file: str, first_line: int, qualname: str) -> tuple[PythonFunction, ...]:
        """The functions a code object with this co_filename, co_firstlineno and co_qualname can be: one, or
        several lambdas written on the same line; empty when the file or function is not indexed."""
        path = os.path.abspath(file)
        if path not in self._by_file:
            path = self._real_files.get(os.path.realpath(file), path)
        return self._by_key.get((path, first_line, qualname), ())

    def file_names(self) -> list[str]:
        """The absolute paths of the files that define functions."""
        return list(self._by_file)

    def __len__(self) -> int:
        return len(self.functions)


def index_tree(
    root: str,
    roots: Sequence[str] | None = None,
    *,
    python: tuple[int, int] = HOST_VERSION,
    cache: SourceCache = SHARED_CACHE,
    max_files: int = MAX_FILES,
    max_file_bytes: int = MAX_FILE_BYTES,
) -> PythonIndex:
    """Index every `.py` file under `root` (see `python_paths.find_sources` for what is skipped), named as
    imported with `roots` on sys.path (default: `root`, and `root/src` for a src-layout). Files unchanged
    since `cache` saw them are not parsed again."""
    import_roots = tuple(roots) if roots is not None else default_roots(root)
    sources = find_sources(root, max_files=max_files, max_file_bytes=max_file_bytes)
    warnings: list[str] = []
    functions: list[PythonFunction] = []
    for path, size, mtime_ns in sources.files:
        module = module_name(path, import_roots) or os.path.basename(path)
        functions += cache.functions(path, size, mtime_ns, module, python, warnings)
    if sources.too_large:
        shown = ", ".join(sources.too_large[:3]) + (", …" if len(sources.too_large) > 3 else "")
        warnings.append(
            f"{len(sources.too_large)} file(s) larger than {max_file_bytes // 1024} KiB were not indexed ({shown}); "
            "their functions cannot be selected by name."
        )
    if sources.over_limit:
        warnings.append(
            f"{sources.over_limit} .py file(s) beyond the first {max_files} were not indexed. Point projectRoot "
            "at the application's own directory so that its files come first."
        )
    if sources.walk_truncated:
        warnings.append(
            f"Stopped listing {root} after too many directory entries; files not reached were not indexed. "
            "Point projectRoot at the application's own directory."
        )
    if sources.unreadable:
        shown = ", ".join(sources.unreadable[:3]) + (", …" if len(sources.unreadable) > 3 else "")
        warnings.append(f"{len(sources.unreadable)} path(s) could not be listed (missing, or no permission): {shown}")
    return PythonIndex(tuple(functions), tuple(warnings), len(sources.files), sources.skipped)
