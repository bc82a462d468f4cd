"""The Node.js preload (src/strobe/instrument/nodetracer): real node processes started with NODE_OPTIONS and a
STROBE_NODE_DIR holding a hand-written plan.json, with hand-written rewritten sources (same lines as the originals),
their events files read back as the daemon reads them (the head regex of runtimes/cpython.py, orjson, the crash
fields of cpython_ingest.py). No sleeps: waits poll the events file or the process against a deadline."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest

from strobe.daemon.runtimes.cpython import batch_size
from strobe.daemon.runtimes.cpython_ingest import crash_fields, stored_value
from strobe.instrument.nodetracer import DIR_VARIABLE, PLAN_FILE, PRELOAD, SOURCES, events_file, node_options

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not on PATH")
ENTER, RETURN, UNWIND, CRASH = 1, 2, 3, 9
DEADLINE_S = 30.0
Event = list[Any]



def untraced_by_a_loader(file: str) -> str:
    return (f"{file}: runs untraced: a loader transformed its source before Node compiled it (Strobe traces through "
            "tsx, ts-node's CommonJS hook, test runners, or compiled JavaScript with source maps)")

def sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def line_of(text: str, needle: str) -> int:
    """The 1-based line of the first occurrence of `needle`."""
    return text[: text.index(needle)].count("\n") + 1


def wait_for(check: Callable[[], bool], what: str, deadline_s: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)  # a polling interval, not a synchronisation


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    batches: list[dict[str, Any]]

    @property
    def events(self) -> list[Event]:
        return [event for batch in self.batches for event in batch["events"]]

    @property
    def errors(self) -> list[str]:
        return [error for batch in self.batches for error in batch.get("errors", [])]

    def of(self, fid: int, kind: int | None = None) -> list[Event]:
        return [e for e in self.events if e[1] == fid and (kind is None or e[0] == kind)]


@dataclass
class Project:
    """Original sources under src/, rewritten ones under rewritten/, the preload's directory under strobe/."""

    root: Path
    files: dict[str, dict[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root = self.root.resolve()  # node names modules by their real path
        for name in ("src", "rewritten", "strobe"):
            (self.root / name).mkdir(exist_ok=True)

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def strobe(self) -> Path:
        return self.root / "strobe"

    def source(self, name: str, original: str, rewritten: str | None = None, indexed: str | None = None) -> Path:
        """Write a source; with `rewritten`, list it in the plan with the sha1 of `indexed` (default: `original`)."""
        path = self.src / name
        path.write_text(original)
        if rewritten is not None:
            assert rewritten.count("\n") == original.count("\n"), f"{name}: the rewritten text must keep the lines"
            out = self.root / "rewritten" / name
            out.write_text(rewritten)
            self.files[str(path)] = {"sha1": sha1(original if indexed is None else indexed), "transformed": str(out)}
        return path

    def plan(self, on: list[int], names: dict[int, list[str] | None] | None = None, **extra: Any) -> None:
        """plan.json, replaced atomically like the daemon does."""
        plan = {"v": 1, "depth": 3, "on": on, "names": {str(k): v for k, v in (names or {}).items()},
                "files": self.files, **extra}
        temporary = self.strobe / "plan.json.tmp"
        temporary.write_text(json.dumps(plan))
        os.replace(temporary, self.strobe / PLAN_FILE)

    def env(self, traced: bool = True, node_options_before: str | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("NODE_OPTIONS", DIR_VARIABLE)}
        if traced:
            env["NODE_OPTIONS"] = node_options(node_options_before)
            env[DIR_VARIABLE] = str(self.strobe)
        return env

    def run(self, script: str, *args: str, traced: bool = True, env: dict[str, str] | None = None) -> Run:
        done = subprocess.run([str(NODE), str(self.src / script), *args], cwd=self.src, capture_output=True,
                              text=True, timeout=DEADLINE_S, env=env or self.env(traced))
        return Run(done.returncode, done.stdout, done.stderr, self.batches())

    def start(self, script: str, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([str(NODE), str(self.src / script), *args], cwd=self.src, env=self.env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def batches(self) -> list[dict[str, Any]]:
        """Every complete line of every events file, checked the way the daemon reads it."""
        batches = []
        for path in sorted(self.strobe.glob("events-*.jsonl")):
            pid = int(path.stem.split("-")[1])
            assert path.stat().st_mode & 0o777 == 0o600
            for line in path.read_bytes().splitlines(keepends=True):
                if not line.endswith(b"\n"):
                    continue  # being written
                batch = orjson.loads(line)  # strict: a lone surrogate would fail here
                assert line.startswith(b'{"v":1,"n":') and batch_size(line) == len(batch["events"])
                assert batch["pid"] == pid and isinstance(batch["dropped"], int)
                batches.append(batch)
        return batches

    def events(self) -> list[Event]:
        return [event for batch in self.batches() for event in batch["events"]]


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


def args_of(event: Event) -> list[list[Any]]:
    assert event[0] == ENTER
    return event[6]["args"]  # type: ignore[no-any-return]


# ---- CommonJS ----

LIB = """\
'use strict';
class Cart { constructor(items) { this.items = items; } }
function total(cart, discount) {
  let sum = 0;
  for (const item of cart.items) sum += price(item);
  return sum - discount;
}
function price(item) {
  return item.cost * item.qty;
}
function check(limit) {
  if (limit < 0) throw new RangeError('limit below zero: ' + limit);
  return limit;
}
function same(obj) { return obj; }
function fail(error) { throw error; }
const double = (n) => n * 2;
const blind = ({ n }) => n + 1;
module.exports = { Cart, total, price, check, same, fail, double, blind };
"""
LIB_REWRITTEN = """\
'use strict';
class Cart { constructor(items) { this.items = items; } }
function total(cart, discount) { return __strobe.c(1, this, arguments, () => {
  let sum = 0;
  for (const item of cart.items) sum += price(item);
  return sum - discount;
}); }
function price(item) { return __strobe.c(2, this, arguments, () => {
  return item.cost * item.qty;
}); }
function check(limit) { return __strobe.c(3, this, arguments, () => {
  if (limit < 0) throw new RangeError('limit below zero: ' + limit);
  return limit;
}); }
function same(obj) { return __strobe.c(4, this, arguments, () => { return obj; }); }
function fail(error) { return __strobe.c(5, this, arguments, () => { throw error; }); }
const double = (n) => __strobe.c(6, this, [n], () => n * 2);
const blind = ({ n }) => __strobe.c(7, this, undefined, () => n + 1);
module.exports = { Cart, total, price, check, same, fail, double, blind };
"""
MAIN = """\
const lib = require('./lib.js');
const cart = new lib.Cart([{ cost: 2, qty: 3 }, { cost: 5, qty: 1 }]);
console.log('total', lib.total(cart, 1));
const obj = { a: 1 };
console.log('same object back', lib.same(obj, 'extra') === obj);
try { lib.check(-1); } catch (e) { console.log('caught', e.name, e.message); }
const mine = new Error('mine');
try { lib.fail(mine); } catch (e) { console.log('same error rethrown', e === mine); }
console.log('arrows', lib.double(21), lib.blind({ n: 1 }));
"""


def test_commonjs_sources_are_substituted_and_calls_recorded(project: Project) -> None:
    project.source("lib.js", LIB, LIB_REWRITTEN)
    project.source("main.js", MAIN)
    project.plan(on=[1, 2, 3, 4, 5, 6, 7], names={1: ["cart", "discount"], 2: ["item"], 3: ["limit"], 4: None,
                                                  5: ["error"], 6: ["n"]})
    run = project.run("main.js")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["total 10", "same object back true", "caught RangeError limit below zero: -1",
                                       "same error rethrown true", "arrows 42 2"]
    assert run.errors == []
    shape = [(e[0], e[1], e[4], e[5]) for e in run.events]  # kind, id, seq, parent seq
    assert shape == [(ENTER, 1, 1, 0), (ENTER, 2, 2, 1), (RETURN, 2, 3, 1), (ENTER, 2, 4, 1), (RETURN, 2, 5, 1),
                     (RETURN, 1, 6, 0), (ENTER, 4, 7, 0), (RETURN, 4, 8, 0), (ENTER, 3, 9, 0), (UNWIND, 3, 10, 0),
                     (ENTER, 5, 11, 0), (UNWIND, 5, 12, 0), (ENTER, 6, 13, 0), (RETURN, 6, 14, 0),
                     (ENTER, 7, 15, 0), (RETURN, 7, 16, 0)]
    events = run.events
    assert args_of(events[0]) == [["cart", {"__type__": "Cart", "items": [{"cost": 2, "qty": 3},
                                                                          {"cost": 5, "qty": 1}]}], ["discount", 1]]
    assert args_of(events[1]) == [["item", {"cost": 2, "qty": 3}]]
    assert [e[6]["return"] for e in (events[2], events[4], events[5])] == [6, 5, 10]
    assert events[5][6]["enter"] == 1 and events[2][6]["enter"] == 2
    assert args_of(events[6]) == [["arg0", {"a": 1}], ["arg1", "extra"]]  # names null: arg0, arg1...
    assert events[7][6]["return"] == {"a": 1}
    assert events[9][6]["exception"] == {"type": "RangeError", "message": "limit below zero: -1",
                                         "line": line_of(LIB, "throw new RangeError")}
    assert events[11][6]["exception"] == {"type": "Error", "message": "mine", "line": line_of(MAIN, "new Error")}
    assert args_of(events[12]) == [["n", 21]] and events[13][6]["return"] == 42
    assert events[14][6] == {} and events[15][6]["return"] == 2  # an arrow that passed undefined
    for enter in (e for e in events if e[0] == ENTER):
        exit_ = next(e for e in events if e[0] != ENTER and e[6]["enter"] == enter[4])
        assert exit_[6]["duration"] == exit_[2] - enter[2] >= 0 and exit_[3] == enter[3] == 0
    assert [e[2] for e in events] == sorted(e[2] for e in events)
    assert abs(events[0][2] - time.monotonic_ns()) < 60e9  # CLOCK_MONOTONIC, like the daemon's
    assert run.batches[0]["threads"] == [[0, "main"]]


def test_a_changed_commonjs_file_runs_untraced_and_says_why(project: Project) -> None:
    project.source("lib.js", LIB, LIB_REWRITTEN, indexed=LIB.replace("limit below zero", "limit < 0"))
    project.source("main.js", MAIN)
    gone = project.source("gone.js", "module.exports = 1;\n", "module.exports = 2;\n")
    Path(project.files[str(gone)]["transformed"]).unlink()
    project.source("both.js", MAIN.replace("const lib", "require('./gone.js');\nconst lib"))
    project.plan(on=[1, 2, 3, 4, 5, 6, 7])
    run = project.run("both.js")
    assert run.returncode == 0, run.stderr
    assert run.stdout == project.run("both.js", traced=False).stdout
    assert run.events == []
    lib, gone_text = str(project.src / "lib.js"), str(gone)
    assert any(e.startswith(f"{lib}: file changed since it was indexed") for e in run.errors), run.errors
    assert any(e.startswith(f"{gone_text}: its rewritten source cannot be read") for e in run.errors), run.errors


# ---- loaders that read a listed file themselves (tsx's require hook) ----

TYPED = """\
function scale(value: number, factor: number): number {
  return value * factor;
}
module.exports = { scale };
"""
TYPED_REWRITTEN = """\
function scale(value: number, factor: number): number { return __strobe.c(30, this, arguments, () => {
  return value * factor;
}); }
module.exports = { scale };
"""
# A transpiler's require hook as tsx has one: it reads the file itself and compiles what it makes of it.
TRANSPILER = """\
const fs = require('fs');
const Module = require('module');
Module._extensions['.ts'] = function transpile(module, filename) {
  const source = READ;
  module._compile(String(source).replace(/: number/g, ''), filename);
};
"""
TYPED_MAIN = "require('./transpiler.js');\nconsole.log(require('./typed.ts').scale(2, 3));\n"


def typed_project(project: Project, read: str, indexed: str | None = None) -> None:
    project.source("typed.ts", TYPED, TYPED_REWRITTEN, indexed=indexed)
    project.source("transpiler.js", TRANSPILER.replace("READ", read))
    project.source("main.js", TYPED_MAIN)
    project.plan(on=[30], names={30: ["value", "factor"]})


@pytest.mark.parametrize("read", ["fs.readFileSync(filename, 'utf8')", "fs.readFileSync(filename)",
                                  "fs.readFileSync(filename, { encoding: 'latin1', flag: 'r' })"])
def test_a_loader_reading_a_listed_file_is_given_its_rewritten_text(project: Project, read: str) -> None:
    typed_project(project, read)
    run = project.run("main.js")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "6\n"
    assert [(e[0], e[1]) for e in run.events] == [(ENTER, 30), (RETURN, 30)]
    assert args_of(run.events[0]) == [["value", 2], ["factor", 3]] and run.events[1][6]["return"] == 6
    assert run.errors == []  # the loader's output is neither text the plan knows: not reported as changed


def test_a_loader_reading_a_changed_file_gets_it_and_it_runs_untraced(project: Project) -> None:
    typed_project(project, "fs.readFileSync(filename, 'utf8')", indexed=TYPED + "// older\n")
    run = project.run("main.js")
    assert (run.returncode, run.stdout, run.events) == (0, "6\n", [])
    typed = str(project.src / "typed.ts")
    assert [e for e in run.errors if e.startswith(typed)] == [
        f"{typed}: file changed since it was indexed (sha1 {sha1(TYPED.replace(': number', ''))}, indexed "
        f"{sha1(TYPED + '// older' + chr(10))}): running it untraced"]


def test_a_loader_reading_a_listed_file_another_way_runs_it_untraced_and_says_so(project: Project) -> None:
    typed_project(project, "fs.readFileSync(require('url').pathToFileURL(filename))")  # a URL: not substituted
    run = project.run("main.js")
    assert (run.returncode, run.stdout, run.events) == (0, "6\n", [])
    typed = str(project.src / "typed.ts")
    assert run.errors == [untraced_by_a_loader(typed)]


SELF = """\
const fs = require('fs');
const own = fs.readFileSync(__filename, 'utf8');
const during = require('./peer.js');
function twice(x) {
  return x * 2;
}
module.exports = { twice, own, during };
"""
SELF_REWRITTEN = """\
const fs = require('fs');
const own = fs.readFileSync(__filename, 'utf8');
const during = require('./peer.js');
function twice(x) { return __strobe.c(31, this, arguments, () => {
  return x * 2;
}); }
module.exports = { twice, own, during };
"""
PEER = "module.exports = require('fs').readFileSync(require('path').join(__dirname, process.argv[2]));\n"
SELF_MAIN = """\
require('./transpiler.js');
const fs = require('fs');
const hash = (data) => require('crypto').createHash('sha1').update(data).digest('hex');
const file = require('path').join(__dirname, process.argv[2]);
const before = fs.readFileSync(file, 'utf8');
const self = require(file);
console.log(self.twice(4));
console.log(JSON.stringify([before, self.own, self.during, fs.readFileSync(file)].map(hash)));
"""


@pytest.mark.parametrize("name", ["self.js", "self.ts"])  # read by Node's own .js handler; by a loader's own read
def test_a_program_reading_its_own_listed_files_gets_what_is_on_disk(project: Project, name: str) -> None:
    """Reads are substituted only between a module's entry in require.cache and its compile: the program's own
    code (before the require, in the module's top level, in a module it requires meanwhile, afterwards) reads the
    file as it is, while the module is still substituted."""
    project.source(name, SELF, SELF_REWRITTEN)
    project.source("peer.js", PEER)
    project.source("transpiler.js", TRANSPILER.replace("READ", "fs.readFileSync(filename, 'utf8')"))
    project.source("main.js", SELF_MAIN)
    project.plan(on=[31], names={31: ["x"]})
    run = project.run("main.js", name)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "8" and [(e[0], e[1]) for e in run.events] == [(ENTER, 31), (RETURN, 31)]
    assert json.loads(lines[1]) == [sha1(SELF)] * 4
    assert run.errors == []


# A require hook as ts-node has one: Node's own .js handler reads the file, the hook transforms what it compiles.
COMPILE_WRAPPER = """\
const Module = require('module');
const js = Module._extensions['.js'];
Module._extensions['.ts'] = function transpile(module, filename) {
  const compile = module._compile;
  module._compile = function (code, file) { return compile.call(this, code.replace(/: number/g, ''), file); };
  return js(module, filename);
};
"""


def test_nodes_own_read_is_left_alone_so_a_compile_wrapper_transforms_the_original(project: Project) -> None:
    """Such a hook may type-check what it compiles (ts-node): it is not given the rewritten text, which declares
    nothing for the wrapper's globals; the module runs untraced, and the preload says why."""
    typed_project(project, "")
    project.source("transpiler.js", COMPILE_WRAPPER)
    run = project.run("main.js")
    assert (run.returncode, run.stdout, run.events) == (0, "6\n", [])
    typed = str(project.src / "typed.ts")
    assert run.errors == [untraced_by_a_loader(typed)]


TSX_LOADER = Path(__file__).resolve().parents[1] / "toolchains" / "node_modules" / "tsx" / "dist" / "loader.mjs"
GREET = """\
export class Greeter {
  constructor(private readonly greeting: string) {}

  greet(name: string, times: number = 1): string {
    return `${this.greeting} ${name}`.repeat(times);
  }
}

export function fail(reason: string): never {
  throw new TypeError(reason);
}
"""
GREET_REWRITTEN = """\
export class Greeter {
  constructor(private readonly greeting: string) {}

  greet(name: string, times: number = 1): string { return __strobe.c(40, this, arguments, () => {
    return `${this.greeting} ${name}`.repeat(times);
  }); }
}

export function fail(reason: string): never { return __strobe.c(41, this, arguments, () => {
  throw new TypeError(reason);
}); }
"""
GREET_MAIN = """\
import { Greeter, fail } from './greet';
const greeter: Greeter = new Greeter('hi');
console.log(greeter.greet('ada', 2));
fail('on purpose');
"""


@pytest.mark.skipif(not TSX_LOADER.exists(), reason=f"tsx is not installed ({TSX_LOADER} is missing): "
                                                    "scripts/bootstrap.sh installs tests/toolchains/package.json")
@pytest.mark.parametrize("package_type", ["commonjs", "module"])
def test_typescript_through_tsx(project: Project, package_type: str) -> None:
    """CommonJS: tsx's require hook reads the file (substituted); ES modules: tsx's load hook runs above Strobe's
    and compiles the source Strobe's hook substituted. tsx's source maps keep the TypeScript files and lines."""
    (project.src / "package.json").write_text(json.dumps({"type": package_type}))
    project.source("greet.ts", GREET, GREET_REWRITTEN)
    project.source("main.ts", GREET_MAIN)
    project.plan(on=[40, 41], names={40: ["name", "times"], 41: ["reason"]})
    done = subprocess.run([str(NODE), "--import", str(TSX_LOADER), str(project.src / "main.ts")], cwd=project.src,
                          capture_output=True, text=True, timeout=DEADLINE_S, env=project.env())
    run = Run(done.returncode, done.stdout, done.stderr, project.batches())
    assert (run.returncode, run.stdout) == (1, "hi adahi ada\n"), run.stderr
    assert run.errors == []
    assert [(e[0], e[1]) for e in run.events] == [(ENTER, 40), (RETURN, 40), (ENTER, 41), (UNWIND, 41), (CRASH, 0)]
    assert args_of(run.events[0]) == [["name", "ada"], ["times", 2]]
    throw = line_of(GREET, "throw new TypeError")
    assert run.events[3][6]["exception"] == {"type": "TypeError", "message": "on purpose", "line": throw}
    crash = crash_fields(run.events[4][6])
    frames = [(f["function"], Path(f["file"]).name, f["line"]) for f in crash["backtrace"]]
    assert frames[0] == ("fail", "greet.ts", throw), frames
    assert ("main.ts", line_of(GREET_MAIN, "fail('on purpose')")) in [(file, line) for _, file, line in frames]
    assert f"greet.ts:{throw}" in run.stderr


# ---- ES modules ----

SHOP = """\
export function priceOf(sku, qty) {
  return sku.length * qty;
}
"""
SHOP_REWRITTEN = """\
export function priceOf(sku, qty) { return __strobe.c(20, this, arguments, () => {
  return sku.length * qty;
}); }
"""
STALE = "export function stale(x) {\n  return x;\n}\n"
STALE_REWRITTEN = "export function stale(x) { return __strobe.c(21, this, arguments, () => {\n  return x;\n}); }\n"
LEGACY = "exports.legacy = function legacy(x) {\n  return -x;\n};\n"
LEGACY_REWRITTEN = ("exports.legacy = function legacy(x) { return __strobe.c(22, this, arguments, () => {\n"
                    "  return -x;\n}); };\n")
ESM_MAIN = """\
import { priceOf } from './shop.mjs';
import { stale } from './stale.mjs';
import { legacy } from './legacy.cjs';
console.log(priceOf('abc', 2), stale(5), legacy(7));
"""


def test_es_modules_are_substituted_through_the_load_hook(project: Project) -> None:
    project.source("shop.mjs", SHOP, SHOP_REWRITTEN)
    older = STALE + "// older\n"
    project.source("stale.mjs", STALE, STALE_REWRITTEN, indexed=older)
    project.source("legacy.cjs", LEGACY, LEGACY_REWRITTEN)  # CommonJS imported from ESM: the _compile path
    project.source("main.mjs", ESM_MAIN)
    project.plan(on=[20, 21, 22], names={20: ["sku", "qty"], 22: ["x"]})
    run = project.run("main.mjs")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "6 5 -7\n"
    assert [(e[0], e[1]) for e in run.events] == [(ENTER, 20), (RETURN, 20), (ENTER, 22), (RETURN, 22)]
    assert args_of(run.events[0]) == [["sku", "abc"], ["qty", 2]] and run.events[1][6]["return"] == 6
    assert args_of(run.events[2]) == [["x", 7]] and run.events[3][6]["return"] == -7
    stale = str(project.src / "stale.mjs")
    assert [e for e in run.errors if "file changed" in e] == [
        f"{stale}: file changed since it was indexed (sha1 {sha1(STALE)}, indexed {sha1(older)}): "
        "running it untraced"]
    hook_batches = [b for b in run.batches if b.get("errors") and not b["events"]]
    assert hook_batches and all(b["n"] == 0 for b in hook_batches)  # the hooks thread reports at once


def test_without_module_register_only_commonjs_is_traced(project: Project, tmp_path: Path) -> None:
    project.source("shop.mjs", SHOP, SHOP_REWRITTEN)
    project.source("legacy.cjs", LEGACY, LEGACY_REWRITTEN)
    project.source("main.mjs", "import { priceOf } from './shop.mjs';\nimport { legacy } from './legacy.cjs';\n"
                               "console.log(priceOf('ab', 1), legacy(1));\n")
    project.plan(on=[20, 22])
    older = tmp_path / "older-node.cjs"
    older.write_text("delete require('module').register;\n")
    run = project.run("main.mjs", env=project.env(node_options_before=f"--require {older}"))
    assert run.returncode == 0 and run.stdout == "2 -1\n", run.stderr
    assert [(e[0], e[1]) for e in run.events] == [(ENTER, 22), (RETURN, 22)]
    assert any("module.register is missing" in e and "CommonJS only" in e for e in run.errors), run.errors


# ---- async ----

ASYNC_LIB = """\
const delay = (ms, value) => new Promise((resolve) => setTimeout(resolve, ms, value));
function helper(step) {
  return step;
}
async function fetchPrice(sku) {
  helper('before');
  const price = await delay(30, 7);
  helper('after');
  return price * 2;
}
async function failing(reason) {
  await delay(10);
  throw new Error(reason);
}
module.exports = { fetchPrice, failing };
"""
ASYNC_REWRITTEN = """\
const delay = (ms, value) => new Promise((resolve) => setTimeout(resolve, ms, value));
function helper(step) { return __strobe.c(32, this, arguments, () => {
  return step;
}); }
async function fetchPrice(sku) { return __strobe.a(30, this, arguments, async () => {
  helper('before');
  const price = await delay(30, 7);
  helper('after');
  return price * 2;
}); }
async function failing(reason) { return __strobe.a(31, this, arguments, async () => {
  await delay(10);
  throw new Error(reason);
}); }
module.exports = { fetchPrice, failing };
"""
ASYNC_MAIN = """\
const { fetchPrice, failing } = require('./shop.js');
(async () => {
  console.log('price', await fetchPrice('A1'));
  try { await failing('sold out'); } catch (e) { console.log('caught', e.message); }
})();
"""


def test_async_calls_end_when_their_promise_settles(project: Project) -> None:
    project.source("shop.js", ASYNC_LIB, ASYNC_REWRITTEN)
    project.source("main.js", ASYNC_MAIN)
    project.plan(on=[30, 31, 32], names={30: ["sku"], 31: ["reason"], 32: ["step"]})
    run = project.run("main.js")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "price 14\ncaught sold out\n"
    shape = [(e[0], e[1], e[4], e[5]) for e in run.events]
    # helper('before') runs in fetchPrice's synchronous part (its child); helper('after') after an await (no parent)
    assert shape == [(ENTER, 30, 1, 0), (ENTER, 32, 2, 1), (RETURN, 32, 3, 1), (ENTER, 32, 4, 0), (RETURN, 32, 5, 0),
                     (RETURN, 30, 6, 0), (ENTER, 31, 7, 0), (UNWIND, 31, 8, 0)]
    events = run.events
    assert args_of(events[1]) == [["step", "before"]] and args_of(events[3]) == [["step", "after"]]
    assert events[5][6]["return"] == 14 and events[5][6]["enter"] == 1
    assert events[5][6]["duration"] >= 25_000_000  # spans the awaited 30 ms timer
    assert events[7][6]["exception"] == {"type": "Error", "message": "sold out",
                                         "line": line_of(ASYNC_LIB, "throw new Error")}
    assert events[7][6]["enter"] == 7 and events[7][6]["duration"] >= 5_000_000


# ---- the plan changes while the program runs ----

WORK = """\
function first(i) {
  return i;
}
function second(i) {
  return -i;
}
module.exports = { tick(i) { first(i); second(i); } };
"""
WORK_REWRITTEN = """\
function first(i) { return __strobe.c(1, this, arguments, () => {
  return i;
}); }
function second(i) { return __strobe.c(2, this, arguments, () => {
  return -i;
}); }
module.exports = { tick(i) { first(i); second(i); } };
"""
LOOP = """\
const fs = require('fs');
const { tick } = require('./work.js');
let calls = 0;
const timer = setInterval(() => {
  tick(calls++);
  if (fs.existsSync(process.argv[2])) { clearInterval(timer); console.log('calls', calls); }
}, 2);
setTimeout(() => { clearInterval(timer); console.log('deadline'); }, 25000).unref();
"""


def test_a_new_on_set_applies_to_the_next_calls(project: Project) -> None:
    project.source("work.js", WORK, WORK_REWRITTEN)
    project.source("loop.js", LOOP)
    project.plan(on=[1])
    stop = project.root / "stop"
    proc = project.start("loop.js", str(stop))
    try:
        wait_for(lambda: len([e for e in project.events() if e[:2] == [ENTER, 1]]) >= 3, "calls of first()")
        project.plan(on=[2])
        wait_for(lambda: len([e for e in project.events() if e[:2] == [ENTER, 2]]) >= 3, "calls of second()")
        stop.touch()
        out, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0 and out.startswith("calls "), err
    events = project.events()
    firsts, seconds = [e for e in events if e[1] == 1], [e for e in events if e[1] == 2]
    assert max(e[4] for e in firsts) < min(e[4] for e in seconds)  # once second() is on, first() is not recorded
    assert len(firsts) % 2 == 0 and len(seconds) % 2 == 0  # every recorded call has its exit
    # tick i calls first(i) then second(i): first's calls are recorded up to the change, second's from it on
    ticks, switched = int(out.split()[1]), len(firsts) // 2
    assert [args_of(e)[0][1] for e in firsts if e[0] == ENTER] == list(range(switched))
    assert [args_of(e)[0][1] for e in seconds if e[0] == ENTER] == list(range(switched, ticks))
    assert 3 <= switched < ticks - 3


# ---- exits, threads, children ----

EXIT_LIB = """\
function work(n) {
  return n * n;
}
function shutdown(code) {
  process.exit(code);
}
module.exports = { work, shutdown };
"""
EXIT_REWRITTEN = """\
function work(n) { return __strobe.c(1, this, arguments, () => {
  return n * n;
}); }
function shutdown(code) { return __strobe.c(2, this, arguments, () => {
  process.exit(code);
}); }
module.exports = { work, shutdown };
"""


def test_process_exit_inside_a_traced_call_still_writes_the_events(project: Project) -> None:
    project.source("lib.js", EXIT_LIB, EXIT_REWRITTEN)
    project.source("main.js", "const { work, shutdown } = require('./lib.js');\n"
                              "for (let i = 0; i < 3; i++) work(i);\nshutdown(3);\nconsole.log('not reached');\n")
    project.plan(on=[1, 2], names={2: ["code"]})
    run = project.run("main.js")
    assert run.returncode == 3 and run.stdout == ""
    assert [(e[0], e[1]) for e in run.events] == [(ENTER, 1), (RETURN, 1)] * 3 + [(ENTER, 2)]
    assert args_of(run.events[-1]) == [["code", 3]]


CALC = "function compute(n) {\n  return n + 1;\n}\nmodule.exports = { compute };\n"
CALC_REWRITTEN = ("function compute(n) { return __strobe.c(40, this, arguments, () => {\n  return n + 1;\n}); }\n"
                  "module.exports = { compute };\n")
SCALE = "export function scale(n) {\n  return n * 10;\n}\n"
SCALE_REWRITTEN = "export function scale(n) { return __strobe.c(41, this, arguments, () => {\n  return n * 10;\n}); }\n"
WORKER_MAIN = """\
const path = require('path');
const { Worker } = require('worker_threads');
const { compute } = require('./calc.js');
console.log('main', compute(1));
const worker = new Worker(path.join(__dirname, 'worker.mjs'));
worker.on('message', (m) => console.log('worker', m.tid, m.value));
worker.on('exit', () => console.log('main', compute(2)));
"""
WORKER = """\
import { parentPort, threadId } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { scale } from './scale.mjs';
const { compute } = createRequire(import.meta.url)('./calc.js');
parentPort.postMessage({ tid: threadId, value: scale(compute(3)) });
"""


def test_a_worker_thread_records_with_its_thread_id(project: Project) -> None:
    project.source("calc.js", CALC, CALC_REWRITTEN)
    project.source("scale.mjs", SCALE, SCALE_REWRITTEN)
    project.source("worker.mjs", WORKER)
    project.source("main.js", WORKER_MAIN)
    project.plan(on=[40, 41])
    run = project.run("main.js")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "main 2" and lines[2] == "main 3" and lines[1].endswith(" 40")
    tid = int(lines[1].split()[1])
    assert tid > 0
    by_thread = {t: [(e[0], e[1], e[6].get("return")) for e in run.events if e[3] == t] for t in (0, tid)}
    assert by_thread[0] == [(ENTER, 40, None), (RETURN, 40, 2), (ENTER, 40, None), (RETURN, 40, 3)]
    assert by_thread[tid] == [(ENTER, 40, None), (RETURN, 40, 4), (ENTER, 41, None), (RETURN, 41, 40)]
    seqs = [e[4] for e in run.events]
    assert sorted(seqs) == list(range(1, 9))  # one sequence for the whole process
    threads = [t for b in run.batches for t in b.get("threads", [])]
    assert sorted(threads) == [[0, "main"], [tid, f"worker {tid}"]]


WORKER_CRASH = """\
const { Worker } = require('worker_threads');
const w = new Worker("require('./calc.js').compute(1); throw new TypeError('worker broke');", { eval: true });
w.on('error', (e) => console.log('main saw', e.message));
w.on('exit', () => console.log('main goes on', require('./calc.js').compute(2)));
"""


def test_an_uncaught_exception_in_a_worker_is_its_crash(project: Project) -> None:
    project.source("calc.js", CALC, CALC_REWRITTEN)
    project.source("main.js", WORKER_CRASH)
    project.plan(on=[40])
    run = project.run("main.js")
    assert run.returncode == 0 and run.stdout == "main saw worker broke\nmain goes on 3\n", run.stderr
    crashes = run.of(0, CRASH)
    assert len(crashes) == 1 and crashes[0][3] > 0
    assert {k: crashes[0][6][k] for k in ("type", "message", "thread")} == {
        "type": "TypeError", "message": "worker broke", "thread": f"worker {crashes[0][3]}"}
    assert [(e[0], e[3] == 0) for e in run.of(40)] == [(ENTER, False), (RETURN, False), (ENTER, True), (RETURN, True)]


LATE_IMPORT = """\
const fs = require('fs');
const { compute } = require('./calc.js');
compute(1);
const timer = setInterval(async () => {
  if (!fs.existsSync(process.argv[2])) return;
  clearInterval(timer);
  require('./other.js'); // a module load: the plan is read again
  const { scale } = await import('./scale.mjs');
  console.log(scale(2));
}, 2);
setTimeout(() => { clearInterval(timer); console.log('deadline'); }, 25000).unref();
"""


def test_the_es_module_hook_is_registered_once_the_plan_lists_an_es_module(project: Project) -> None:
    project.source("calc.js", CALC, CALC_REWRITTEN)
    project.source("other.js", "module.exports = 0;\n")
    project.source("main.js", LATE_IMPORT)
    project.plan(on=[40, 41])  # CommonJS files only: no hooks thread (about 30 ms of startup) yet
    go = project.root / "go"
    proc = project.start("main.js", str(go))
    try:
        wait_for(lambda: any(e[:2] == [ENTER, 40] for e in project.events()), "the call of compute()")
        project.source("scale.mjs", SCALE, SCALE_REWRITTEN)
        project.plan(on=[40, 41])
        go.touch()
        out, err = proc.communicate(timeout=DEADLINE_S)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0 and out == "20\n", err
    assert [(e[0], e[1], e[6].get("return")) for e in project.events()] == [
        (ENTER, 40, None), (RETURN, 40, 2), (ENTER, 41, None), (RETURN, 41, 20)]


def test_a_child_node_process_is_traced_into_its_own_file(project: Project) -> None:
    project.source("calc.js", CALC, CALC_REWRITTEN)
    project.source("child.js", "console.log(require('./calc.js').compute(41));\n")
    project.source("main.js", """\
const { execFileSync } = require('child_process');
const out = execFileSync(process.execPath, [__dirname + '/child.js']);
console.log('child said', String(out).trim(), 'main', require('./calc.js').compute(0));
""")
    project.plan(on=[40])
    run = project.run("main.js")
    assert run.returncode == 0 and run.stdout == "child said 42 main 1\n", run.stderr
    pids = {b["pid"] for b in run.batches}
    assert len(pids) == 2
    for pid in pids:
        assert events_file(project.strobe, pid).exists()
        assert [e[0] for b in run.batches if b["pid"] == pid for e in b["events"]] == [ENTER, RETURN]


# ---- crashes: recorded, and the program's exit code and stderr are those without the preload ----

VALIDATE = "function valid(n) {\n  return n >= 0;\n}\nmodule.exports = { valid };\n"
VALIDATE_REWRITTEN = ("function valid(n) { return __strobe.c(50, this, arguments, () => {\n  return n >= 0;\n}); }\n"
                      "module.exports = { valid };\n")
CRASH_MAIN = """\
const { valid } = require('./validate.js');
valid(1);
setTimeout(function onTick() {
  if (!valid(-5)) throw new RangeError('invalid order -5');
}, 1);
"""


def test_an_uncaught_exception_is_a_crash_event_and_changes_nothing(project: Project) -> None:
    project.source("validate.js", VALIDATE, VALIDATE_REWRITTEN)
    project.source("main.js", CRASH_MAIN)
    project.plan(on=[50])
    plain = project.run("main.js", traced=False)
    run = project.run("main.js")
    assert (run.returncode, run.stdout, run.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert run.returncode == 1 and "RangeError: invalid order -5" in run.stderr
    assert [(e[0], e[1]) for e in run.events] == [(ENTER, 50), (RETURN, 50)] * 2 + [(CRASH, 0)]
    crash = run.events[-1]
    assert crash[3] == 0 and crash[4] == 5 and crash[5] == 0
    payload = crash[6]
    assert {k: payload[k] for k in ("type", "message", "origin", "thread")} == {
        "type": "RangeError", "message": "invalid order -5", "origin": "uncaughtException", "thread": "main"}
    innermost = payload["traceback"][-1]  # outermost first
    assert innermost == {"function": "Timeout.onTick [as _onTimeout]", "file": str(project.src / "main.js"),
                         "line": line_of(CRASH_MAIN, "throw new RangeError"), "column": innermost["column"]}
    assert payload["traceback"][0]["file"].startswith("node:internal")
    fields = crash_fields(payload)  # what the daemon stores for it
    assert fields["text"] == ("Uncaught RangeError: invalid order -5 in Timeout.onTick [as _onTimeout] "
                              f"(main.js:{innermost['line']})")


NESTED = """\
function inner(n) {
  throw new TypeError('bad ' + n);
}
function outer(n) {
  return inner(n);
}
module.exports = { outer };
"""
NESTED_REWRITTEN = """\
function inner(n) { return __strobe.c(1, this, arguments, () => {
  throw new TypeError('bad ' + n);
}); }
function outer(n) { return __strobe.c(2, this, arguments, () => {
  return inner(n);
}); }
module.exports = { outer };
"""


def test_an_exception_through_traced_calls_unwinds_them_before_the_crash(project: Project) -> None:
    project.source("lib.js", NESTED, NESTED_REWRITTEN)
    project.source("main.js", "setImmediate(() => require('./lib.js').outer(4));\n")
    project.plan(on=[1, 2])
    plain = project.run("main.js", traced=False)
    run = project.run("main.js")
    assert run.returncode == plain.returncode == 1
    # Node shows the source line of the last throw: the tracer's rethrow, which says so; the stack is the original
    # plus the frames of the rewritten wrappers
    ours, theirs = run.stderr.splitlines(), plain.stderr.splitlines()
    assert "rethrows the program's exception unchanged" in ours[1]
    assert ours[4] == theirs[4] == "TypeError: bad 4"
    assert f"{project.src / 'lib.js'}:2:9" in ours[5] and f"{project.src / 'lib.js'}:2:9" in theirs[5]
    assert [(e[0], e[1], e[5]) for e in run.events] == [(ENTER, 2, 0), (ENTER, 1, 1), (UNWIND, 1, 1), (UNWIND, 2, 0),
                                                        (CRASH, 0, 0)]
    assert run.events[2][6]["exception"] == {"type": "TypeError", "message": "bad 4", "line": 2}
    assert run.events[-1][6]["message"] == "bad 4"


STOCK = "async function reserve(sku, failure) {\n  await null;\n  throw failure;\n}\nmodule.exports = { reserve };\n"
STOCK_REWRITTEN = ("async function reserve(sku, failure) { return __strobe.a(60, this, arguments, async () => {\n"
                   "  await null;\n  throw failure;\n}); }\nmodule.exports = { reserve };\n")
REJECT_MAIN = """\
const { reserve } = require('./stock.js');
setTimeout(function later() {
  const failure = new Error('no stock for A1');
  reserve('A1', failure);
}, 1);
"""


def test_an_unhandled_rejection_is_a_crash_event_and_changes_nothing(project: Project) -> None:
    project.source("stock.js", STOCK, STOCK_REWRITTEN)
    project.source("main.js", REJECT_MAIN)
    project.plan(on=[60], names={60: ["sku", "failure"]})
    plain = project.run("main.js", traced=False)
    run = project.run("main.js")
    assert (run.returncode, run.stdout, run.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert run.returncode == 1 and "Error: no stock for A1" in run.stderr
    assert [(e[0], e[1]) for e in run.events] == [(ENTER, 60), (UNWIND, 60), (CRASH, 0)]
    assert args_of(run.events[0]) == [["sku", "A1"], ["failure", {"__type__": "Error", "name": "Error",
                                                                  "message": "no stock for A1"}]]
    assert run.events[1][6]["exception"]["line"] == line_of(REJECT_MAIN, "new Error")
    crash = run.events[2][6]
    assert (crash["type"], crash["message"], crash["origin"]) == ("Error", "no stock for A1", "unhandledRejection")
    assert crash["traceback"][-1]["function"] == "Timeout.later [as _onTimeout]"


def test_a_handled_uncaught_exception_is_not_a_crash(project: Project) -> None:
    project.source("main.js", "process.on('uncaughtException', (e) => console.log('handled', e.message));\n"
                              "setTimeout(() => { throw new Error('oops'); }, 1);\n")
    project.plan(on=[])
    run = project.run("main.js")
    assert run.returncode == 0 and run.stdout == "handled oops\n"
    assert run.events == []


# ---- values ----

VALUES_LIB = "function show(value) {\n  return value;\n}\nmodule.exports = { show };\n"
VALUES_REWRITTEN = ("function show(value) { return __strobe.c(70, this, arguments, () => {\n  return value;\n}); }\n"
                    "module.exports = { show };\n")
VALUES_MAIN = r"""
const { show } = require('./values.js');
class Point { constructor(x, y) { this.x = x; this.y = y; } get length() { flags.getter = true; return 0; } }
const flags = { getter: false, trap: false };
const cycle = { name: 'a' }; cycle.self = cycle;
const throwing = { get boom() { flags.getter = true; throw new Error('boom'); }, ok: 1 };
const trap = () => { flags.trap = true; };
const proxy = new Proxy({}, { get: trap, ownKeys() { trap(); return []; }, getPrototypeOf() { trap(); return null; },
                             getOwnPropertyDescriptor: trap, has: trap });
const detached = new ArrayBuffer(8); const view = new Uint8Array(detached, 2, 4);
structuredClone(detached, { transfer: [detached] });
const wide = {}; for (let i = 0; i < 40; i++) wide['k' + i] = i;
const values = [
  null, true, 1.5, NaN, Infinity, -Infinity, 'short', 'x'.repeat(300), 2n ** 70n, undefined, Symbol('tag'),
  function namedFn() {}, class Shape {}, [1, 2, 3], Array.from({ length: 40 }, (_, i) => i), [1, , 3],
  { a: 1, b: { c: { d: 1 } } }, wide, new Point(1, 2), new Map([['k', { deep: { deeper: 1 } }]]), new Set([1, 'two']),
  new Date(0), new Date(NaN), new TypeError('bad input'), Buffer.from('hello'), new Uint16Array([1, 2]),
  new ArrayBuffer(40), cycle, throwing, proxy, view, 'lone \ud800 surrogate', /ab+c/gi,
  Array.from({ length: 30 }, () => 'y'.repeat(200)),
];
for (const v of values) show(v);
console.log(JSON.stringify(flags));
"""


def test_values_are_rendered_without_running_program_code(project: Project) -> None:
    project.source("values.js", VALUES_LIB, VALUES_REWRITTEN)
    project.source("main.js", VALUES_MAIN)
    project.plan(on=[70], names={70: ["value"]}, depth=2)
    run = project.run("main.js")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"getter": False, "trap": False}  # no getter invoked, no trap run
    enters = run.of(70, ENTER)
    rendered = [args_of(e)[0][1] for e in enters]
    returned = [e[6]["return"] for e in run.of(70, RETURN)]
    assert returned[:-1] == rendered[:-1]  # (the last one is cut differently: its own 4 KB budget)
    expected = [
        None, True, 1.5, "NaN", "Infinity", "-Infinity", "short", "x" * 256 + "…(300 chars)",
        {"__type__": "bigint", "value": str(2**70)}, {"__type__": "undefined"},
        {"__type__": "symbol", "description": "tag"}, {"__type__": "function", "name": "namedFn"},
        {"__type__": "function", "name": "Shape"}, [1, 2, 3], [*range(32), "…8 more"],
        [1, {"__type__": "hole"}, 3],
        {"a": 1, "b": {"c": {"__type__": "Object", "…": "depth"}}},  # depth 2 from the plan
        {**{f"k{i}": i for i in range(32)}, "…": "8 more keys"},
        {"__type__": "Point", "x": 1, "y": 2},
        {"__type__": "Map", "size": 1, "entries": [["k", {"deep": {"__type__": "Object", "…": "depth"}}]]},
        {"__type__": "Set", "size": 2, "values": [1, "two"]},
        {"__type__": "Date", "value": "1970-01-01T00:00:00.000Z"}, {"__type__": "Date", "value": "Invalid Date"},
        {"__type__": "TypeError", "name": "TypeError", "message": "bad input"},
        {"__type__": "Buffer", "length": 5, "hex": "68656c6c6f"},
        {"__type__": "Uint16Array", "length": 2, "hex": "01000200"},
        {"__type__": "ArrayBuffer", "length": 40, "hex": "00" * 32 + "…"},
        {"name": "a", "self": "[Circular]"},
        {"boom": {"__type__": "getter", "error": "not captured: getters are not invoked"}, "ok": 1},
        {"__type__": "Proxy", "error": "not captured: a Proxy is not introspected (its traps would run)"},
        {"__type__": "Uint8Array",
         "error": "not captured: TypeError: Cannot perform Construct on a detached ArrayBuffer"},
        "lone \ufffd surrogate",
        {"__type__": "RegExp", "value": "/ab+c/gi"},
    ]
    assert rendered[:-1] == expected
    big = rendered[-1]  # 30 strings of 200 chars: cut at about 4 KB
    assert big[-1] == "…cut (values over 4096 chars in this event)" and 15 <= len(big) < 30
    assert 4096 <= len(json.dumps(args_of(enters[-1]), ensure_ascii=False)) < 4096 + 512
    assert stored_value(returned[6]) == '"short"' and stored_value(returned[2]) == 1.5  # as the daemon stores them


# ---- bounds and errors ----

def test_a_full_buffer_drops_and_counts(project: Project) -> None:
    project.source("calc.js", CALC, CALC_REWRITTEN)
    project.source("main.js", "const { compute } = require('./calc.js');\n"
                              "let s = 0; for (let i = 0; i < 1000; i++) s += compute(i);\nconsole.log(s);\n")
    project.plan(on=[40], max_buffered=100, flush_at=5000)
    run = project.run("main.js")
    assert run.returncode == 0 and run.stdout == "500500\n"
    assert len(run.events) == 100 and [e[4] for e in run.events] == list(range(1, 101))
    assert run.batches[-1]["dropped"] == 1900  # 2000 events, 100 kept (cumulative count)


def test_plan_problems_are_reported_and_never_break_the_program(project: Project) -> None:
    project.source("calc.js", CALC, CALC_REWRITTEN)
    project.source("main.js", "console.log(require('./calc.js').compute(1));\n")
    (project.strobe / PLAN_FILE).write_text("{not json")
    run = project.run("main.js")
    assert run.returncode == 0 and run.stdout == "2\n" and run.events == []
    assert any(e.startswith(f"plan: {project.strobe / PLAN_FILE} ignored: ") for e in run.errors), run.errors
    with open(project.strobe / PLAN_FILE, "wb") as plan:
        plan.truncate((64 << 20) + 1)  # sparse: nothing is written
    run = project.run("main.js")
    assert run.stdout == "2\n" and any("over 64 MiB: ignored" in e for e in run.errors), run.errors
    (project.strobe / PLAN_FILE).write_text(json.dumps({"v": 2}))
    assert any("version 2 is not supported" in e for e in project.run("main.js").errors)
    (project.strobe / PLAN_FILE).unlink()
    run = project.run("main.js")
    assert run.stdout == "2\n" and any("not found: nothing is traced" in e for e in run.errors)


UNTOUCHED = """\
const Module = require('module');
console.log(JSON.stringify({
  strobe: typeof globalThis.__strobe,
  cache: Object.keys(require.cache).map((f) => require('path').basename(f)),
  compile: Module.prototype._compile.toString().includes('substitute'),
  read: require('fs').readFileSync.toString().includes('rewritten'),
  exit: process.listenerCount('exit'), monitor: process.listenerCount('uncaughtExceptionMonitor'),
}));
"""


def test_a_program_without_strobe_node_dir_is_untouched(project: Project) -> None:
    project.source("main.js", UNTOUCHED)
    env = project.env(traced=False)
    env["NODE_OPTIONS"] = node_options()
    with_preload = project.run("main.js", env=env)
    plain = project.run("main.js", traced=False)
    assert with_preload.returncode == 0, with_preload.stderr
    assert with_preload.stdout == plain.stdout and json.loads(plain.stdout) == {
        "strobe": "undefined", "cache": ["main.js"], "compile": False, "read": False, "exit": 0, "monitor": 0}
    assert list(project.strobe.iterdir()) == []
    traced = project.run("main.js")  # with it: only the global (not enumerable) and the listeners are visible
    assert json.loads(traced.stdout) == {"strobe": "object", "cache": ["main.js"], "compile": True, "read": True,
                                         "exit": 1, "monitor": 1}


def test_the_package_lists_every_file_the_preload_loads() -> None:
    here = PRELOAD.parent
    shipped = {p.name for p in here.iterdir() if p.suffix in (".cjs", ".mjs")}
    assert shipped == {p.name for p in SOURCES}
    for source in SOURCES:
        check = subprocess.run([str(NODE), "--check", str(source)], capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, check.stderr


# ---- costs (printed, not asserted) ----

BENCH = """\
function plain(a, b) { return a + b; }
function traced(a, b) { return __strobe.c(1, this, arguments, () => { return a + b; }); }
function untraced(a, b) { return __strobe.c(2, this, arguments, () => { return a + b; }); }
function time(f, n) {
  let x = 0;
  const start = process.hrtime.bigint();
  for (let i = 0; i < n; i++) x += f(i, 1);
  return Number(process.hrtime.bigint() - start) / n;
}
const best = { plain: Infinity, untraced: Infinity, traced: Infinity };
for (let round = 0; round < 5; round++) {
  best.plain = Math.min(best.plain, time(plain, 2e6));
  best.untraced = Math.min(best.untraced, time(untraced, 2e6));
  best.traced = Math.min(best.traced, time(traced, 1e5));
}
console.log(JSON.stringify(best));
"""


def test_costs_per_call_are_measured(project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    project.source("bench.js", BENCH)
    project.plan(on=[1], names={1: ["a", "b"]})
    run = project.run("bench.js")
    assert run.returncode == 0, run.stderr
    best = json.loads(run.stdout)
    assert len(run.events) == 2 * 5 * 100_000 and run.batches[-1]["dropped"] == 0

    def startup(traced: bool) -> float:
        times = []
        for _ in range(5):
            began = time.perf_counter()
            subprocess.run([str(NODE), "-e", "0"], env=project.env(traced), check=True, timeout=DEADLINE_S)
            times.append(time.perf_counter() - began)
        return min(times) * 1000

    plain, commonjs = startup(False), startup(True)
    project.source("shop.mjs", SHOP, SHOP_REWRITTEN)
    project.plan(on=[1])  # lists an ES module: the load hook's thread starts with the program
    with_hooks = startup(True)
    with capsys.disabled():
        print(f"\nnode preload costs: traced call (enter + return events, 2 int args) {best['traced']:.0f} ns; "
              f"untraced call through __strobe.c {best['untraced'] - best['plain']:.1f} ns over a plain call "
              f"({best['plain']:.1f} ns); startup `node -e 0` {plain:.0f} ms plain, {commonjs:.0f} ms with the "
              f"preload, {with_hooks:.0f} ms with the ES module hook")


BUN = Path(__file__).resolve().parents[1] / "toolchains" / "node_modules" / ".bin" / "bun"


@pytest.mark.parametrize("runtime", ["node", "bun"])
def test_the_preload_option_survives_a_path_with_spaces_and_quotes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, runtime: str) -> None:
    """Node reads a double-quoted value; Bun takes quotes literally and needs backslashes: each gets its own."""
    from strobe.instrument import nodetracer

    if runtime == "bun" and not BUN.exists():
        pytest.skip("bun is not installed in tests/toolchains (scripts/bootstrap.sh installs it)")
    odd = tmp_path / "a dir 'with' \"quotes\""
    odd.mkdir()
    marker = tmp_path / "ran"
    preload = odd / "pre load.cjs"
    preload.write_text(f"require('fs').writeFileSync({json.dumps(str(marker))}, 'yes');\n")
    monkeypatch.setattr(nodetracer, "PRELOAD", preload)
    (tmp_path / "app.js").write_text("console.log('app');\n")
    env = {k: v for k, v in os.environ.items() if k not in ("NODE_OPTIONS", "BUN_OPTIONS")}
    env |= (nodetracer.bun_environment(tmp_path / "unused", "--smol") if runtime == "bun"
            else nodetracer.environment(tmp_path / "unused", "--no-warnings"))
    binary = str(BUN) if runtime == "bun" else str(NODE)
    done = subprocess.run([binary, "app.js"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "app\n", done.stderr
    assert marker.read_text() == "yes"  # the preload ran, the options before it kept
