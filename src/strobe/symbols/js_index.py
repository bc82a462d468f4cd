"""The functions of a JavaScript/TypeScript project, found from source with tree-sitter before Node runs it.

Every function a user can name is one `JsFunction`: where it is, its parameters, and the character offsets
of its body that `js_transform.wrap_functions` rewrites when Node loads the file. `name` is what a trace
pattern matches, dotted like a Python pattern, without the module (that is `module`, the file's stem):

    function login() {}                     login          (`export function`, `export default function login` too)
    const f = () => {}  /  let  /  var      f              (a function or arrow assigned to a name; the name
    exports.f = function () {}              f               wins over a function expression's own name:
    module.exports.f = …                    f               `const g = function h() {}` is `g`)
    module.exports = { f() {} }             f
    module.exports = function () {}         default        (a named function or class keeps its own name)
    export default () => {}                 default        (`export default { m() {} }` gives `default.m`)
    class User { save() {} }                User.save      (static methods too: `is_static` tells them apart)
    class User { constructor() {} }         User.constructor
    class User { get total() {} }           User.total     (getter and setter share the property's name;
                                                            `kind` is "getter" / "setter")
    class User { #hash() {} }               User.#hash     (private names keep their `#`, as V8 prints them)
    class User { onClick = () => {} }       User.onClick   (class fields holding a function)
    const api = { get() {}, put: () => {} } api.get        (object literals are named by what holds them,
                                            api.put         nested ones too: `api.v1.get`)
    Foo.prototype.bar = function () {}      Foo.bar        (`prototype` is left out of member paths)
    function Foo() { this.bar = () => {} }  Foo.bar        (`this.x` is named after the class or function
                                                            whose `this` it is)
    function outer() { function inner() {} }   outer.inner   (nesting: enclosing functions, classes, objects
                                                              and TypeScript namespaces)

Not indexed: anonymous callbacks (`items.map(x => x * 2)`, `setTimeout(function () {}, 1)`), methods with a
computed or non-identifier key (`[Symbol.iterator]() {}`, `"a b"() {}`, `0() {}`), overload signatures, abstract
methods and `declare`d functions (no body), and `.d.ts` files. An anonymous function is transparent: the named
functions inside `describe("x", () => { function helper() {} })` are named as if it were not there (`helper`).

    functions = index_source(Path("src/auth.ts").read_text(), "src/auth.ts")
    [(f.name, f.line) for f in functions]           # [("login", 3), ("Session.refresh", 12), ...]

Offsets (`params_start`, `body_start`, `body_end`, `prologue_end`) count characters of the Python str, not
tree-sitter's UTF-8 bytes. A file with a syntax error gives no functions: `index_source` raises `JsSourceError`,
`js_project.index_project` lists it in `skipped`; nothing tree-sitter recovered around the error is trusted.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from operator import attrgetter
from pathlib import Path
from typing import Literal

import tree_sitter
import tree_sitter_javascript
import tree_sitter_typescript

from strobe.symbols.js_names import (
    FIELDS,
    FUNCTIONS,
    WRAPPERS,
    Namer,
    key_name,
    node_text,
    own_path,
)

Dialect = Literal["js", "ts", "tsx"]
Kind = Literal["function", "arrow", "method", "getter", "setter", "constructor"]

SUFFIXES: dict[str, Dialect] = {
    ".js": "js", ".cjs": "js", ".mjs": "js", ".jsx": "js",
    ".ts": "ts", ".mts": "ts", ".cts": "ts",
    ".tsx": "tsx",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class JsFunction:
    name: str  # what patterns match: "login", "User.save", "api.get", "outer.inner", "default"
    module: str  # the file's stem ("auth" for src/auth.ts); an index.* file is named after its directory; an
    #              installed package's functions are named after the package (js_project.index_package)
    file: str  # absolute path
    line: int  # 1-based line where the function starts (after a method's decorators)
    column: int  # 1-based, in characters, of that start (as a Node stack trace counts, outside astral characters)
    end_line: int
    kind: Kind
    is_async: bool
    is_generator: bool  # function* / async function* / *method(): not traced by js_transform yet
    is_arrow: bool
    is_static: bool  # a static method, or a function held by a static class field
    expression_body: bool  # an arrow without braces: `x => x + 1`
    params_start: int  # where its parameters start: the `(`, or an arrow's single parameter (V8's function start)
    body_start: int  # source[body_start:body_end] is the body: "{...}" with both braces, or the arrow's expression
    body_end: int
    prologue_end: int  # after the body's directives ("use strict"; ...), body_start + 1 without any; == body_start
    # for an expression body. A wrapper is inserted here so that the directives keep applying to the function.
    params: tuple[str, ...] | None  # parameter names when each is a plain identifier (defaults allowed, `...args`
    # gives "args", TypeScript's `this:` parameter is left out); None when one is destructured
    has_rest: bool  # the last of `params` is a rest parameter
    redeclared_params: tuple[str, ...]  # parameters (and `arguments`) the body declares again with `var`
    this_unreadable: bool  # reading `this` on entry can throw: a derived class's constructor (before super())
    # or an arrow whose `this` is that constructor's
    parameter_properties: bool  # TypeScript `constructor(private x: T)`: the compiler adds `this.x = x` to the body
    source: str | None = None  # compiled code: the file its source map says the function came from (`src/auth.ts`)
    source_line: int | None = None  # and the 1-based line there (js_project.index_project fills both)


class JsSourceError(ValueError):
    """A source file that cannot be indexed: `path` and a `reason` written for the caller."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


