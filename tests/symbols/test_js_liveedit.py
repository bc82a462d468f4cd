"""symbols/v8_liveedit.py and js_liveedit.py against the V8 they describe: real node processes load a module, have it
live-edited to js_transform's rewrite (Debugger.setScriptSource through an in-process inspector session), and say
which reachable functions run the new code now (their toString shows the wrapper); the prediction must agree."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from strobe.symbols.js_index import index_source
from strobe.symbols.js_liveedit import EXPRESSION_BODY, MISALIGNED, unmapped
from strobe.symbols.js_transform import skip_reason, wrap_functions
from strobe.symbols.v8_liveedit import Change, carried, maps, source_changes, utf16_offset

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not on PATH")
SEMVER = Path(__file__).resolve().parents[1] / "toolchains" / "node_modules" / "semver" / "semver.js"

HARNESS = """\
const fs = require('fs');
const path = require('path');
const file = path.resolve(process.argv[2]);
const next = fs.readFileSync(process.argv[3], 'utf8');
const source = fs.readFileSync(file, 'utf8');
globalThis.__strobe = { c: (id, self, args, body) => body(), a: (id, self, args, body) => body() };
const exported = require(file);
const seen = new Set();
const functions = [];
const visit = (value, depth) => {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function') || seen.has(value)) return;
  if (depth > 5) return;
  seen.add(value);
  if (typeof value === 'function') functions.push(value);
  for (const key of Reflect.ownKeys(value)) {
    const d = Object.getOwnPropertyDescriptor(value, key);
    if (d) for (const v of [d.value, d.get, d.set]) visit(v, depth + 1);
  }
  if (typeof value === 'function' && value.prototype) visit(value.prototype, depth + 1);
};
visit(exported, 0);
const ends = new Map();
for (const fn of functions) {
  const text = Function.prototype.toString.call(fn);
  const at = source.indexOf(text);
  if (at >= 0 && source.indexOf(text, at + 1) < 0) ends.set(fn, at + text.length);
}
const { Session } = require('inspector');
const session = new Session();
session.connect();
let id = null;
const url = require('url').pathToFileURL(file).href;
session.on('Debugger.scriptParsed', (m) => { if (m.params.url === url) id = m.params.scriptId; });
session.post('Debugger.enable');
let status = null;
session.post('Debugger.setScriptSource', { scriptId: id, scriptSource: next }, (e, r) => {
  status = e ? String(e) : r.status;
});
const functionsNow = [...ends].map(([fn, end]) => [end, Function.prototype.toString.call(fn).includes('__strobe.')]);
console.log(JSON.stringify({ status, functions: functionsNow }));
"""

SHAPES = """\
'use strict';
function plain(a, b) {
  return a + b;
}
function empty() {}
function oneLine(x) { return x * 3 }
async function later() {
  return 1;
}
const arrow = (a) => {
  return a;
};
const bare = x => x + 1;
const noParams = () => 42;
function outer(n) {
  const inner = (k) => {
    return k + n;
  };
  return inner(1);
}
class Cart {
  constructor(items) { this.items = items; }
  get size() { return this.items.length; }
  add(item) {
    this.items.push(item);
    return this;
  }
  static of() { return new Cart([]); }
  total = () => {
    return this.items.length;
  };
}
const api = {
  get(key) { return key; },
  put: function (key, value) {
    return [key, value];
  },
  nested: { deep(v) { return v; } },
};
function run() {
  return function named() {
    return 'inner';
  };
}
module.exports = { plain, empty, oneLine, later, arrow, bare, noParams, outer, Cart, api, run };
"""


def v8_answer(tmp_path: Path, name: str, text: str, rewritten: str) -> dict[str, object]:
    module, new, harness = tmp_path / name, tmp_path / f"{name}.new", tmp_path / "harness.js"
    module.write_text(text)
    new.write_text(rewritten)
    harness.write_text(HARNESS)
    done = subprocess.run([str(NODE), str(harness), str(module), str(new)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def check_against_v8(tmp_path: Path, name: str, text: str, one_at_a_time: bool) -> tuple[int, int]:
    """(functions checked, predicted kept but V8 gave new code): fails on a function predicted to get new code
    that V8 left with its old code."""
    functions = [f for f in index_source(text, name) if skip_reason(f) is None]
    groups = [[f] for f in functions] if one_at_a_time else [functions]
    checked = conservative = 0
    for group in groups:
        result = wrap_functions(text, list(enumerate(group, 1)))
        misses = unmapped(text, None, result, group)
        answer = v8_answer(tmp_path, name, text, result.source)
        assert answer["status"] == "Ok", answer
        by_end = {f.body_end: f for f in group}
        for end, updated in answer["functions"]:  # type: ignore[attr-defined]
            function = by_end.get(end)  # reachable functions only, found by where their text ends (BMP text)
            if function is None:
                continue
            checked += 1
            assert updated or function in misses, f"{function.name}: predicted to get new code, V8 kept its code"
            conservative += function in misses and updated
    return checked, conservative


@needs_node
@pytest.mark.parametrize("one_at_a_time", [False, True], ids=["all at once", "one at a time"])
def test_the_prediction_agrees_with_v8_on_many_shapes(tmp_path: Path, one_at_a_time: bool) -> None:
    checked, conservative = check_against_v8(tmp_path, "shapes.js", SHAPES, one_at_a_time)
    assert checked >= 12 and conservative == 0


@needs_node
@pytest.mark.skipif(not SEMVER.exists(), reason="scripts/bootstrap.sh installs tests/toolchains (semver)")
def test_the_prediction_agrees_with_v8_on_a_real_package(tmp_path: Path) -> None:
    checked, conservative = check_against_v8(tmp_path, "semver.js", SEMVER.read_text(), one_at_a_time=False)
    assert checked >= 40 and conservative <= checked // 20


def test_an_expression_bodied_arrow_and_a_function_inside_a_newly_wrapped_one_are_said_to_keep_their_code() -> None:
    functions = {f.name: f for f in index_source(SHAPES, "shapes.js")}
    wanted = [functions[n] for n in ("bare", "outer", "outer.inner", "plain")]
    result = wrap_functions(SHAPES, list(enumerate(wanted, 1)))
    misses = unmapped(SHAPES, None, result, wanted)
    assert misses[functions["bare"]] == EXPRESSION_BODY
    assert "inside outer" in misses[functions["outer.inner"]]
    assert functions["plain"] not in misses and functions["outer"] not in misses
    # loaded under a plan that wrapped outer already: adding inner changes no scope around it
    earlier = wrap_functions(SHAPES, [(1, functions["outer"])])
    again = unmapped(SHAPES, earlier, result, [functions["outer.inner"]])
    assert again == {}


def test_v8s_diff_of_an_insertion_and_how_it_carries_positions() -> None:
    old, new = "function f() {\n  return 1;\n}\n", "function f() {\n  return 1;\n})}\n"
    changes = source_changes(old, new)
    assert changes == [Change(27, 27, 27, 29)]  # "})" before the closing brace: Myers' choice in V8 11
    assert carried(changes, 28) == 30 and carried(changes, 27) == 27  # after the brace; at the insertion: before
    assert maps(changes, (10, 28), (10, 30))
    # a boundary inside a replaced range is lost
    assert carried([Change(5, 9, 5, 7)], 7) is None
    assert utf16_offset("a😀b", 2) == 3  # V8 counts UTF-16 units


def test_a_misaligned_wrapper_is_said_so() -> None:
    # spaced the way a person might write it, V8's diff takes "in" of "plain" into the insertion: the start moves
    old = "function plain() {\n  return 1;\n}\n"
    [function] = index_source(old, "p.js")
    result = wrap_functions(old, [(5, function)])
    assert unmapped(old, None, result, [function]) == {}  # as js_transform writes it, V8 finds it again
    opening, closing = result.insertions
    spaced_open = replace(opening, text=" return __strobe.c(5, this, arguments, () => {")
    spaced = replace(result, source=result.source.replace(opening.text, spaced_open.text),
                     insertions=(spaced_open, closing))
    assert unmapped(old, None, spaced, [function]) == {function: MISALIGNED}
