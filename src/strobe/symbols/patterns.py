"""Trace patterns: globs over demangled, qualified function names, plus @usercode and @file:.

    foo::bar            exactly foo::bar (and plain C names: processCommand)
    foo::*              direct children of foo     (* never crosses "::")
    foo::**             any descendant of foo      (** crosses "::")
    *::validate         validate one level down
    auth::**::validate  auth::validate, auth::user::validate, ...
    @usercode           every function declared in a file under projectRoot
    @file:parser.cpp    every function declared in a file whose path contains "parser.cpp"

Python patterns (`parse_python_pattern`) are the same globs with "." as the separator, over the names of
`python_index.PythonFunction`:

    app.jobs.run        exactly that function (app.jobs.Worker.run for a method)
    app.*               direct children of app   (* never crosses ".")
    app.**              anything under app
    *.validate          validate one level down; **.validate at any depth; app.**.validate under app
    app.jobs.run.<lambda*>   the lambdas defined in run (named <lambda:LINE>)
    @usercode           functions in files under projectRoot, outside virtualenvs and installed packages
    @file:jobs.py       functions in files whose path contains "jobs.py"
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from strobe.errors import InvalidPattern
from strobe.symbols.python_paths import user_code_test

MAX_PATTERN_LENGTH = 512
NATIVE_SEPARATOR = "::"
PYTHON_SEPARATOR = "."
_PYTHON_SEGMENT = re.compile(r"(?:[\w*-]|<[\w:*]*>)+")
_PYTHON_FORMS = (
    "a Python pattern is a dotted name with globs: 'pkg.mod.func', 'pkg.mod.Class.method', 'pkg.*' (direct "
    "children), 'pkg.**' (any depth), '*.validate', '**.validate', 'pkg.**.validate', or '@usercode' / "
    "'@file:app.py'"
)


class NamedFunction(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def file(self) -> str | None: ...


class SearchableIndex(Protocol):
    """What a function index offers to select functions without looking at each one in Python
    (`strobe.symbols.index.FunctionIndex`): positions, in index order."""

    def matching(self, pattern: re.Pattern[str]) -> list[int]: ...

    def matching_files(self, predicate: Callable[[str | None], bool]) -> list[int]: ...


@dataclass(frozen=True)
class Pattern:
    """One parsed pattern. It tests exactly one thing: the whole name against `name_regex` (globs), or the
    declaring file with `file_test` (@usercode, @file:, called with None when the file is unknown)."""

    text: str
    name_regex: re.Pattern[str] | None = None
    file_test: Callable[[str | None], bool] | None = None

    def matches(self, function: NamedFunction) -> bool:
        if self.name_regex is not None:
            return self.name_regex.fullmatch(function.name) is not None
        assert self.file_test is not None
        return self.file_test(function.file)

    def positions(self, index: SearchableIndex) -> list[int]:
        """Positions of the functions of `index` this pattern matches, in index order: the same functions
        `matches` accepts, found over the index's name column or once per distinct file."""
        if self.name_regex is not None:
            return index.matching(self.name_regex)
        assert self.file_test is not None
        return index.matching_files(self.file_test)


def _glob_to_regex(glob: str, separator: str) -> str:
    """`*` matches within one name part, `**` across parts; `sep**sep` also matches a single separator and a
    leading `**sep` nothing at all (so `**::f` / `**.f` match a top-level `f`)."""
    sep = re.escape(separator)
    deep_middle, deep_start, deep_end = f"{separator}**{separator}", f"**{separator}", f"{separator}**"
    out: list[str] = []
    i = 0
    n = len(glob)
    while i < n:
        if glob.startswith(deep_middle, i):
            out.append(f"{sep}(?:.*{sep})?")
            i += len(deep_middle)
        elif i == 0 and glob.startswith(deep_start):
            out.append(f"(?:.*{sep})?")
            i += len(deep_start)
        elif glob.startswith(deep_end, i) and i + len(deep_end) == n:
            out.append(f"{sep}.+")
            i += len(deep_end)
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append(f"(?:(?!{sep}).)*")
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)


@lru_cache(maxsize=1024)
def _compiled(glob: str, separator: str = NATIVE_SEPARATOR) -> re.Pattern[str]:
    return re.compile(_glob_to_regex(glob, separator), re.DOTALL)


def _checked_text(text: str, example: str) -> None:
    """The checks every flavour shares: not empty, no surrounding whitespace, not too long."""
    if not text or not text.strip():
        raise InvalidPattern(f"Invalid trace pattern '': a pattern cannot be empty. Example: '{example}'.")
    if text != text.strip():
        raise InvalidPattern(f"Invalid trace pattern '{text}': remove the surrounding whitespace.")
    if len(text) > MAX_PATTERN_LENGTH:
        raise InvalidPattern(f"Invalid trace pattern '{text[:40]}…': longer than {MAX_PATTERN_LENGTH} characters.")