_GENERATORS = frozenset({"generator_function_declaration", "generator_function"})
_QUERY = """
[(function_declaration) (generator_function_declaration) (function_expression) (generator_function)
 (arrow_function) (method_definition)] @function
(variable_declaration (variable_declarator name: (_) @var))
(for_in_statement kind: "var" left: (_) @var)
"""


@cache
def _language(dialect: Dialect) -> tuple[tree_sitter.Language, tree_sitter.Query]:
    if dialect == "js":
        language = tree_sitter.Language(tree_sitter_javascript.language())
    elif dialect == "ts":
        language = tree_sitter.Language(tree_sitter_typescript.language_typescript())
    else:
        language = tree_sitter.Language(tree_sitter_typescript.language_tsx())
    return language, tree_sitter.Query(language, _QUERY)


def dialect_of(path: str | os.PathLike[str]) -> Dialect | None:
    """The grammar for a file by its suffix: "js" (JSX included), "ts" or "tsx"; None for any other file."""
    return SUFFIXES.get(os.path.splitext(os.fspath(path))[1].lower())


def module_of(path: str | os.PathLike[str]) -> str:
    """The module name of a file: its stem (`src/auth.ts` → "auth", `a/b.test.js` → "b.test"); an `index.*`
    file is its directory (`src/auth/index.ts` → "auth")."""
    file = Path(os.path.abspath(path))
    return (file.parent.name or file.stem) if file.stem == "index" else file.stem


def _tokens(node: tree_sitter.Node) -> set[str]:
    return {child.type for child in node.children if not child.is_named or child.type == "override_modifier"}


_BINDING_PART = {"pair_pattern": "value", "assignment_pattern": "left", "object_assignment_pattern": "left",
                 "required_parameter": "pattern", "optional_parameter": "pattern"}  # fmt: skip


