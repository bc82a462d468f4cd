"""The JS/TS function index over the fixtures in js_fixtures/ (each a program node runs as it is, or after
TypeScript's transpiler): names, kinds, flags, parameters, character offsets, then the naming rules one by one,
and syntax errors."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from strobe.symbols.js_index import JsFunction, JsSourceError, dialect_of, index_source, module_of
from strobe.symbols.js_project import MAX_FILE_BYTES

FIXTURES = Path(__file__).parent / "js_fixtures"


def indexed(name: str) -> dict[str, list[JsFunction]]:
    path = FIXTURES / name
    by_name: dict[str, list[JsFunction]] = {}
    for function in index_source(path.read_text(encoding="utf-8"), path):
        by_name.setdefault(function.name, []).append(function)
    return by_name


def only(functions: dict[str, list[JsFunction]], name: str) -> JsFunction:
    assert len(functions[name]) == 1, functions[name]
    return functions[name][0]


def line_of(name: str, text: str) -> int:
    lines = [n for n, line in enumerate((FIXTURES / name).read_text().splitlines(), 1) if text in line]
    assert len(lines) == 1, f"{text!r} is on lines {lines} of {name}"
    return lines[0]


def body(name: str, function: JsFunction) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")[function.body_start : function.body_end]


def names_of(source: str, path: str = "snippet.js") -> list[str]:
    return [function.name for function in index_source(source, path)]


def test_commonjs() -> None:
    functions = indexed("cjs.js")
    assert list(functions) == [
        "parseArgs", "parseArgs.normalize", "joinAll", "shout", "whisper", "greet", "farewell",
        "Counter", "Counter.bump", "Counter.reset",
    ]  # fmt: skip  (the .map((x) => x * 2) callback is anonymous: not indexed)
    parse_args = only(functions, "parseArgs")
    assert (parse_args.kind, parse_args.params, parse_args.has_rest) == ("function", ("argv", "rest"), True)
    assert (parse_args.line, parse_args.column) == (line_of("cjs.js", "function parseArgs"), 1)
    assert parse_args.module == "cjs"
    assert parse_args.file == str(FIXTURES / "cjs.js")
    assert only(functions, "greet").params == ("name",)  # a default value is allowed
    shout, whisper = only(functions, "shout"), only(functions, "whisper")
    assert (shout.is_arrow, shout.expression_body, body("cjs.js", shout)) == (True, True, "text.toUpperCase()")
    assert (whisper.expression_body, body("cjs.js", whisper)) == (False, "{ return text.toLowerCase(); }")
    assert only(functions, "Counter.bump").column == len("  this.bump = ") + 1


def test_esm() -> None:
    functions = indexed("esm.mjs")
    assert list(functions) == ["fileName", "delay", "fetchTwice", "default"]
    fetch_twice, default = only(functions, "fetchTwice"), only(functions, "default")
    assert (fetch_twice.is_async, fetch_twice.kind, fetch_twice.column) == (True, "function", len("export ") + 1)
    assert (default.is_async, default.is_arrow, default.expression_body) == (True, True, True)
    assert body("esm.mjs", default) == "(await delay(1, x)) * 3"


def test_classes() -> None:
    functions = indexed("classes.js")
    assert list(functions) == [
        "Shape.registry", "Shape.label", "Shape.constructor", "Shape.create", "Shape.description", "Shape.#reveal",
        "Shape.area", "Square.constructor", "Square.constructor.check", "Square.area", "Square.describe", "Legacy",
    ]  # fmt: skip
    getter, setter = functions["Shape.description"]
    assert (getter.kind, getter.params, setter.kind, setter.params) == ("getter", (), "setter", ("value",))
    assert only(functions, "Shape.create").is_static and only(functions, "Shape.registry").is_static
    assert not only(functions, "Shape.label").is_static and only(functions, "Shape.label").kind == "arrow"
    assert only(functions, "Shape.#reveal").kind == "method"
    base, derived = only(functions, "Shape.constructor"), only(functions, "Square.constructor")
    assert (base.kind, base.this_unreadable) == ("constructor", False)
    assert (derived.kind, derived.this_unreadable) == ("constructor", True)  # `this` before super() throws
    assert only(functions, "Square.constructor.check").this_unreadable  # an arrow: its `this` is the constructor's
    assert not only(functions, "Square.area").this_unreadable
    assert only(functions, "Shape.#reveal").line == line_of("classes.js", "  #reveal() {")


def test_async_and_generators() -> None:
    functions = indexed("async_gen.js")
    flags = {name: (f.is_async, f.is_generator) for name, (f,) in functions.items()}
    assert flags == {
        "loadUser": (True, False), "loadAll": (True, False), "countTo": (False, True), "ticks": (True, True),
        "api.fetch": (True, False), "api.entries": (False, True),
    }  # fmt: skip


def test_arrows_and_object_literal_methods() -> None:
    functions = indexed("arrows.js")
    assert list(functions) == [
        "add", "square", "makePoint", "curry", "total", "swap", "outer", "outer.inner",
        "calculator.plus", "calculator.minus", "calculator.times", "calculator.nested.half",
    ]  # fmt: skip (curry's returned arrow and reduce's callback are anonymous)
    assert body("arrows.js", only(functions, "makePoint")) == "({ x, y })"
    assert body("arrows.js", only(functions, "curry")) == "(b) => a * 10 + b"
    assert only(functions, "square").params == ("x",)  # x => …, without parentheses
    assert (only(functions, "total").params, only(functions, "total").has_rest) == (("values",), True)
    assert only(functions, "swap").params is None  # destructured
    kinds = [only(functions, f"calculator.{n}").kind for n in ("plus", "minus", "times", "nested.half")]
    assert kinds == ["method", "function", "arrow", "method"]


def test_typescript() -> None:
    functions = indexed("typed.ts")
    assert list(functions) == [
        "pick", "format", "identity", "Repository.constructor", "Repository.add", "Repository.names",
        "UserRepository.validate", "UserRepository.findAsync", "AuditedRepository.constructor",
        "AuditedRepository.validate", "Geometry.distance", "main",
    ]  # fmt: skip (overload signatures, the abstract method and `declare function` have no body)
    assert only(functions, "format").line == line_of("typed.ts", "value: number | string")
    assert only(functions, "pick").params == ("obj", "keys")
    assert only(functions, "Repository.add").params == ("item",)  # `this: Repository<T>` is not a parameter
    assert only(functions, "Repository.constructor").params == ("prefix", "limit")  # parameter properties
    assert only(functions, "Repository.constructor").parameter_properties
    audited = only(functions, "AuditedRepository.constructor")
    assert (audited.parameter_properties, audited.this_unreadable) == (True, True)
    assert not only(functions, "Repository.add").parameter_properties
    assert only(functions, "identity").params == ("value",)
    assert body("typed.ts", only(functions, "identity")) == "value"
    assert only(functions, "UserRepository.findAsync").is_async
    assert not only(functions, "Repository.constructor").this_unreadable


def test_tsx() -> None:
    functions = indexed("component.tsx")
    assert list(functions) == ["React.createElement", "Greeting", "Button", "App"]
    assert only(functions, "Greeting").params is None  # ({ name, count = 1 }: Props)
    assert body("component.tsx", only(functions, "Button")).startswith("(\n  <button onClick={() =>")
    assert only(functions, "App").kind == "function"


def test_offsets_count_characters_not_bytes() -> None:
    text = (FIXTURES / "unicode.js").read_text(encoding="utf-8")
    assert len(text.encode()) > len(text) + 20  # the fixture does shift byte offsets
    functions = indexed("unicode.js")
    shout, wave, brew = only(functions, "shout"), only(functions, "wave"), only(functions, "Café.brew")
    assert text[shout.body_start : shout.body_end] == "{ return `${text}!!! ✨`; }"
    assert text[wave.body_start : wave.body_end] == "`👋 ${name} — ${greeting}`"
    assert text[brew.body_start : brew.body_end] == "{ return `☕ ${size}`; }"
    assert shout.prologue_end == shout.body_start + 1
    assert (wave.line, wave.column) == (line_of("unicode.js", "const wave"), len("const wave = ") + 1)
    # non-ASCII on the same line, before the function: columns count characters too
    before = "const ü = '日本'; "
    [same_line] = index_source(before + "function f(a) { return a }", "x.js")
    assert (same_line.column, same_line.body_start) == (len(before) + 1, len(before + "function f(a) "))


def test_a_syntax_error_skips_the_file() -> None:
    path = FIXTURES / "broken.js"
    with pytest.raises(JsSourceError) as raised:
        index_source(path.read_text(), path)
    assert raised.value.path == str(path)
    assert "syntax error at line 4" in raised.value.reason and "missing `)`" in raised.value.reason
    assert "not indexed" in raised.value.reason  # `fine` on line 2 parsed, but nothing from the file is kept


def test_an_unknown_suffix_teaches_the_dialect_argument() -> None:
    with pytest.raises(JsSourceError, match="dialect='js'"):
        index_source("function f() {}", "script.coffee")
    assert names_of_dialect("function f<T>(x: T) {}", "compiled.js", "ts") == ["f"]


def names_of_dialect(source: str, path: str, dialect: str) -> list[str]:
    return [f.name for f in index_source(source, path, dialect=dialect)]  # type: ignore[arg-type]


NAMING = [
    ("function login() {}", ["login"]),
    ("export function login() {}", ["login"]),
    ("export default function login() {}", ["login"]),
    ("const f = () => {}; let g = function () {}; var h = async x => x", ["f", "g", "h"]),
    ("const g = function h() {}", ["g"]),
    ("setup(function named() {})", ["named"]),
    ("exports.f = function () {}; module.exports.g = () => 1", ["f", "g"]),
    ("module.exports = { f() {}, g: () => 1 }", ["f", "g"]),
    ("module.exports = function () {}", ["default"]),
    ("module.exports = function run() {}", ["run"]),
    ("module.exports = class Api { get() {} }", ["Api.get"]),
    ("export default () => {}", ["default"]),
    ("export default { m() {} }", ["default.m"]),
    ("export default class { m() {} }", ["default.m"]),
    ("class User { save() {} static load() {} constructor() {} }", ["User.save", "User.load", "User.constructor"]),
    ("class User { get total() { return 1 } set total(v) {} }", ["User.total", "User.total"]),
    ("class User { #hash() {} #salt = () => 1 }", ["User.#hash", "User.#salt"]),
    ("class User { onClick = () => {}; static make = function () {} }", ["User.onClick", "User.make"]),
    ("const Model = class { m() {} }", ["Model.m"]),
    ("const api = { get() {}, put: () => {}, v1: { list() {} } }", ["api.get", "api.put", "api.v1.list"]),
    ("const api = { 'quoted'() {}, 'not ok'() {}, [computed]() {}, 0() {}, 'a-b': () => 1 }", ["api.quoted"]),
    ("Foo.prototype.bar = function () {}; Foo.prototype = { baz() {} }", ["Foo.bar", "Foo.baz"]),
    ("a.b.c = () => 1; a[b] = () => 1; f().x = () => 1", ["a.b.c"]),
    ("function Foo() { this.bar = () => {} }", ["Foo", "Foo.bar"]),
    ("class A { constructor() { this.cb = function () {} } m() { this.other = () => {} } }",
     ["A.constructor", "A.cb", "A.m", "A.other"]),
    ("function outer() { function inner() { const deepest = () => 1 } }",
     ["outer", "outer.inner", "outer.inner.deepest"]),
    ("items.map(x => x * 2); setTimeout(function () {}, 1); (() => {})()", []),
    ("describe('x', () => { function helper() {} it('y', async () => {}) })", ["helper"]),
    ("const f = (() => 1); const g = cond ? () => 1 : () => 2", ["f"]),
    ("function* gen() {} const agen = async function* () {}", ["gen", "agen"]),
    ("class A { static { function inStatic() {} } }", ["A.inStatic"]),
    ("class A { static() {} get() {} async() {} static static() {} }", ["A.static", "A.get", "A.async", "A.static"]),
    ("export default function () {}", ["default"]),
    ("function factory() { return class Made { m() {} } }", ["factory", "factory.Made.m"]),
    ("exports.handler = async function (event) {}; export const run = async (e) => e", ["handler", "run"]),
]  # fmt: skip


@pytest.mark.parametrize(("source", "expected"), NAMING, ids=[source[:40] for source, _ in NAMING])
def test_naming_rules(source: str, expected: list[str]) -> None:
    assert names_of(source) == expected


TS_NAMING = [
    ("const o = { a: () => 1 } satisfies X; const p = (() => 2) as F", ["o.a", "p"]),
    ("namespace NS { export namespace Inner { export function f() {} } }", ["NS.Inner.f"]),
    ("declare module 'x' { export function typed(): void }", []),
    ("abstract class A { abstract m(): void; n(): void; n() {} }", ["A.n"]),
    ("class A { constructor(private x: number) {} private async get(this: A, k: string) {} }",
     ["A.constructor", "A.get"]),
]  # fmt: skip


@pytest.mark.parametrize(("source", "expected"), TS_NAMING, ids=[source[:40] for source, _ in TS_NAMING])
def test_typescript_naming_rules(source: str, expected: list[str]) -> None:
    assert names_of(source, "snippet.ts") == expected


def test_what_the_transform_needs_to_know() -> None:
    strict, shadow, plain = index_source(
        "function strict(a) { 'use strict'; \"more\"\n return a }\n"
        "function shadow(a, { b }) { if (a) { var b, a = 1 } for (var arguments in {}) {} return a }\n"
        "const plain = (x) => { var x; return x }",
        "t.js",
    )
    assert strict.prologue_end - strict.body_start == len("{ 'use strict'; \"more\"")
    assert shadow.redeclared_params == ("arguments", "a", "b")
    assert plain.redeclared_params == ("x",)  # an arrow has no `arguments` of its own
    assert strict.redeclared_params == ()
    [nested] = index_source("function f(a) { function g() { var a } }", "t.js")[1:]
    assert nested.redeclared_params == ()  # g's own `var a` shadows nothing of g


def test_module_names() -> None:
    assert module_of("/proj/src/auth.ts") == "auth"
    assert module_of("/proj/src/auth/index.ts") == "auth"
    assert module_of("/proj/src/auth.test.js") == "auth.test"
    assert module_of("/proj/src/index.test.js") == "index.test"
    assert [dialect_of(p) for p in ("a.cjs", "a.mjs", "a.jsx", "a.mts", "a.cts", "a.tsx", "a.py")] == [
        "js", "js", "js", "ts", "ts", "tsx", None,
    ]  # fmt: skip


def test_large_file_is_fast_enough() -> None:
    """A source just under the size limit: ~10k functions of every shape, non-ASCII throughout."""
    unit = (
        "// é\nfunction f{i}(a, b) {{ return a + b }}\nconst g{i} = (x) => x * 2;\n"
        "class C{i} extends B {{ constructor() {{ super() }} m(y) {{ return y }} get p() {{ return 1 }} }}\n"
        "exports.h{i} = async function () {{ var t = 'ü'; return t }};\n"
    )
    text = "".join(unit.format(i=i) for i in range(MAX_FILE_BYTES // len(unit.format(i=10_000))))
    started = time.perf_counter()
    functions = index_source(text, "big.js")
    elapsed = time.perf_counter() - started
    assert len(functions) == 6 * (len(text.splitlines()) // 5)
    assert text[functions[-1].body_start : functions[-1].body_end] == "{ var t = 'ü'; return t }"
    print(f"\n{len(text) // 1024} KiB, {len(functions)} functions indexed in {elapsed:.2f} s")
    assert elapsed < 20, "indexing a file at the size limit must stay well under the daemon's patience"
