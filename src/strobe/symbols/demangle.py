"""Demangling (C++ via libstdc++'s cxxfilt, Rust legacy and v0 via pyderust) and display names.

`demangle(raw)` gives a `Demangled(name, signature)`:
- `name`: the qualified function name without return type, parameter list, cv/ref-qualifiers, ABI tags
  or clone suffixes: "auth::User::validate", "geo::Box<int>::operator<", "main::{lambda(int)#1}::operator()";
- `signature`: the name as demangled (ABI tags kept) with its parameter list and qualifiers, without
  the return type: "auth::User::validate(int) const". For Rust and C it equals `name`, except that a C
  clone keeps its suffix ("foo.constprop.0").
Names that fail to demangle come back unchanged.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import cxxfilt
import pyderust


class Demangled(NamedTuple):
    name: str
    signature: str


_RUST_LEGACY_HASH = re.compile(r"17h[0-9a-f]{16}E(?:\.llvm\.\d+)?$")
_ABI_TAG = re.compile(r"\[abi:[^\]]*\]")
_C_CLONE = re.compile(r"\.(?:constprop|isra|part|cold|lto_priv|localalias)(?:\.\d+)*(?=\.|$)")
_THUNKS = ("non-virtual thunk to ", "virtual thunk to ", "covariant return thunk to ", "transaction clone for ")
# Longest first, so "<<=" wins over "<<" and "<".
_OPERATORS = (
    " delete[]", " new[]", " delete", " new", '"" ', "()", "[]", "<<=", ">>=", "<=>", "->*", "<<", ">>", "<=", ">=",
    "->", "==", "!=", "&&", "||", "++", "--", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<", ">", "+", "-",
    "*", "/", "%", "&", "|", "^", "~", "!", "=", ",",
)
_ANONYMOUS = "(anonymous namespace)"
_NOT_SIMPLE = re.compile(r"[ <\[{]|operator")
_TOKEN = re.compile(r"(?<![A-Za-z0-9_])operator(?![A-Za-z0-9_])|[<>()\[\]{} ]")
_PARENS = re.compile(r"[()]")
_OPENERS = "<([{"
_CLOSERS = ">)]}"


def strip_version(raw: str) -> str:
    """`memcpy@GLIBC_2.14`, `_ZNSt…@@GLIBCXX_3.4.21` -> the bare symbol name."""
    at = raw.find("@")
    return raw[:at] if at > 0 else raw


def is_cold_part(raw: str) -> bool:
    """A `.cold` partition of a hot/cold split function: code, but not a function entry."""
    return ".cold" in raw and re.search(r"\.cold(?:\.\d+)?$", raw) is not None


def demangle(raw: str, *, rust: bool | None = None, dwarf_name: str | None = None) -> Demangled:
    """Demangle a linkage name. `rust` says the unit is Rust (None: guess from the name); `dwarf_name`
    (the DIE's DW_AT_name) restores the generic arguments and closure numbers legacy Rust mangling drops."""
    symbol = strip_version(raw)
    if symbol.startswith("_R"):
        text = _rust(symbol)
        if text is not None:
            name = normalize_rust(text)
            return Demangled(name, name)
    elif symbol.startswith("_ZN") and (rust or (rust is None and _RUST_LEGACY_HASH.search(symbol))):
        text = _rust(symbol)
        if text is not None:
            name = normalize_rust(_restore_legacy_generics(text, dwarf_name))
            return Demangled(name, name)
    if symbol.startswith("_Z"):
        try:
            text = cxxfilt.demangle(symbol)
        except (cxxfilt.InvalidName, cxxfilt.Error, UnicodeError):
            text = symbol
        if text != symbol:
            return split_cxx(text)
        return Demangled(symbol, symbol)
    match = _C_CLONE.search(symbol)
    if match and match.start() > 0:
        return Demangled(symbol[: match.start()], symbol)
    return Demangled(symbol, symbol)


def _rust(symbol: str) -> str | None:
    try:
        text: str = pyderust.demangle(symbol)
    except (pyderust.DemangleError, ValueError):
        return None
    return text


def split_cxx(text: str) -> Demangled:
    """Split a demangled C++ name into (name, signature) as described in the module docstring."""
    clone = ""
    while text.endswith("]") and " [clone " in text:
        at = text.rfind(" [clone ")
        clone = text[at:] + clone
        text = text[:at]
    for thunk in _THUNKS:
        if text.startswith(thunk):
            inner = split_cxx(text[len(thunk) :])
            return Demangled(thunk + inner.name, thunk + inner.signature + clone)
    start, params = _simple_parameters(text)
    if params < 0:
        start, params = _find_parameters(text)
    if params < 0:
        body = text[start:]
        return Demangled(_ABI_TAG.sub("", body), body + clone)
    close = _matching_close(text, params)
    head = text[start:params]
    trailing = text[close + 1 :]
    if trailing.startswith(")"):  # a function returning a function pointer: "int (*f(int))(double)"
        trailing = ""
    return Demangled(_ABI_TAG.sub("", head).strip(), head + text[params : close + 1] + trailing + clone)


def _simple_parameters(text: str) -> tuple[int, int]:
    """The common case fast: no return type, template, operator, lambda or ABI tag before the first '('."""
    at = text.find("(")
    if at <= 0 or text.startswith(_ANONYMOUS, at) or _NOT_SIMPLE.search(text, 0, at):
        return 0, -1
    return 0, at


def _find_parameters(text: str) -> tuple[int, int]:
    """(start of the name after any return type, index of the '(' opening the parameter list or -1)."""
    depth = 0
    start = 0
    in_operator = False  # after `operator`, spaces belong to the name ("operator char const*")
    search = _TOKEN.search
    n = len(text)
    match = search(text)
    while match is not None:
        i = match.start()
        c = text[i]
        if c == "o":  # the `operator` keyword
            i += 8
            if depth == 0:
                for op in _OPERATORS:
                    if text.startswith(op, i):
                        i += len(op)
                        break
                in_operator = True
            match = search(text, i)
            continue
        if c in _OPENERS:
            if depth == 0 and c == "(":
                if text.startswith(_ANONYMOUS, i):
                    match = search(text, i + len(_ANONYMOUS))
                    continue
                if i + 1 < n and text[i + 1] in "*&" and not in_operator:
                    start = i + 2  # declarator group of a returned function pointer: the name is inside
                    match = search(text, i + 2)
                    continue
                return start, i
            depth += 1
        elif c in _CLOSERS:
            depth = max(depth - 1, 0)
        elif depth == 0 and not in_operator:  # a space
            start = i + 1
        match = search(text, i + 1)
    return start, -1


def _matching_close(text: str, open_at: int) -> int:
    depth = 0
    for match in _PARENS.finditer(text, open_at):
        if match.group() == "(":
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return match.start()
    return len(text) - 1


def _split_last(path: str) -> tuple[str, str]:
    """("a::b<c::d>::", "e") for "a::b<c::d>::e", splitting at the last top-level `::`."""
    depth = 0
    last = -1
    i = 0
    while i < len(path):
        c = path[i]
        if c in "<({[":
            depth += 1
        elif c in ">)}]":
            depth = max(depth - 1, 0)
        elif c == ":" and depth == 0 and path.startswith("::", i):
            last = i
            i += 2
            continue
        i += 1
    if last < 0:
        return "", path
    return path[: last + 2], path[last + 2 :]


def _restore_legacy_generics(text: str, dwarf_name: str | None) -> str:
    """Legacy Rust mangling drops generic arguments and closure numbers: take them from DW_AT_name."""
    if not dwarf_name:
        return text
    prefix, last = _split_last(text)
    if dwarf_name == last:
        return text
    if dwarf_name.startswith(last + "<") or (last == "{{closure}}" and dwarf_name.startswith("{closure#")):
        return prefix + dwarf_name
    return text


def normalize_rust(text: str) -> str:
    """One spelling for both manglings: no turbofish (`f::<T>` -> `f<T>`), and an inherent impl path
    `<a::Type>::method` written as `a::Type::method` (trait impls `<T as Trait>::m` are kept)."""
    text = text.replace("::<", "<")
    if text.startswith("<"):
        depth = 0
        for i, c in enumerate(text):
            if c == "<":
                depth += 1
            elif c == ">":
                depth -= 1
                if depth == 0:
                    inner = text[1:i]
                    if " as " not in inner and text.startswith("::", i + 1):
                        return inner + text[i + 1 :]
                    break
    return text