def _bindings(node: tree_sitter.Node | None, names: list[str]) -> None:
    """Append the identifiers a parameter list or a `var` pattern binds (not those its defaults or types read)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if current is None:
            continue
        kind = current.type
        if kind in ("identifier", "shorthand_property_identifier_pattern"):
            names.append(node_text(current))
        elif kind in _BINDING_PART:
            stack.append(current.child_by_field_name(_BINDING_PART[kind]))
        elif kind in ("object_pattern", "array_pattern", "rest_pattern", "formal_parameters"):
            stack += reversed(current.named_children)


def _params(node: tree_sitter.Node) -> tuple[tuple[str, ...] | None, bool]:
    """(plain parameter names or None when one is destructured, whether the last is a rest parameter)."""
    single = node.child_by_field_name("parameter")  # x => ...
    if single is not None:
        return (node_text(single),), False
    names: list[str] = []
    rest = False
    formal = node.child_by_field_name("parameters")
    for param in formal.named_children if formal is not None else []:
        target: tree_sitter.Node | None = param
        if param.type in ("required_parameter", "optional_parameter"):
            target = param.child_by_field_name("pattern")
        elif param.type == "assignment_pattern":
            target = param.child_by_field_name("left")
        if target is None or target.type in ("comment", "decorator", "this"):
            continue  # TypeScript's `this: T` is a type, not a parameter
        rest = target.type == "rest_pattern"
        if rest:
            target = next((c for c in target.named_children if c.type != "comment"), None)
        if target is None or target.type != "identifier":
            return None, False
        names.append(node_text(target))
    return tuple(names), rest


def _first_error(root: tree_sitter.Node) -> tree_sitter.Node:
    node = root
    while True:
        for child in node.children:
            if child.is_error or child.is_missing:
                return child
            if child.has_error:
                node = child
                break
        else:
            return node


def _syntax_reason(root: tree_sitter.Node, dialect: Dialect) -> str:
    error = _first_error(root)
    line, column = error.start_point.row + 1, error.start_point.column + 1
    if error.is_missing:
        what = f"missing `{error.type}`"
    else:
        snippet = " ".join(node_text(error).split())
        what = f"unexpected `{snippet[:40]}{'…' if len(snippet) > 40 else ''}`"
    grammar = {"js": "JavaScript (JSX included)", "ts": "TypeScript", "tsx": "TSX"}[dialect]
    return (
        f"syntax error at line {line}, column {column} ({what}) when read as {grammar}: not indexed, its functions "
        "cannot be traced by name. Fix the syntax; if Node runs the file as it is, the tree-sitter grammar does not "
        "parse this construct (newer syntax, a rare automatic-semicolon case, or types such as Flow's)."
    )


class _CharOffsets:
    """tree-sitter's UTF-8 byte offsets → offsets in the Python str, converted in one pass over sorted offsets."""

    def __init__(self, text: str, data: bytes) -> None:
        self._ascii = len(text) == len(data)
        self._data = data
        self._known: dict[int, int] = {}

    def prepare(self, offsets: Iterable[int]) -> None:
        if self._ascii:
            return
        previous_byte, previous_char = 0, 0
        for offset in sorted(set(offsets)):
            previous_char += len(self._data[previous_byte:offset].decode("utf-8", "surrogatepass"))
            self._known[offset] = previous_char
            previous_byte = offset

    def __call__(self, offset: int) -> int:
        if self._ascii:
            return offset
        known = self._known.get(offset)
        return known if known is not None else len(self._data[:offset].decode("utf-8", "surrogatepass"))


def _derived_constructor(node: tree_sitter.Node) -> bool:
    if node.type != "method_definition" or node_text(node.child_by_field_name("name")) != "constructor":
        return False
    body, cls = node.parent, node.parent.parent if node.parent is not None else None
    if body is None or body.type != "class_body" or cls is None:
        return False
    heritage = next((child for child in cls.named_children if child.type == "class_heritage"), None)
    if heritage is None:
        return False
    return any(c.type in ("extends", "extends_clause") for c in heritage.children)


def _this_unreadable(node: tree_sitter.Node) -> bool:
    current: tree_sitter.Node | None = node
    while current is not None and current.type == "arrow_function":
        current = current.parent
        while current is not None and current.type not in FUNCTIONS and current.type != "class_body":
            current = current.parent
    return current is not None and _derived_constructor(current)


def _has_parameter_properties(node: tree_sitter.Node) -> bool:
    formal = node.child_by_field_name("parameters")
    modifiers = ("accessibility_modifier", "readonly", "override_modifier")
    return formal is not None and any(
        child.type in modifiers for param in formal.named_children for child in param.children
    )


def _prologue_end(body: tree_sitter.Node) -> int:
    """Byte offset after the body's directive prologue (`"use strict";`), or just after `{` without one."""
    end = body.start_byte + 1
    for statement in body.named_children:
        if statement.type == "comment":
            continue
        parts = [child for child in statement.named_children if child.type != "comment"]
        if statement.type != "expression_statement" or len(parts) != 1 or parts[0].type != "string":
            break
        end = _end(statement)
    return end


def _start(node: tree_sitter.Node) -> tree_sitter.Node:
    """The function's first token: a method's decorators are left out."""
    return next((child for child in node.children if child.type != "decorator" and not child.is_extra), node)


def _last_token(node: tree_sitter.Node) -> tree_sitter.Node:
    """The node's last token. tree-sitter can end a node after a comment that follows it (`{ return 1 }// note`
    gives a block ending after the comment): comments are left out."""
    while True:
        tokens = [child for child in node.children if not child.is_extra]
        if not tokens:
            return node
        node = tokens[-1]


def _end(node: tree_sitter.Node) -> int:
    return _last_token(node).end_byte