def _directive(
    text: str, project_root: str | None, usercode: Callable[[str], Callable[[str | None], bool]], example_file: str
) -> Pattern | None:
    """@usercode (its file test made by `usercode` from the project root) and @file:; None for a glob."""
    if text == "@usercode":
        if not project_root:
            raise InvalidPattern("Invalid trace pattern '@usercode': it needs the session's projectRoot.")
        return Pattern(text, file_test=usercode(project_root))
    if text.startswith("@file:"):
        needle = text[len("@file:") :]
        if not needle:
            raise InvalidPattern(
                f"Invalid trace pattern '@file:': name a file (or part of its path), e.g. '@file:{example_file}'."
            )
        return Pattern(text, file_test=lambda file: file is not None and needle in file)
    if text.startswith("@"):
        raise InvalidPattern(
            f"Invalid trace pattern '{text}': unknown directive. Use '@usercode' or '@file:<part of a path>'."
        )
    if "***" in text:
        raise InvalidPattern(f"Invalid trace pattern '{text}': '***' is ambiguous; use '*' (one level) or '**'.")
    return None


def _native_usercode(project_root: str) -> Callable[[str | None], bool]:
    root = os.path.join(os.path.realpath(project_root), "")

    def in_project(file: str | None) -> bool:
        return file is not None and os.path.realpath(file).startswith(root)

    return in_project


def parse_pattern(text: str, project_root: str | None) -> Pattern:
    """Validate and compile one native pattern; raises InvalidPattern saying what is wrong and what works."""
    _checked_text(text, "myapp::parse_*")
    directive = _directive(text, project_root, _native_usercode, "parser.cpp")
    if directive is not None:
        return directive
    if text.startswith("::") or text.endswith("::") or ":::" in text:
        raise InvalidPattern(
            f"Invalid trace pattern '{text}': '::' must separate two name parts, e.g. 'ns::func' or 'ns::*'."
        )
    return Pattern(text, name_regex=_compiled(text, NATIVE_SEPARATOR))


def parse_python_pattern(text: str, project_root: str | None) -> Pattern:
    """Validate and compile one pattern over Python function names (`python_index.PythonFunction.name`);
    raises InvalidPattern saying what is wrong and what works."""
    _checked_text(text, "myapp.parse_*")
    directive = _directive(text, project_root, user_code_test, "app.py")
    if directive is not None:
        return directive
    if "::" in text:
        dotted = text.replace("::", ".")
        raise InvalidPattern(
            f"Invalid trace pattern '{text}': Python names are separated by '.', not '::'. Did you mean '{dotted}'?"
        )
    if "/" in text or "\\" in text:
        raise InvalidPattern(
            f"Invalid trace pattern '{text}': that is a path; select a file's functions with '@file:{text}'."
        )
    parts = text.split(PYTHON_SEPARATOR)
    if "" in parts:
        raise InvalidPattern(
            f"Invalid trace pattern '{text}': '.' must separate two name parts, e.g. 'pkg.mod.func' or 'pkg.*'."
        )
    if ":" in re.sub(r"<[^<>]*>", "", text):  # the entry-point spelling 'pkg.mod:func'
        dotted = re.sub(r":(?![^<]*>)", ".", text)
        raise InvalidPattern(f"Invalid trace pattern '{text}': write 'module.function', e.g. '{dotted}'.")
    for part in parts:
        if _PYTHON_SEGMENT.fullmatch(part) is None:
            raise InvalidPattern(f"Invalid trace pattern '{text}': '{part}' is not a name part; {_PYTHON_FORMS}.")
    return Pattern(text, name_regex=_compiled(text, PYTHON_SEPARATOR))


_JS_SEGMENT = re.compile(r"[\w$*#-]+")
_JS_FORMS = (
    "a JavaScript pattern is a dotted name with globs: 'func', 'Class.method', 'module.func' (module: the file's "
    "name without extension, or an installed package's name), 'Class.*', '**.validate', or '@usercode' / "
    "'@file:src/auth.js'"
)


def _js_usercode(project_root: str) -> Callable[[str | None], bool]:
    """The project's own files: under the root, not in a node_modules directory."""
    in_project = _native_usercode(project_root)

    def own(file: str | None) -> bool:
        return in_project(file) and f"{os.sep}node_modules{os.sep}" not in (file or "")

    return own


def parse_js_pattern(text: str, project_root: str | None) -> Pattern:
    """Validate and compile one pattern over JavaScript function names (`js_index.JsFunction.name`, or with its
    module in front); raises InvalidPattern saying what is wrong and what works."""
    _checked_text(text, "auth.login")
    directive = _directive(text, project_root, _js_usercode, "src/auth.js")
    if directive is not None:
        return directive
    if "::" in text:
        raise InvalidPattern(f"Invalid trace pattern '{text}': JavaScript names are separated by '.', not '::'. "
                             f"Did you mean '{text.replace('::', '.')}'?")
    if "/" in text or "\\" in text:
        raise InvalidPattern(f"Invalid trace pattern '{text}': that is a path; select a file's functions with "
                             f"'@file:{text}'.")
    parts = text.split(PYTHON_SEPARATOR)
    if "" in parts:
        raise InvalidPattern(f"Invalid trace pattern '{text}': '.' must separate two name parts, e.g. "
                             "'Class.method' or 'auth.*'.")
    for part in parts:
        if _JS_SEGMENT.fullmatch(part) is None:
            raise InvalidPattern(f"Invalid trace pattern '{text}': '{part}' is not a name part; {_JS_FORMS}.")
    return Pattern(text, name_regex=_compiled(text, PYTHON_SEPARATOR))
