"""Trace patterns: globs over demangled, qualified function names, plus @usercode and @file:.

    foo::bar            exactly foo::bar (and plain C names: processCommand)
    foo::*              direct children of foo     (* never crosses "::")
    foo::**             any descendant of foo      (** crosses "::")
    *::validate         validate one level down
    auth::**::validate  auth::validate, auth::user::validate, ...
    @usercode           every function declared in a file under projectRoot
    @file:parser.cpp    every function declared in a file whose path contains "parser.cpp"

Generic (Rust) and template (C++) functions are named with their arguments: app::Printer<u32>::print_all<f64>,
app::Stack<int>::push (C++ names carry no parameter list or const). A name part written without arguments matches
it with any arguments or none; a part that spells them matches only those:

    app::Printer::print_all   every instantiation: app::Printer<u32>::print_all<f64>, app::Printer::print_all,
                              app::Printer<alloc::string::String>::print_all<i64>, and legacy Rust mangling's
                              app::Printer<W>::print_all<u32, f64>; not app::Printer::print_all_items
    *::print_all              print_all one level down, Printer<std::string>::print_all<int> included ("::"
                              inside arguments separates nothing)
    Stack::push               Stack<int>::push and Stack<double>::push
    app::Printer<u32>::*      only that instantiation's methods; app::Printer<*>::* those of any instantiation
                              (legacy Rust mangling writes the parameter, app::Printer<W>::..., as the name has it)
    Pair<Box<int>,int>::get   spaces after "," and before ">" are optional (C++ writes "Pair<Box<int>, int>",
                              "Box<Box<int> >")
    app::operator<<           operators are names: app::operator<< <int>, Stack<int>::operator<, operator->
    **::describe              <app::Printer<u32> as app::Describe>::describe too: "<T as Trait>" (like Rust's
                              "<impl Trait for T>", "{closure#0}" or "{{closure}}") is one name part
    print_*                   print_all<f64> too: "*" covers a part's arguments; "**" crosses everything

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
    """Python and JavaScript globs: `*` matches within one name part, `**` across parts; `sep**sep` also matches a
    single separator and a leading `**sep` nothing at all (so `**::f` / `**.f` match a top-level `f`)."""
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


# Generic arguments in a name: a balanced "<...>", nested up to _ARGS_DEPTH deep (the Rust standard library's
# names reach 11), in which "->" (Rust's `fn() -> T`) closes nothing. Atomic: there is one way to read it.
_ARGS_DEPTH = 16


def _balanced_args(depth: int) -> str:
    group = r"<(?:[^<>\-]++|->?)*+>"
    for _ in range(depth - 1):
        group = rf"<(?:[^<>\-]++|->?|{group})*+>"
    return group


_ARGS = _balanced_args(_ARGS_DEPTH)
_OPERATORS = ("<=>", "<<=", ">>=", "<<", ">>", "<=", ">=", "->*", "->", "<", ">")  # the ones with an angle bracket
_ANY_ARGS = rf"(?: ?{_ARGS})?"  # after a part written without arguments; C++ writes "operator<< <int>"
# "*": one name part, its arguments included; after "operator" an angle bracket is the operator's. Each step is
# atomic (one way to read a character), and a "*" that ends its part takes all of it at once (possessive).
_OPERATOR_TAIL = "(?<=operator)(?:" + "|".join(re.escape(op) for op in _OPERATORS if op[0] != "-") + ")"
_PART_STEP = rf"[^:<>\-]|:(?!:)|->?|{_ARGS}|{_OPERATOR_TAIL}"
_PART_GLOB = rf"(?:(?>{_PART_STEP}))*"
_PART_REST = rf"(?:[^:<>\-]++|{_PART_STEP})*+"
# "**::": any leading parts. What follows must be whole parts, so `.*::` can only end at a real "::"; it is the
# fastest way there when a literal follows, but before a glob parsing the parts avoids retrying it at every "::".
_ANY_LEADING = f"(?:.*{NATIVE_SEPARATOR})?"
_WHOLE_LEADING = rf"(?:{_PART_REST}{NATIVE_SEPARATOR})*"
_ARGS_GLOB = rf"(?:(?>[^<>\-]|->?|{_ARGS}))*"  # "*" or "**" inside spelled arguments: never past their ">"


def _operator_at(text: str, i: int) -> str | None:
    """The C++ operator name ("operator<<", "operator->", ...) starting at `i` at the start of a name part, whose
    angle brackets are no generic arguments."""
    if not text.startswith("operator", i) or (i > 0 and text[i - 1] not in ":*"):
        return None
    after = i + len("operator")
    for op in _OPERATORS:
        if text.startswith(op, after):
            return text[i : after + len(op)]
    return None


def _unbalanced(glob: str, what: str) -> InvalidPattern:
    return InvalidPattern(
        f"Invalid trace pattern '{glob}': {what}. Spell generic arguments whole ('app::Printer<u32>::*') or "
        "leave them out ('app::Printer::*' matches every instantiation)."
    )


def _native_parts(glob: str) -> list[str]:
    """The name parts of a native pattern: split at "::" outside generic arguments and operator names."""
    parts: list[str] = []
    start = depth = i = 0
    while i < len(glob):
        operator = _operator_at(glob, i) if depth == 0 else None
        if operator is not None:
            i += len(operator)
            continue
        if glob.startswith("->", i):
            i += 2
            continue
        if glob[i] == "<":
            depth += 1
        elif glob[i] == ">":
            if depth == 0:
                raise _unbalanced(glob, "a '>' closes no '<'")
            depth -= 1
        elif depth == 0 and glob.startswith(NATIVE_SEPARATOR, i):
            parts.append(glob[start:i])
            i += len(NATIVE_SEPARATOR)
            start = i
            continue
        i += 1
    if depth:
        raise _unbalanced(glob, "a '<' is never closed")
    parts.append(glob[start:])
    return parts


def _part_regex(part: str) -> str:
    """One name part: literal text, "*" (within the part, its arguments included), "**" (anything), and spelled
    arguments "<...>" (a "*" in them stays in them; optional spaces after "," and before ">"). A part without
    arguments of its own, not ending in a glob, also matches the part with any arguments."""
    out: list[str] = []
    depth = i = 0
    spelled = False
    while i < len(part):
        operator = _operator_at(part, i) if depth == 0 else None
        c = part[i]
        if operator is not None:
            out.append(re.escape(operator))
            i += len(operator)
        elif c == "*":
            stars = len(part) - i - len(part[i:].lstrip("*"))
            end = i + stars == len(part)
            out.append(_ARGS_GLOB if depth else ".*" if stars > 1 else _PART_REST if end else _PART_GLOB)
            i += stars
        elif part.startswith("->", i):
            out.append("->")
            i += 2
        elif c == "<" or c == ">":
            spelled = True
            depth += 1 if c == "<" else -1
            out.append("<" if c == "<" else " ?>")
            i += 1
        elif depth and c == ",":
            out.append(", ?")
            i = len(part) - len(part[i + 1 :].lstrip(" "))
        elif depth and c == " " and part[i:].lstrip(" ").startswith(">"):
            i += 1
        else:
            out.append(re.escape(c))
            i += 1
    if not spelled and not part.endswith("*"):
        out.append(_ANY_ARGS)
    return "".join(out)


def _native_regex(glob: str) -> str:
    """A native glob as a regex over whole names (see the module docstring). A part "**" also matches no part at
    all where that leaves a name ("**::f" matches a top-level f, "a::**::f" matches a::f), as `_glob_to_regex`
    reads it."""
    parts = _native_parts(glob)
    out: list[str] = []
    separator_taken = False  # the "::" before this part is already in `out` (a leading "**::" matched it)
    for i, part in enumerate(parts):
        before = "" if i == 0 or separator_taken else NATIVE_SEPARATOR
        separator_taken = False
        if part != "**" or len(parts) == 1 or (i > 0 and not before):  # "**" after "**::" is plain ".*"
            out.append(before + (".*" if part == "**" else _part_regex(part)))
        elif i == len(parts) - 1:
            out.append(f"{NATIVE_SEPARATOR}.+")
        else:
            leading = _WHOLE_LEADING if parts[i + 1].startswith("*") else _ANY_LEADING
            out.append(before + leading)
            separator_taken = True
    return "".join(out)


@lru_cache(maxsize=1024)
def _compiled(glob: str, separator: str = NATIVE_SEPARATOR) -> re.Pattern[str]:
    regex = _native_regex(glob) if separator == NATIVE_SEPARATOR else _glob_to_regex(glob, separator)
    return re.compile(regex, re.DOTALL)


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
