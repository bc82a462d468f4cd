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

import ctypes
import re
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

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


def looks_like_rust(raw: str) -> bool:
    """Whether `demangle(raw, rust=None)` would try Rust's demangler (rather than C++'s) on a "_Z" name."""
    symbol = strip_version(raw)
    return symbol.startswith("_ZN") and _RUST_LEGACY_HASH.search(symbol) is not None


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
        text = _cxx(symbol)
        if text != symbol:
            return split_cxx(text)
        return Demangled(symbol, symbol)
    match = _C_CLONE.search(symbol)
    if match and match.start() > 0:
        return Demangled(symbol[: match.start()], symbol)
    return Demangled(symbol, symbol)


def _cxa_demangle() -> tuple[Callable[..., int | None], Callable[[int], None]] | None:
    """libstdc++'s __cxa_demangle and libc's free, from the libraries cxxfilt found, called directly: the
    same demangler as cxxfilt.demangle without its per-call wrapping (about half the cost)."""
    found = cxxfilt.default_demangler
    libc_name = getattr(found, "_libc_name", None)
    libcxx_name = getattr(found, "_libcxx_name", None)
    if not isinstance(libc_name, str) or not isinstance(libcxx_name, str):
        return None
    try:
        function = getattr(ctypes.CDLL(libcxx_name), "__cxa_demangle")
        free = ctypes.CDLL(libc_name).free
    except (OSError, AttributeError):
        return None
    function.restype = ctypes.c_void_p
    function.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    free.restype = None
    free.argtypes = [ctypes.c_void_p]
    return function, free


_CXA = _cxa_demangle()


def _cxx(symbol: str) -> str:
    """The demangled text of a C++ symbol, or the symbol itself if it does not demangle."""
    if _CXA is None:
        try:
            text: str = cxxfilt.demangle(symbol)
        except (cxxfilt.InvalidName, cxxfilt.Error, UnicodeError):
            return symbol
        return text
    function, free = _CXA
    try:
        encoded = symbol.encode()
    except UnicodeError:
        return symbol
    pointer = function(encoded, None, None, None)  # NULL status: NULL comes back for every failure
    if not pointer:
        return symbol
    try:
        raw = ctypes.string_at(pointer)
    finally:
        free(pointer)
    try:
        return raw.decode()
    except UnicodeError:
        return symbol


def demangle_cxx_names(raws: Iterable[str]) -> tuple[list[str], list[str]]:
    """(names, signatures): `demangle(raw, rust=False)` for each of `raws`, in bulk (the hundreds of
    thousands of linkage names of a big C++ binary)."""
    raws = list(raws)
    if _CXA is None:
        done = [demangle(raw, rust=False) for raw in raws]
        return [d.name for d in done], [d.signature for d in done]
    function, free = _CXA
    string_at = getattr(ctypes, "_string_at", ctypes.string_at)  # the C function behind ctypes.string_at
    texts: list[str | None] = []  # None: not a plain C++ symbol, see demangle()
    append = texts.append
    for raw in raws:
        if not raw.startswith("_Z") or "@" in raw:
            append(None)
            continue
        text = raw
        try:
            pointer = function(raw.encode(), None, None, None)
        except UnicodeError:
            pointer = None
        if pointer:
            try:
                data = string_at(pointer, -1)
            finally:
                free(pointer)
            try:
                text = data.decode()
            except UnicodeError:
                text = raw
        append(text)
    demangled = [found for raw, found in zip(raws, texts, strict=True) if found is not None and found != raw]
    split_names, split_signatures = split_cxx_many(demangled)
    names: list[str] = []
    signatures: list[str] = []
    at = 0
    for raw, found in zip(raws, texts, strict=True):
        if found is None:
            name, signature = demangle(raw, rust=False)
        elif found == raw:
            name = signature = raw
        else:
            name, signature = split_names[at], split_signatures[at]
            at += 1
        names.append(name)
        signatures.append(signature)
    return names, signatures