def index_source(text: str, path: str | os.PathLike[str], *, dialect: Dialect | None = None) -> list[JsFunction]:
    """The named functions of `text` (the source of `path`) in source order, read with the grammar of
    `path`'s suffix unless `dialect` says otherwise. Raises JsSourceError for a syntax error or an unknown
    suffix; nothing is indexed from such a file."""
    file = os.path.abspath(path)
    dialect = dialect or dialect_of(file)
    if dialect is None:
        raise JsSourceError(file, f"not a JavaScript or TypeScript file: expected one of {', '.join(SUFFIXES)}, "
                                  "or pass dialect='js', 'ts' or 'tsx'")  # fmt: skip
    data = text.encode("utf-8", "surrogatepass")
    language, query = _language(dialect)
    tree = tree_sitter.Parser(language).parse(data)
    if tree.root_node.has_error:
        raise JsSourceError(file, _syntax_reason(tree.root_node, dialect))
    captures = tree_sitter.QueryCursor(query).captures(tree.root_node)
    redeclared = _redeclared(captures.get("var", []))
    namer, module = Namer(), module_of(file)
    found: list[tuple[tree_sitter.Node, str, tree_sitter.Node]] = []
    for node in sorted(captures.get("function", []), key=attrgetter("start_byte")):
        body = node.child_by_field_name("body")
        own = own_path(node)
        if body is None or own is None:
            continue
        found.append((node, ".".join(namer.full(node)), body))
    offsets = _CharOffsets(text, data)
    offsets.prepare(
        offset
        for node, _, body in found
        for start in (_start(node),)
        for offset in (start.start_byte - start.start_point.column, start.start_byte, body.start_byte,
                       _end(body), _prologue_end(body) if body.type == "statement_block" else body.start_byte)
    )  # fmt: skip
    return [_function(node, name, body, module, file, offsets, redeclared) for node, name, body in found]


def _redeclared(declared: Sequence[tree_sitter.Node]) -> dict[int, set[str]]:
    """Function node id → the names its body declares with `var` (hoisted to it through blocks)."""
    by_function: dict[int, set[str]] = {}
    for pattern in declared:
        owner = pattern.parent
        while owner is not None and owner.type not in FUNCTIONS and owner.type != "class_static_block":
            owner = owner.parent
        if owner is not None and owner.type in FUNCTIONS:
            names: list[str] = []
            _bindings(pattern, names)
            by_function.setdefault(owner.id, set()).update(names)
    return by_function


def _function(
    node: tree_sitter.Node,
    name: str,
    body: tree_sitter.Node,
    module: str,
    file: str,
    offsets: _CharOffsets,
    redeclared: dict[int, set[str]],
) -> JsFunction:
    tokens = _tokens(node)
    is_arrow = node.type == "arrow_function"
    kind: Kind = "arrow" if is_arrow else "function"
    if node.type == "method_definition":
        is_static = "static" in tokens
        in_class = node.parent is not None and node.parent.type == "class_body"
        kind = "getter" if "get" in tokens else "setter" if "set" in tokens else "method"
        if in_class and not is_static and key_name(node.child_by_field_name("name")) == "constructor":
            kind = "constructor"
    else:
        holder = node.parent
        while holder is not None and holder.type in WRAPPERS:
            holder = holder.parent
        is_static = holder is not None and holder.type in FIELDS and "static" in _tokens(holder)
    params, has_rest = _params(node)
    bound: list[str] = [] if is_arrow else ["arguments"]
    parameters = node.child_by_field_name("parameters") or node.child_by_field_name("parameter")
    _bindings(parameters, bound)
    start = _start(node)
    start_char = offsets(start.start_byte)
    body_start = offsets(body.start_byte)
    block = body.type == "statement_block"
    return JsFunction(
        name=name,
        module=module,
        file=file,
        line=start.start_point.row + 1,
        column=start_char - offsets(start.start_byte - start.start_point.column) + 1,
        end_line=_last_token(node).end_point.row + 1,
        kind=kind,
        is_async="async" in tokens,
        is_generator=node.type in _GENERATORS or "*" in tokens,
        is_arrow=is_arrow,
        is_static=is_static,
        expression_body=not block,
        params_start=offsets(parameters.start_byte) if parameters is not None else body_start,
        body_start=body_start,
        body_end=offsets(_end(body)),
        prologue_end=offsets(_prologue_end(body)) if block else body_start,
        params=params,
        has_rest=has_rest,
        redeclared_params=tuple(n for n in dict.fromkeys(bound) if n in redeclared.get(node.id, ())),
        this_unreadable=_this_unreadable(node),
        parameter_properties=kind == "constructor" and _has_parameter_properties(node),
    )
