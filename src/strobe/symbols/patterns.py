"""Trace patterns: globs over demangled, qualified function names, plus @usercode and @file:.

    foo::bar            exactly foo::bar (and plain C names: processCommand)
    foo::*              direct children of foo     (* never crosses "::")
    foo::**             any descendant of foo      (** crosses "::")
    *::validate         validate one level down
    auth::**::validate  auth::validate, auth::user::validate, ...
    @usercode           every function declared in a file under projectRoot
    @file:parser.cpp    every function declared in a file whose path contains "parser.cpp"
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

from strobe.errors import InvalidPattern

MAX_PATTERN_LENGTH = 512
_ANY_SEGMENT_CHARS = "(?:(?!::).)*"


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


def _glob_to_regex(glob: str) -> str:
    out: list[str] = []
    i = 0
    n = len(glob)
    while i < n:
        if glob.startswith("::**::", i):
            out.append("::(?:.*::)?")
            i += 6
        elif i == 0 and glob.startswith("**::"):
            out.append("(?:.*::)?")
            i += 4
        elif glob.startswith("::**", i) and i + 4 == n:
            out.append("::.+")
            i += 4
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append(_ANY_SEGMENT_CHARS)
            i += 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    return "".join(out)


@lru_cache(maxsize=1024)
def _compiled(glob: str) -> re.Pattern[str]:
    return re.compile(_glob_to_regex(glob), re.DOTALL)


def parse_pattern(text: str, project_root: str | None) -> Pattern:
    """Validate and compile one pattern; raises InvalidPattern saying what is wrong and what works."""
    if not text or not text.strip():
        raise InvalidPattern("Invalid trace pattern '': a pattern cannot be empty. Example: 'myapp::parse_*'.")
    if text != text.strip():
        raise InvalidPattern(f"Invalid trace pattern '{text}': remove the surrounding whitespace.")
    if len(text) > MAX_PATTERN_LENGTH:
        raise InvalidPattern(f"Invalid trace pattern '{text[:40]}…': longer than {MAX_PATTERN_LENGTH} characters.")
    if text == "@usercode":
        if not project_root:
            raise InvalidPattern("Invalid trace pattern '@usercode': it needs the session's projectRoot.")
        root = os.path.join(os.path.realpath(project_root), "")

        def in_project(file: str | None) -> bool:
            return file is not None and os.path.realpath(file).startswith(root)

        return Pattern(text, file_test=in_project)
    if text.startswith("@file:"):
        needle = text[len("@file:") :]
        if not needle:
            raise InvalidPattern(
                "Invalid trace pattern '@file:': name a file (or part of its path), e.g. '@file:parser.cpp'."
            )
        return Pattern(text, file_test=lambda file: file is not None and needle in file)
    if text.startswith("@"):
        raise InvalidPattern(
            f"Invalid trace pattern '{text}': unknown directive. Use '@usercode' or '@file:<part of a path>'."
        )
    if "***" in text:
        raise InvalidPattern(f"Invalid trace pattern '{text}': '***' is ambiguous; use '*' (one level) or '**'.")
    if text.startswith("::") or text.endswith("::") or ":::" in text:
        raise InvalidPattern(
            f"Invalid trace pattern '{text}': '::' must separate two name parts, e.g. 'ns::func' or 'ns::*'."
        )
    return Pattern(text, name_regex=_compiled(text))