# A whole line that split_cxx's fast path takes, its name in group 1 (an empty group for any other line):
# identifier characters, "::", "~" and "(anonymous namespace)" (not first), then one parenthesised
# parameter list, then anything not starting with ")" and not ending in "]". Lines with "operator" are
# left to split_cxx afterwards.
_SIMPLE_LINE = re.compile(
    r"^(?:((?=[A-Za-z0-9_:~$.])(?:[A-Za-z0-9_:~$.]|\(anonymous namespace\))++)"  # possessive: no backtracking
    r"\([^()\n]*\)(?!\))[^\n]*(?<!\])|[^\n]*)$",
    re.MULTILINE,
)
# The next most common shape, what _find_parameters finds for a function template: a return type without
# brackets of any kind ("int ", "char const* "), then a name of identifier characters, "(anonymous
# namespace)" and template argument lists with no nested brackets, then the parameters as above; not a
# thunk. Groups: the signature (the line from the name on) and the name; both empty for any other line.
_RETURNING_LINE = re.compile(
    r"^(?:(?!non-virtual thunk to |virtual thunk to |covariant return thunk to |transaction clone for )"
    r"(?:[^ ()<>\[\]{}\n]*+ )++"
    r"(((?=[A-Za-z0-9_:~$.])(?:[A-Za-z0-9_:~$.]++|<[^<>()\[\]{}\n]*+>|\(anonymous namespace\))++)"
    r"\((?![*&])[^()\n]*+\)(?!\))[^\n]*+)(?<!\])|[^\n]*+)$",
    re.MULTILINE,
)


def split_cxx_many(texts: list[str]) -> tuple[list[str], list[str]]:
    """(names, signatures) of `split_cxx` of each text; the two commonest shapes are recognised for all of
    them by regex passes, the rest go through split_cxx."""
    joined = "\n".join(texts)
    names = _line_matches(_SIMPLE_LINE, texts, joined)
    signatures = list(texts)
    rest = [i for i, name in enumerate(names) if not name]
    if "operator" in joined:
        rest = sorted({*rest, *(i for i, text in enumerate(texts) if "operator" in text)})
    if rest:
        some = [texts[i] for i in rest]
        returning = _line_matches(_RETURNING_LINE, some, "\n".join(some))
        for i, found in zip(rest, returning, strict=True):
            text = texts[i]
            if found and found[0] and "operator" not in text:
                names[i], signatures[i] = found[1], found[0]
            else:
                names[i], signatures[i] = split_cxx(text)
    return names, signatures


def _line_matches(pattern: re.Pattern[str], texts: list[str], joined: str) -> list[Any]:
    """pattern.findall over the texts as lines (`joined` with line breaks): one result per text, or all
    empty if a text has a line break of its own."""
    found: list[Any] = pattern.findall(joined) if texts else []
    if len(found) != len(texts) or joined.count("\n") != max(len(texts) - 1, 0):
        return [""] * len(texts)
    return found


def _rust(symbol: str) -> str | None:
    try:
        text: str = pyderust.demangle(symbol)
    except (pyderust.DemangleError, ValueError):
        return None
    return text


def split_cxx(text: str) -> Demangled:
    """Split a demangled C++ name into (name, signature) as described in the module docstring."""
    if not text.endswith("]") and not text.startswith(_THUNKS):
        at = _simple_open(text)
        if at > 0:
            close = text.find(")", at + 1)
            if close >= 0 and text.find("(", at + 1, close) < 0 and not text.startswith(")", close + 1):
                return Demangled(text[:at].strip(), text)  # what the general path below gives for such names
    clone = ""
    while text.endswith("]") and " [clone " in text:
        at = text.rfind(" [clone ")
        clone = text[at:] + clone
        text = text[:at]
    if text.startswith(_THUNKS):
        for thunk in _THUNKS:
            if text.startswith(thunk):
                inner = split_cxx(text[len(thunk) :])
                return Demangled(thunk + inner.name, thunk + inner.signature + clone)
    start, params = _simple_parameters(text)
    if params < 0:
        start, params = _find_parameters(text)
    if params < 0:
        body = text[start:]
        return Demangled(_without_abi_tags(body), body + clone)
    close = text.find(")", params + 1)
    if close < 0 or text.find("(", params + 1, close) >= 0:  # nested parentheses: count them
        close = _matching_close(text, params)
    head = text[start:params]
    trailing = text[close + 1 :]
    if trailing.startswith(")"):  # a function returning a function pointer: "int (*f(int))(double)"
        trailing = ""
    return Demangled(_without_abi_tags(head).strip(), head + text[params : close + 1] + trailing + clone)


def _without_abi_tags(text: str) -> str:
    return _ABI_TAG.sub("", text) if "[abi:" in text else text


def _simple_open(text: str) -> int:
    """The '(' opening the parameter list when nothing before it but "(anonymous namespace)" needs the
    tokenizer (no return type, template, operator, lambda or ABI tag), else -1."""
    at = text.find("(")
    if at <= 0:
        return -1
    if not text.startswith(_ANONYMOUS, at):
        return -1 if _NOT_SIMPLE.search(text, 0, at) else at
    while text.startswith(_ANONYMOUS, at):
        at = text.find("(", at + len(_ANONYMOUS))
    if at < 0 or _NOT_SIMPLE.search(text[:at].replace(_ANONYMOUS, "")):
        return -1
    return at


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
