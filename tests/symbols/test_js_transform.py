"""The wrapping transform, run: each fixture of js_fixtures/ is indexed, every function wrapped, and node (v20) runs
the original and the transformed program. The output must be the same, and a recorder standing in for the
runtime (js_fixtures/strobe_stub.cjs) must have seen each call with its id, `this`, arguments and result.
TypeScript fixtures go through TypeScript's transpileModule first (tests/toolchains, scripts/bootstrap.sh).
Then the text itself: property tests that no newline is added and nothing outside the insertions changes."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tree_sitter
import tree_sitter_javascript
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strobe.symbols.js_index import JsFunction, index_source
from strobe.symbols.js_transform import GENERATOR_REASON, WrapResult, wrap_functions

FIXTURES = Path(__file__).parent / "js_fixtures"
STUB = FIXTURES / "strobe_stub.cjs"
TYPESCRIPT = Path(__file__).resolve().parents[1] / "toolchains" / "node_modules" / "typescript"


def node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.fail("node (v20) must be on PATH to run the transformed programs")
    return found


@dataclass
class Run:
    stdout: str
    stderr: str
    returncode: int
    records: list[dict[str, Any]]


@dataclass
class Case:
    functions: list[JsFunction]
    result: WrapResult
    original: Run
    transformed: Run

    def records(self, name: str) -> list[dict[str, Any]]:
        ids = {fid for fid, function in enumerate(self.functions) if function.name == name}
        assert ids, f"no function {name}"
        return [record for record in self.transformed.records if record["id"] in ids]


def run(program: Path, *, stub: bool) -> Run:
    records = program.with_name(program.name + ".records.json")
    command = [node(), *(["--require", str(STUB)] if stub else []), str(program)]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=60, cwd=program.parent, env={"STROBE_RECORDS": str(records)}
    )
    found = json.loads(records.read_text()) if stub and records.exists() else []
    return Run(done.stdout, done.stderr, done.returncode, found)


def transpile(pairs: list[tuple[Path, Path]]) -> None:
    if not (TYPESCRIPT / "package.json").is_file():
        pytest.fail(f"{TYPESCRIPT} is needed to strip TypeScript: run scripts/bootstrap.sh")
    paths = [str(path) for pair in pairs for path in pair]
    done = subprocess.run(
        [node(), str(FIXTURES / "transpile.cjs"), str(TYPESCRIPT), *paths], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def wrap_everything(source: str, path: Path) -> tuple[list[JsFunction], WrapResult]:
    functions = index_source(source, path)
    return functions, wrap_functions(source, list(enumerate(functions)))


def case(tmp_path: Path, fixture: str, source: str | None = None) -> Case:
    """Index and wrap every function of `fixture` (or of `source` under that name), run both programs."""
    text = source if source is not None else (FIXTURES / fixture).read_text(encoding="utf-8")
    original_dir, transformed_dir = tmp_path / "original", tmp_path / "transformed"
    original_dir.mkdir(exist_ok=True)
    transformed_dir.mkdir(exist_ok=True)
    original, transformed = original_dir / fixture, transformed_dir / fixture
    functions, result = wrap_everything(text, transformed)
    original.write_text(text, encoding="utf-8")
    transformed.write_text(result.source, encoding="utf-8")
    assert result.source.count("\n") == text.count("\n")
    if fixture.endswith((".ts", ".tsx")):
        original, transformed = original.with_suffix(".js"), transformed.with_suffix(".js")
        transpile([(original.with_name(fixture), original), (transformed.with_name(fixture), transformed)])
    return Case(functions, result, run(original, stub=False), run(transformed, stub=True))


def check_same_behaviour(found: Case) -> None:
    assert found.original.returncode == 0, found.original.stderr
    assert (found.transformed.stdout, found.transformed.returncode) == (found.original.stdout, 0), (
        found.transformed.stderr
    )
    called = {record["id"] for record in found.transformed.records}
    assert called and called <= set(found.result.wrapped)


def calls(found: Case, name: str) -> list[tuple[str, list[str] | None, str | None]]:
    """(this, arguments, returned or 'threw ...') of each recorded call of `name`."""
    return [
        (r["self"], r["args"], r.get("returned", f"threw {r['threw']}" if "threw" in r else None))
        for r in found.records(name)
    ]


def test_commonjs(tmp_path: Path) -> None:
    found = case(tmp_path, "cjs.js")
    check_same_behaviour(found)
    assert found.result.skipped == ()
    # 'use strict': a plain call's `this` is undefined; normalize is map's callback (element, index, array)
    assert calls(found, "parseArgs") == [("undefined", ['[" a ","b "]', '"c"', '"d"'], '["a","b","c","d"]')]
    assert calls(found, "parseArgs.normalize")[0] == ("undefined", ['" a "', "0", '[" a ","b "]'], '"a"')
    assert [args for _, args, _ in calls(found, "greet")] == [[], ['"you"']]
    assert calls(found, "Counter") == [("Counter", ["5"], "undefined")]  # new Counter(5): `this` is the new object
    assert [returned for _, _, returned in calls(found, "Counter.bump")] == ["6", "7"]
    assert calls(found, "Counter.reset") == [("Counter", [], "Counter")]
    assert calls(found, "shout") == [("undefined", ['"up"'], '"UP"')]  # an arrow's `this` is not passed
    assert calls(found, "greet")[0][0] == "{}"  # exports.greet(): `this` is `exports`


def test_esm(tmp_path: Path) -> None:
    found = case(tmp_path, "esm.mjs")
    check_same_behaviour(found)
    assert calls(found, "fileName") == [("undefined", [], '"esm.mjs"')]  # import.meta still works
    assert calls(found, "default") == [("undefined", ["7"], "21")]
    assert [r["kind"] for r in found.records("fetchTwice")] == ["a"]
    assert calls(found, "fetchTwice") == [("undefined", ['"k"'], '["k","k!"]')]


def test_classes_super_and_new_target(tmp_path: Path) -> None:
    found = case(tmp_path, "classes.js")
    check_same_behaviour(found)  # new.target.name, super(), super.description, #private, static fields
    assert calls(found, "Square.constructor") == [
        ("undefined", ["3"], "undefined"),  # `this` cannot be read before super(): passed as undefined
        ("undefined", ["-1"], "threw RangeError: negative side"),
    ]
    assert calls(found, "Square.constructor.check")[1] == ("undefined", [], "threw RangeError: negative side")
    assert calls(found, "Shape.constructor")[0] == ("Shape", ['"blob"'], "undefined")
    assert calls(found, "Shape.create") == [("function Shape", ['"blob"'], "Shape")]
    assert calls(found, "Shape.area") == [("Shape", [], "threw Error: area of RENAMED is unknown")]
    assert calls(found, "Legacy") == [("globalThis", [], '"called without new"'), ("Legacy", [], "undefined")]
    getter_and_setter = [(r["self"], r["args"]) for r in found.records("Shape.description")]
    assert getter_and_setter == [("Shape", ['"renamed"']), ("Shape", []), ("Square", [])]


def test_async_and_generators(tmp_path: Path) -> None:
    found = case(tmp_path, "async_gen.js")
    check_same_behaviour(found)
    assert {(s.function.name, s.reason) for s in found.result.skipped} == {
        (name, GENERATOR_REASON) for name in ("countTo", "ticks", "api.entries")
    }
    assert calls(found, "loadUser")[-1] == ("globalThis", ["-1"], "threw TypeError: bad id -1")
    assert {r["kind"] for r in found.records("loadUser")} == {"a"}
    assert calls(found, "loadAll") == [("undefined", ["[2,3]"], '[{"id":2,"name":"user2"},{"id":3,"name":"user3"}]')]
    assert calls(found, "api.fetch") == [("{}", ['"k"'], '"value of k"')]  # `api`: JSON leaves functions out


def test_arrows_and_object_literals(tmp_path: Path) -> None:
    found = case(tmp_path, "arrows.js")
    check_same_behaviour(found)  # outer's inner arrow still reads outer's `arguments`
    assert calls(found, "total") == [("undefined", ["1", "2", "3"], "6")]  # [...values]: like `arguments`
    assert calls(found, "swap") == [("undefined", None, "[2,1]")]  # destructured: no argument list
    assert calls(found, "makePoint") == [("undefined", ["1", "2"], '{"x":1,"y":2}')]
    assert calls(found, "outer") == [("globalThis", ["1", "2", "3"], "3")]
    assert calls(found, "outer.inner") == [("undefined", [], "3")]
    assert calls(found, "calculator.plus") == [('{"base":100,"nested":{}}', ["1"], "101")]
    assert calls(found, "calculator.times") == [("undefined", ["4"], "8")]  # an arrow: its `this` is not passed
    assert calls(found, "calculator.nested.half") == [("{}", ["9"], "4.5")]


def test_unicode_source(tmp_path: Path) -> None:
    found = case(tmp_path, "unicode.js")
    check_same_behaviour(found)
    assert calls(found, "Café.brew") == [("Café", ['"grande"'], '"☕ grande"')]


def test_edge_cases(tmp_path: Path) -> None:
    found = case(tmp_path, "edges.js")
    check_same_behaviour(found)  # directive kept, mapped arguments, new.target, super, labels, throw 42, async
    assert {(s.function.name, s.reason.split(":")[0]) for s in found.result.skipped} == {
        ("gen", GENERATOR_REASON),
        ("defaultsTo", "its body declares options again with `var`"),
    }
    assert calls(found, "strictThis") == [("undefined", [], "true")]
    assert calls(found, "thrower") == [("undefined", [], "threw 42")]
    assert calls(found, "mapped") == [("globalThis", ["1", "2", "3"], '["changed","also",3]')]
    assert calls(found, "child.greet") == [("Object", [], '"child of base"')]  # super.greet() still resolves
    setter, getter = calls(found, "obj.value")
    assert setter == ('{"value":"unset"}', ["3"], "undefined")
    assert getter == ('{"value":"set 3","_v":"set 3"}', [], '"set 3"')
    assert calls(found, "asyncThrow") == [("globalThis", [], "threw SyntaxError: late")]
    assert calls(found, "nestedEnd.add") == [("undefined", ["1"], "2")]
    assert calls(found, "Derived.constructor") == [("undefined", [], "undefined")]
    assert calls(found, "maker") == [("globalThis", [], '"called"'), ("maker", [], '"constructed"')]


FRAME = re.compile(r"^\s*at (?:(?P<function>.+?) \()?(?P<file>[^()]+):(?P<line>\d+):(?P<column>\d+)\)?$")


def frames(stderr: str, file: Path) -> list[tuple[int, int]]:
    """(line, column) of the stack frames in `file`, innermost first."""
    found = [FRAME.match(line) for line in stderr.splitlines()]
    return [(int(m["line"]), int(m["column"])) for m in found if m and m["file"] == str(file)]


def test_stack_lines_are_unchanged(tmp_path: Path) -> None:
    found = case(tmp_path, "stack.js")
    check_same_behaviour(found)
    before = frames(found.original.stderr, tmp_path / "original" / "stack.js")
    after = frames(found.transformed.stderr, tmp_path / "transformed" / "stack.js")
    assert len(before) == 4, found.original.stderr  # deepest, middle, Runner.run, the module
    # every original frame is still there, same line and column, in order (the frame that had the function's
    # name is now its body's anonymous arrow); each wrapper adds its own frame, named after the function, on
    # the line where it calls the runtime: the function's first line
    assert [frame for frame in after if frame in before] == before
    assert {line for line, column in after if (line, column) not in before} == {
        f.line for f in found.functions if f.name in ("deepest", "middle", "Runner.run")
    }


def test_typescript_after_type_stripping(tmp_path: Path) -> None:
    found = case(tmp_path, "typed.ts")
    check_same_behaviour(found)  # parameter properties, overloads, namespaces, getters, async methods
    # TypeScript emits `this.log = log` after super(): inside the wrapper's arrow, so `this` would come first
    [(skipped, reason)] = [(s.function.name, s.reason) for s in found.result.skipped]
    assert skipped == "AuditedRepository.constructor" and "Wrap the JavaScript the compiler produced" in reason
    assert calls(found, "AuditedRepository.validate") == [("AuditedRepository", ['{"name":"grace"}'], "true")]
    assert calls(found, "Repository.add")[-1] == ("UserRepository", ['{"name":""}'], "threw Error: invalid ")
    assert calls(found, "Repository.constructor") == [
        ("UserRepository", ['"user:"'], "undefined"),
        ("AuditedRepository", ['"audited:"'], "undefined"),  # its super()
    ]
    assert calls(found, "UserRepository.findAsync") == [("UserRepository", ['"alan"'], '{"name":"alan"}')]
    assert calls(found, "Geometry.distance") == [("{}", ["[0,0]", "[3,4]"], "5")]  # `this`: the namespace
    assert calls(found, "identity") == [("undefined", ["5"], "5")]  # an arrow: its `this` is not passed


def test_tsx_after_type_stripping(tmp_path: Path) -> None:
    found = case(tmp_path, "component.tsx")
    check_same_behaviour(found)
    assert [args for _, args, _ in calls(found, "Greeting")] == [['{"name":"ada","count":2}']]
    assert calls(found, "Button")[0][1] == ['{"label":"go"}']


def test_what_is_inserted() -> None:
    source = (
        "function add(a, b) { return a + b }\n"
        "async function load(id) { 'use strict'; return id }\n"
        "const area = (w, ...rest) => { return w }\n"
        "const pick = ({ x }) => { return x }\n"
        "const double = async x => x * 2\n"
        "class A extends B { constructor() { super() } }\n"
    )
    functions = index_source(source, "t.js")
    result = wrap_functions(source, [(i + 10, f) for i, f in enumerate(functions)], runtime_name="globalThis.__rt")
    assert result.source.splitlines() == [
        "function add(a, b) {return globalThis.__rt.c(10,this,arguments,()=>{ return a + b })}",
        "async function load(id) { 'use strict';return globalThis.__rt.a(11,this,arguments,async()=>{ return id })}",
        "const area = (w, ...rest) => {return globalThis.__rt.c(12,undefined,[w,...rest],()=>{ return w })}",
        "const pick = ({ x }) => {return globalThis.__rt.c(13,undefined,undefined,()=>{ return x })}",
        "const double = async x => globalThis.__rt.a(14,undefined,[x],async()=>(x * 2))",
        "class A extends B { constructor() {return globalThis.__rt.c(15,undefined,arguments,()=>{ super() })} }",
    ]
    assert result.wrapped == (10, 11, 12, 13, 14, 15) and result.skipped == ()


def test_a_directive_without_semicolon_keeps_its_own_statement() -> None:
    source = "function s() { 'use strict'\n  return this }"
    [function] = index_source(source, "t.js")
    wrapped = wrap_functions(source, [(1, function)]).source
    assert wrapped == "function s() { 'use strict';return __strobe.c(1,this,arguments,()=>{\n  return this })}"


def test_errors_teach() -> None:
    source = "function f() { return 1 }"
    [function] = index_source(source, "t.js")
    with pytest.raises(ValueError, match="not a dotted JavaScript identifier"):
        wrap_functions(source, [(1, function)], runtime_name="x; alert(1)")
    with pytest.raises(ValueError, match="given twice"):
        wrap_functions(source, [(1, function), (2, function)])
    with pytest.raises(ValueError, match="index this exact text with index_source"):
        wrap_functions("// moved\n" + source, [(1, function)])


# ---- properties of the text ------------------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "ü", "日本", "$x", "_y"])
FILLER = st.sampled_from(["", " ", "\n", "\r\n", "  \n  ", "/* é\n */", "// 🎉\n", "\t"])


@st.composite
def functions_source(draw: st.DrawFn, depth: int = 0) -> str:
    """A random mix of every function shape, nested, with newlines and non-ASCII text around every token."""
    pieces: list[str] = []
    for index in range(draw(st.integers(1, 3))):
        name = f"{draw(NAMES)}{depth}_{index}"
        gap = draw(FILLER)
        inner = draw(functions_source(depth + 1)) if depth < 2 and draw(st.booleans()) else "return 1"
        directive = draw(st.sampled_from(["", "'use strict';", '"use strict"\n', "'use strict'// é\n", '"a"/* c */;']))
        shape = draw(st.integers(0, 10))
        body = f"{{{gap}{directive}{inner}{gap}}}"
        pieces.append([
            f"function {name}(p, q = 1){gap}{body}",
            f"async function {name}(...r) {body}",
            f"function* {name}() {{ yield 1 }}",
            f"const {name} = ({gap}p{gap}) =>{gap}p + 1;",
            f"const {name} = async p => ({gap}{{ v: `é${{p}}\n` }});",
            f"const {name} = ([p]) => {body};",
            f"class {name} extends Object {{ constructor(p) {body} static s() {body} get g() {body} #m() {body} }}",
            f"const {name} = {{ m(p) {body}, n: function () {body}, o: (p) => p, }};",
            f"exports.{name} = function (p) {{{gap}var p; return p }};",
            f"function {name}(p) {{ const inner = (x) => x + p }}",
            f"const {name} = p => p * 2// a comment right after an expression body\n",
        ][shape])
    return draw(FILLER).join(pieces)


_ARGS = r"(?:arguments|undefined|\[[^\]\r\n\u2028\u2029]*\])"
_HEAD = rf"__strobe\.[ca]\(\d+,(?:this|undefined),{_ARGS},(?:async)?\(\)=>"
_INSERTED = rf"(?:;?return {_HEAD}\{{|{_HEAD}\(|\}}\)|\)\))+"


def segments_kept(original: str, result: str, cuts: list[int]) -> None:
    """`result` is `original` cut at `cuts`, with a wrapper's opening or closing (no line terminator in it)
    inserted at every cut and nothing else changed."""
    bounds = [0, *sorted(cuts), len(original)]
    pieces = [re.escape(original[a:b]) for a, b in itertools.pairwise(bounds)]
    assert re.fullmatch(_INSERTED.join(pieces), result, re.DOTALL), (original, result)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(source=functions_source(), data=st.data())
def test_transform_adds_no_line_and_changes_nothing_else(source: str, data: st.DataObject) -> None:
    functions = index_source(source, "random.js")
    chosen = data.draw(st.lists(st.sampled_from(functions), unique_by=id)) if functions else []
    result = wrap_functions(source, [(i, f) for i, f in enumerate(chosen)])
    for terminator in ("\n", "\r", "\u2028", "\u2029"):
        assert result.source.count(terminator) == source.count(terminator)
    wrapped = [chosen[i] for i in result.wrapped]
    cuts = [offset for f in wrapped for offset in (f.prologue_end, f.body_end - (0 if f.expression_body else 1))]
    segments_kept(source, result.source, cuts)
    assert len(result.wrapped) + len(result.skipped) == len(chosen)
    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_javascript.language()))
    assert not parser.parse(result.source.encode("utf-8", "surrogatepass")).root_node.has_error, result.source
    rewrapped = index_source(result.source, "random.js")  # the wrappers' arrows are anonymous: not indexed
    assert [f.name for f in rewrapped] == [f.name for f in functions]
