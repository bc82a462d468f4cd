"""Wrap chosen JavaScript/TypeScript functions so that each call goes through a tracing runtime, as pure text.

The preload that hooks Node's module loading calls this on a module's source before Node compiles it. Each
wrapped function hands its call to `runtime_name` (`__strobe`), which must exist on the global object:

    __strobe.c(id, thisValue, args, body)   a plain function: run body() and return what it returns
    __strobe.a(id, thisValue, args, body)   an async function: body is an async arrow; return its promise

    function add(a, b) { return a + b }
    → function add(a, b) {return __strobe.c(7,this,arguments,()=>{ return a + b })}
    async function load(id) { "use strict"; … }
    → async function load(id) { "use strict";return __strobe.a(8,this,arguments,async()=>{ … })}
    const area = (w, h) => { return w * h }
    → const area = (w, h) => {return __strobe.c(9,undefined,[w,h],()=>{ return w * h })}
    const double = x => x * 2
    → const double = x => __strobe.c(10,undefined,[x],()=>(x * 2))

The original body becomes an arrow inside the function, so `this`, `arguments`, `super`, `new.target`, `await`,
return values and exceptions mean exactly what they meant; `body()` takes no argument. An arrow passes its
parameters as an array (`[first, ...rest]`), or `undefined` when one is destructured. `thisValue` is
`undefined` where reading `this` could throw (a derived class's constructor, before `super()`) and for every
arrow: an arrow's `this` belongs to the function around it, and naming it there would make that function keep its
`this` for the arrow (a change of its scope, which V8's live edit takes as a reason not to give the functions in
it their new code; symbols/v8_liveedit.py). Directives ("use strict") stay at the top of the function.

Only text is inserted, never a newline, and only at a wrapped body's start (after its directives) and end:
every line keeps its number, and columns move only after an insertion point on those lines. Functions that
cannot be wrapped with the same meaning are returned in `skipped` with the reason, never changed:
generators (not traced yet), functions whose body declares a parameter again with `var` (inside the arrow
it would be a new variable starting as `undefined`), and, in TypeScript source, a derived class's constructor
with parameter properties. What differs is what nobody should rely on: `fn.toString()`, the extra frames in a
stack trace (the function's name moves to the frame of its first line, the body runs in an anonymous arrow),
and, for async functions, the extra promise ticks the runtime's `await` takes.

TypeScript: wrap the JavaScript Node runs, after the compiler, whenever one runs before Node: the compiler
moves code around `super()` (parameter properties; class fields when `useDefineForClassFields` is off) and
does not keep lines. Wrapping TypeScript source is right only for code that type stripping alone turns into
JavaScript.

    result = wrap_functions(source, [(7, add), (8, load)])
    result.source, [(s.id, s.reason) for s in result.skipped]
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from strobe.symbols.js_index import JsFunction

GENERATOR_REASON = "generator functions are not traced yet"
_RUNTIME_NAME = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*", re.ASCII)


@dataclass(frozen=True, slots=True)
class SkippedFunction:
    id: int
    function: JsFunction
    reason: str


@dataclass(frozen=True, slots=True)
class WrapResult:
    source: str  # the new source: as many lines as the original
    wrapped: tuple[int, ...]  # ids wrapped, in the order given
    skipped: tuple[SkippedFunction, ...]  # left as they were, with the reason
    insertions: tuple[Insertion, ...] = ()  # what was inserted where, in the order of the new text
    functions: tuple[JsFunction, ...] = ()  # the functions wrapped, in the order of `wrapped`

    def span(self, function: JsFunction) -> tuple[int, int]:
        """Where `function` (of the original text, wrapped or not) starts and ends in the new text: its
        parameters' start and the offset just after its last character, as V8 delimits a function."""
        start = function.params_start + sum(len(i.text) for i in self.insertions if i.offset <= function.params_start)
        end = function.body_end + sum(len(i.text) for i in self.insertions if i.offset < function.body_end or (
            i.offset == function.body_end and i.nesting <= -function.body_start))  # its own closing, and inner ones
        return start, end


@dataclass(frozen=True, slots=True)
class Insertion:
    offset: int  # in the original text
    nesting: int  # minus the body start of the function it belongs to (inner functions first at one offset)
    text: str


def skip_reason(function: JsFunction) -> str | None:
    """Why `function` cannot be wrapped with its meaning kept, or None when it can."""
    if function.is_generator:
        return GENERATOR_REASON
    if function.parameter_properties and function.this_unreadable:
        return (
            "a derived class's constructor with TypeScript parameter properties: the TypeScript compiler puts "
            "`this.x = x` after the super() call, which the wrapper moves into an arrow, so `this` would be read "
            "before super(). Wrap the JavaScript the compiler produced instead"
        )
    if function.redeclared_params:
        names = ", ".join(function.redeclared_params)
        return (
            f"its body declares {names} again with `var`: inside the wrapper that would be a new variable starting "
            "as undefined instead of the argument, so the function is left as it is"
        )
    return None


def _check(source: str, function: JsFunction, fid: int) -> None:
    start, end = function.body_start, function.body_end
    in_range = 0 <= start <= function.prologue_end <= end <= len(source) and start < end
    braces = function.expression_body or (in_range and source[start] == "{" and source[end - 1] == "}")
    if not (in_range and braces):
        raise ValueError(
            f"function {function.name} (id {fid}) of {function.file}:{function.line}: its body is not at characters "
            f"{start}..{end} of this source. The source is not the text it was indexed from (changed since, "
            "another file, or BOM/line endings translated): index this exact text with index_source and wrap again."
        )


def _edits(source: str, function: JsFunction, fid: int, runtime: str) -> list[tuple[int, int, int, str]]:
    """(offset, nesting, 0 to open / 1 to close, text) of one wrapper. Sorted, edits at one offset come innermost
    function first (the latest body start), each function's opening before its closing (an empty body `{}`)."""
    call = f"{runtime}.{'a' if function.is_async else 'c'}"
    self = "undefined" if function.this_unreadable or function.is_arrow else "this"
    if not function.is_arrow:
        args = "arguments"
    elif function.params is None:
        args = "undefined"
    else:
        names = list(function.params)
        if function.has_rest and names:
            names[-1] = "..." + names[-1]
        args = "[" + ",".join(names) + "]"
    arrow = "async()=>" if function.is_async else "()=>"
    nesting = -function.body_start
    head = f"{call}({fid},{self},{args},{arrow}"
    if function.expression_body:
        return [(function.body_start, nesting, 0, head + "("), (function.body_end, nesting, 1, "))")]
    at = function.prologue_end
    separator = "" if source[at - 1] in "{;" else ";"  # after a directive written without its semicolon
    return [(at, nesting, 0, f"{separator}return {head}{{"), (function.body_end - 1, nesting, 1, "})")]


def wrap_functions(
    source: str, targets: Sequence[tuple[int, JsFunction]], runtime_name: str = "__strobe"
) -> WrapResult:
    """`source` with each (id, function) of `targets` wrapped (functions from `js_index.index_source` of this
    same text; offsets are characters of it). Raises ValueError for a runtime name that is not a dotted
    identifier, a function given twice, or a function whose body is not where it was indexed."""
    if not _RUNTIME_NAME.fullmatch(runtime_name):
        raise ValueError(f"runtime_name {runtime_name!r} is not a dotted JavaScript identifier such as '__strobe'")
    seen: dict[tuple[int, int], int] = {}
    edits: list[tuple[int, int, int, str]] = []
    wrapped: list[int] = []
    functions: list[JsFunction] = []
    skipped: list[SkippedFunction] = []
    for fid, function in targets:
        _check(source, function, fid)
        key = (function.body_start, function.body_end)
        if key in seen:
            raise ValueError(
                f"function {function.name} of {function.file}:{function.line} is given twice (ids {seen[key]} and "
                f"{fid}): wrap each function once"
            )
        seen[key] = fid
        reason = skip_reason(function)
        if reason is not None:
            skipped.append(SkippedFunction(fid, function, reason))
            continue
        edits += _edits(source, function, fid, runtime_name)
        wrapped.append(fid)
        functions.append(function)
    edits.sort(key=lambda edit: edit[:3])
    pieces: list[str] = []
    previous = 0
    for offset, _, _, text in edits:
        pieces += [source[previous:offset], text]
        previous = offset
    pieces.append(source[previous:])
    insertions = tuple(Insertion(offset, nesting, text) for offset, nesting, _, text in edits)
    return WrapResult("".join(pieces), tuple(wrapped), tuple(skipped), insertions, tuple(functions))
