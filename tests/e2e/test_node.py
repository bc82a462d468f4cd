"""Node programs over MCP: CommonJS and ESM functions traced by pattern, values by name, async functions that
resolve and reject, an uncaught exception as a crash event; TypeScript programs run through tsx."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import StrobeClient, poll

pytestmark = [pytest.mark.anyio, pytest.mark.e2e,
              pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")]

APP = Path(__file__).resolve().parents[1] / "targets" / "node_app"


@pytest.fixture
def node_project(tmp_path: Path) -> Path:
    root = tmp_path / "node_app"
    shutil.copytree(APP, root)
    return root


async def run_to_end(strobe: StrobeClient, root: Path, script: str, patterns: list[str]) -> dict[str, Any]:
    staged = await strobe.call("debug_trace", add=patterns, projectRoot=str(root))
    assert "warnings" not in staged or not any("Invalid" in w for w in staged["warnings"]), staged
    launched = await strobe.call("debug_launch", command="node", args=[script], projectRoot=str(root),
                                 cwd=str(root))
    await strobe.wait_for_status(launched["sessionId"], "exited", timeout=60)
    return launched


def calls(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["eventType"], e["function"]) for e in events if e["eventType"].startswith("function_")]


async def test_commonjs_functions_with_their_arguments_and_return_values(
        strobe: StrobeClient, node_project: Path) -> None:
    launched = await run_to_end(strobe, node_project, "app.js", ["Cart.*", "auth.login", "check", "fetchUser"])
    sid = launched["sessionId"]
    assert launched["pendingPatternsApplied"] == 4
    output = [e["text"] for e in await strobe.all_events(sid, eventType="stdout")]
    assert output == ["total 5\n", "login true\n", "user user7\n", "caught no such user -1\n"]  # unchanged
    events = await strobe.all_events(sid, verbose=True)
    traced = calls(events)
    assert traced[:8] == [
        ("function_enter", "app.Cart.constructor"), ("function_exit", "app.Cart.constructor"),
        ("function_enter", "app.Cart.add"), ("function_exit", "app.Cart.add"),
        ("function_enter", "app.Cart.add"), ("function_exit", "app.Cart.add"),
        ("function_enter", "app.Cart.total"), ("function_exit", "app.Cart.total"),
    ]
    adds = [e for e in events if e.get("function") == "app.Cart.add"]
    assert (adds[0]["arguments"], adds[0]["argumentNames"]) == (["apple", 2], ["item", "qty"]), adds[0]
    assert [e["returnValue"] for e in adds if e["eventType"] == "function_exit"] == [1, 2]
    login_exit = next(e for e in events if e.get("function") == "auth.login" and e["eventType"] == "function_exit")
    assert login_exit["returnValue"] is True
    check_enter = next(e for e in events if e.get("function") == "auth.check" and e["eventType"] == "function_enter")
    login_enter = next(e for e in events if e.get("function") == "auth.login" and e["eventType"] == "function_enter")
    assert check_enter["parentEventId"] == login_enter["id"]  # called from login
    fetches = [e for e in events if e.get("function") == "app.fetchUser"]
    assert sorted(e["eventType"] for e in fetches) == ["function_enter"] * 2 + ["function_exit"] * 2
    exits = [e for e in fetches if e["eventType"] == "function_exit"]
    resolved = [e for e in exits if "exception" not in e]
    rejected = [e for e in exits if "exception" in e]
    assert resolved and resolved[0]["returnValue"] == {"id": 7, "name": "user7"}
    assert rejected and rejected[0]["exception"]["type"] == "RangeError"
    assert all(e["sourceFile"].endswith("app.js") for e in fetches)


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")
async def test_an_npm_script_runs_traced(strobe: StrobeClient, node_project: Path) -> None:
    """`npm run start` as typed: npm (itself a node program) starts the script's command through a shell; the
    node process that runs app.js inherits the preload and the session's plan."""
    (node_project / "package.json").write_text('{"name": "app", "scripts": {"start": "node app.js"}}\n')
    await strobe.call("debug_trace", add=["Cart.add"], projectRoot=str(node_project))
    launched = await strobe.call("debug_launch", command="npm", args=["run", "--silent", "start"],
                                 projectRoot=str(node_project), cwd=str(node_project))
    sid = launched["sessionId"]
    await strobe.wait_for_status(sid, "exited", timeout=60)
    output = [e["text"] for e in await strobe.all_events(sid, eventType="stdout")]
    assert "total 5\n" in output, output
    events = await strobe.all_events(sid, verbose=True)
    assert calls(events) == [("function_enter", "app.Cart.add"), ("function_exit", "app.Cart.add")] * 2
    assert len({e["pid"] for e in events if e["eventType"].startswith("function_")}) == 1
    assert all(e["pid"] != launched["pid"] for e in events if e["eventType"].startswith("function_"))


async def test_native_patterns_in_the_same_session(strobe: StrobeClient, node_project: Path) -> None:
    """Node's own C functions (libuv, linked into the node binary) are hooked next to the JavaScript ones, in one
    timeline: the file read by a traced function opens through uv_fs_open inside its call."""
    (node_project / "reader.js").write_text(
        "const fs = require('fs');\n"
        "function readConfig(path) { return fs.readFileSync(path, 'utf8').length; }\n"
        "console.log('size', readConfig(__filename));\n")
    launched = await run_to_end(strobe, node_project, "reader.js", ["readConfig", "uv_fs_open"])
    assert launched["pendingPatternsApplied"] == 2
    events = await strobe.all_events(launched["sessionId"], verbose=True)
    enter = next(e for e in events if e.get("function") == "reader.readConfig" and e["eventType"] == "function_enter")
    opens = [e for e in events if e.get("function") == "uv_fs_open" and e["eventType"] == "function_enter"]
    assert opens, sorted({e.get("function") for e in events if e.get("function")})
    exit_ = next(e for e in events if e.get("function") == "reader.readConfig" and e["eventType"] == "function_exit")
    inside = [e for e in opens if enter["timestampNs"] <= e["timestampNs"] <= exit_["timestampNs"]]
    assert inside, (enter["timestampNs"], exit_["timestampNs"], [e["timestampNs"] for e in opens])


async def test_esm_functions(strobe: StrobeClient, node_project: Path) -> None:
    launched = await run_to_end(strobe, node_project, "esm/app.mjs", ["geometry.*", "Shape.area"])
    events = await strobe.all_events(launched["sessionId"], verbose=True)
    traced = calls(events)
    assert ("function_enter", "geometry.square") in traced and ("function_exit", "geometry.Shape.area") in traced
    area = next(e for e in events if e.get("function") == "geometry.Shape.area" and e["eventType"] == "function_exit")
    assert area["returnValue"] == 9


async def test_an_uncaught_exception_is_a_crash_event(strobe: StrobeClient, node_project: Path) -> None:
    launched = await run_to_end(strobe, node_project, "crash.js", ["explode"])
    sid = launched["sessionId"]

    async def crash() -> dict[str, Any] | None:
        found = await strobe.call("debug_query", sessionId=sid, eventType="crash", verbose=True)
        return found["events"][0] if found["events"] else None

    event = await poll(crash, 10, "the crash event")
    assert "TypeError" in event["text"] and "explode" in event["text"], event
    stderr = "".join(e["text"] for e in await strobe.all_events(sid, eventType="stderr"))
    assert "TypeError: Cannot read properties of undefined" in stderr  # the program's own report, unchanged
    sessions = (await strobe.call("debug_list_sessions"))["sessions"]
    assert [s.get("exitCode") for s in sessions if s["sessionId"] == sid] == [1]


async def test_a_pattern_added_while_the_program_runs_reaches_the_module_already_loaded(
        strobe: StrobeClient, node_project: Path) -> None:
    stop = node_project / "stop"
    sid = (await strobe.call("debug_launch", command="node", args=["ticker.js", str(stop)],
                             projectRoot=str(node_project), cwd=str(node_project)))["sessionId"]

    async def ready() -> bool | None:
        page = await strobe.call("debug_query", sessionId=sid, eventType="stdout")
        return True if any(e["text"] == "ready\n" for e in page["events"]) else None

    await poll(ready, 30, "the program to start")
    traced = await strobe.call("debug_trace", sessionId=sid, add=["tick", "twice"])
    [warning] = traced["warnings"]
    assert "ticker.twice" in warning and "expression body" in warning, traced  # said, not silently untraced
    assert traced["hookedFunctions"] == 1, traced

    async def ticks() -> list[dict[str, Any]] | None:
        page = await strobe.call("debug_query", sessionId=sid, function={"equals": "ticker.tick"}, verbose=True)
        exits = [e for e in page["events"] if e["eventType"] == "function_exit"]
        return exits if len(exits) >= 3 else None

    exits = await poll(ticks, 30, "calls of tick() in the module loaded before it was added")
    # the module kept its state: tick(n) returns n + 1 and the program feeds each result back in
    counts = [e["returnValue"] for e in exits[:3]]
    assert counts[1:] == [counts[0] + 1, counts[0] + 2] and counts[0] > 1, exits
    removed = await strobe.call("debug_trace", sessionId=sid, remove=["tick", "twice"])
    assert removed["hookedFunctions"] == 0, removed
    stop.touch()
    await strobe.wait_for_status(sid, "exited", timeout=30)
    page = await strobe.call("debug_query", sessionId=sid, function={"equals": "ticker.twice"})
    assert page["events"] == []  # refused: nothing recorded of it


# ---- TypeScript through tsx ----

TOOLCHAINS = Path(__file__).resolve().parents[1] / "toolchains" / "node_modules"
TSX = TOOLCHAINS / ".bin" / "tsx"
needs_tsx = pytest.mark.skipif(not TSX.exists(), reason=f"tsx is not installed ({TSX} is missing): "
                                                        "scripts/bootstrap.sh installs tests/toolchains/package.json")
TS_PATTERNS = ["Basket.*", "inventory.*", "delivery"]
TS_OUTPUT = ["total 11\n", "label fig @ 7\n", "delivery Paris 1\n", "caught no city\n"]


@pytest.fixture
def ts_project(node_project: Path) -> Path:
    """The TypeScript program as a project of its own (projectRoot) whose node_modules holds tsx, as a project that
    depends on tsx has it (`--import tsx` and `npx tsx` resolve it from there; the index never enters it)."""
    root = node_project / "ts"
    (root / "node_modules").symlink_to(TOOLCHAINS, target_is_directory=True)
    return root


def line_of(path: Path, needle: str) -> int:
    text = path.read_text()
    return text[: text.index(needle)].count("\n") + 1


async def run_typescript(strobe: StrobeClient, root: Path, command: str, args: list[str],
                         patterns: list[str]) -> str:
    await strobe.call("debug_trace", add=patterns, projectRoot=str(root))
    launched = await strobe.call("debug_launch", command=command, args=args, projectRoot=str(root), cwd=str(root))
    assert launched["pendingPatternsApplied"] == len(patterns)
    assert not launched.get("warnings"), launched["warnings"]
    await strobe.wait_for_status(launched["sessionId"], "exited", timeout=60)
    return str(launched["sessionId"])


@needs_tsx
@pytest.mark.parametrize(("launcher", "modules"), [
    ("node --import tsx", "commonjs"),  # tsx's require hook compiles app.ts: its read of the file is substituted
    ("node --import tsx", "module"),  # tsx's ESM load hook runs above Strobe's: it compiles the rewritten source
    ("node node_modules/.bin/tsx", "commonjs"),  # what the tsx command runs: it starts node --import tsx as a child
])
async def test_typescript_functions_through_tsx(strobe: StrobeClient, ts_project: Path, launcher: str,
                                                modules: str) -> None:
    root = ts_project
    (root / "package.json").write_text(f'{{"type": "{modules}"}}\n')
    args = ["--import", "tsx", "app.ts"] if launcher == "node --import tsx" else [str(TSX), "app.ts"]
    await check_typescript_run(strobe, root, await run_typescript(strobe, root, "node", args, TS_PATTERNS))


async def check_typescript_run(strobe: StrobeClient, root: Path, sid: str) -> None:
    """app.ts's calls with their arguments and values, at their TypeScript files and lines."""
    assert [e["text"] for e in await strobe.all_events(sid, eventType="stdout")] == TS_OUTPUT  # unchanged
    assert [e["text"] for e in await strobe.all_events(sid, eventType="stderr")] == []
    events = await strobe.all_events(sid, verbose=True)
    assert calls(events)[:6] == [
        ("function_enter", "app.Basket.constructor"), ("function_exit", "app.Basket.constructor"),
        ("function_enter", "app.Basket.add"), ("function_exit", "app.Basket.add"),
        ("function_enter", "app.Basket.add"), ("function_exit", "app.Basket.add"),
    ]

    def traced(function: str, kind: str) -> list[dict[str, Any]]:
        return [e for e in events if e.get("function") == function and e["eventType"] == kind]

    adds = traced("app.Basket.add", "function_enter")
    apple = {"name": "apple", "price": 2}
    assert (adds[0]["arguments"], adds[0]["argumentNames"]) == ([apple, 3], ["item", "quantity"])
    assert adds[1]["arguments"] == [{"name": "pear", "price": 5}]  # the default is not an argument passed
    assert [e["returnValue"] for e in traced("app.Basket.add", "function_exit")] == [1, 2]
    assert traced("app.Basket.constructor", "function_enter")[0]["arguments"] == ["alice"]
    total = traced("app.Basket.total", "function_exit")[0]
    assert total["returnValue"] == 11 and total["returnType"] == "number"
    prices = traced("inventory.priceOf", "function_enter")
    assert [e["arguments"] for e in prices] == [[apple, 3], [{"name": "pear", "price": 5}, 1]]
    assert all(e["parentEventId"] == traced("app.Basket.total", "function_enter")[0]["id"] for e in prices)
    assert traced("inventory.label", "function_exit")[0]["returnValue"] == "fig @ 7"
    exits = traced("app.delivery", "function_exit")
    assert exits[0]["returnValue"] == {"city": "Paris", "days": 1}
    assert exits[1]["exception"] == {"type": "RangeError", "message": "no city",
                                     "line": line_of(root / "app.ts", 'throw new RangeError("no city")')}
    where = {(e["function"], Path(e["sourceFile"]).name, e["line"]) for e in events if "sourceFile" in e}
    assert where >= {
        ("app.Basket.constructor", "app.ts", line_of(root / "app.ts", "constructor(")),
        ("app.Basket.add", "app.ts", line_of(root / "app.ts", "add(item: T")),
        ("app.delivery", "app.ts", line_of(root / "app.ts", "async function delivery")),
        ("inventory.priceOf", "inventory.ts", line_of(root / "inventory.ts", "export function priceOf")),
    }, where


TS_NODE = TOOLCHAINS / ".bin" / "ts-node"
needs_ts_node = pytest.mark.skipif(not TS_NODE.exists(), reason=f"ts-node is not installed ({TS_NODE} is missing): "
                                   "scripts/bootstrap.sh installs tests/toolchains/package.json")
TS_NODE_CONFIG = '{"compilerOptions": {"module": "commonjs", "target": "es2020", "strict": true}}\n'


@needs_ts_node
@pytest.mark.parametrize("launcher", ["ts-node", "node -r ts-node/register"])
async def test_typescript_functions_through_ts_node(strobe: StrobeClient, ts_project: Path, launcher: str) -> None:
    """ts-node checks the program's own TypeScript (the project's tsconfig, strict) and compiles it; Strobe swaps
    in the same compile of the rewritten text."""
    root = ts_project
    (root / "tsconfig.json").write_text(TS_NODE_CONFIG)
    command, args = (str(TS_NODE), ["app.ts"]) if launcher == "ts-node" else ("node", ["-r", "ts-node/register",
                                                                                       "app.ts"])
    await check_typescript_run(strobe, root, await run_typescript(strobe, root, command, args, TS_PATTERNS))


@needs_ts_node
async def test_ts_node_still_reports_the_programs_type_errors(strobe: StrobeClient, ts_project: Path) -> None:
    root = ts_project
    (root / "tsconfig.json").write_text(TS_NODE_CONFIG)
    (root / "wrong.ts").write_text("function half(n: number): number {\n  return n / 2;\n}\nhalf(\"four\");\n")
    await strobe.call("debug_trace", add=["half"], projectRoot=str(root))
    launched = await strobe.call("debug_launch", command=str(TS_NODE), args=["wrong.ts"], projectRoot=str(root),
                                 cwd=str(root))
    await strobe.wait_for_status(launched["sessionId"], "exited", timeout=60)
    stderr = "".join(e["text"] for e in await strobe.all_events(launched["sessionId"], eventType="stderr"))
    assert "TS2345" in stderr and "wrong.ts" in stderr, stderr  # its own error, not one about Strobe's wrapper


@needs_ts_node
async def test_a_loader_strobe_cannot_substitute_for_is_reported(strobe: StrobeClient, ts_project: Path) -> None:
    """ts-node's ES module loader compiles TypeScript in its own load hook, above Strobe's: the files run untraced,
    and the session's answers say so rather than showing an empty trace."""
    root = ts_project
    (root / "tsconfig.json").write_text(TS_NODE_CONFIG.replace('"commonjs"', '"nodenext"'))
    (root / "package.json").write_text('{"type": "module"}\n')
    (root / "app.ts").write_text((root / "app.ts").read_text().replace('"./inventory"', '"./inventory.js"'))
    sid = await run_typescript(strobe, root, "node", ["--loader", "ts-node/esm", "app.ts"], TS_PATTERNS)
    answer = await strobe.call("debug_query", sessionId=sid)
    assert [e["text"] for e in answer["events"] if e["eventType"] == "stdout"] == TS_OUTPUT
    assert not [e for e in answer["events"] if e["eventType"].startswith("function")]
    notes = [w for w in answer.get("warnings", []) if w.startswith("Tracer: ")]
    assert any(str(root / "app.ts") in note and "untraced" in note for note in notes), answer.get("warnings")


@pytest.mark.parametrize("launcher", [
    pytest.param("tsx", marks=needs_tsx), pytest.param("ts-node", marks=needs_ts_node)])
async def test_a_typescript_crash_shows_typescript_files_and_lines(
        strobe: StrobeClient, ts_project: Path, launcher: str) -> None:
    root = ts_project
    if launcher == "tsx":
        sid = await run_typescript(strobe, root, "node", ["--import", "tsx", "crash.ts"], ["restock"])
    else:
        (root / "tsconfig.json").write_text(TS_NODE_CONFIG)
        sid = await run_typescript(strobe, root, str(TS_NODE), ["crash.ts"], ["restock"])
    found = await strobe.call("debug_query", sessionId=sid, eventType="crash", verbose=True)
    assert found["events"], await strobe.all_events(sid)
    crash = found["events"][0]
    assert (crash["exceptionType"], crash["exceptionMessage"]) == ("RangeError", "cannot restock -1 fig")
    throw = line_of(root / "inventory.ts", "throw new RangeError")
    assert (crash["function"], Path(crash["sourceFile"]).name, crash["line"]) == ("restock", "inventory.ts", throw)
    frames = [(frame["function"], Path(frame["file"]).name, frame["line"]) for frame in crash["backtrace"]]
    assert frames[0] == ("restock", "inventory.ts", throw)  # the wrapper's frames folded back into the function
    assert ("crash.ts", line_of(root / "crash.ts", "restock(fig, -1)")) in [(f, line) for _, f, line in frames]
    restocks = [e for e in await strobe.all_events(sid, verbose=True) if e.get("function") == "inventory.restock"]
    assert [e["eventType"] for e in restocks] == ["function_enter", "function_exit"] * 2
    assert restocks[3]["exception"]["line"] == throw
    stderr = "".join(e["text"] for e in await strobe.all_events(sid, eventType="stderr"))
    assert f"inventory.ts:{throw}" in stderr  # the loader's source maps: the program's own report shows the .ts line


@needs_tsx
@pytest.mark.parametrize("command", ["tsx", pytest.param("npx", marks=pytest.mark.skipif(
    shutil.which("npx") is None, reason="npx is not installed"))])
async def test_the_tsx_and_npx_commands(strobe: StrobeClient, ts_project: Path, command: str) -> None:
    root = ts_project
    launch = (str(TSX), ["app.ts"]) if command == "tsx" else ("npx", ["--no-install", "tsx", "app.ts"])
    sid = await run_typescript(strobe, root, *launch, TS_PATTERNS)
    assert [e["text"] for e in await strobe.all_events(sid, eventType="stdout")] == TS_OUTPUT
    assert ("function_exit", "app.Basket.total") in calls(await strobe.all_events(sid))


TSC = TOOLCHAINS / ".bin" / "tsc"


@pytest.mark.skipif(not TSC.exists(), reason="tsc is not installed (scripts/bootstrap.sh installs it)")
@pytest.mark.parametrize("map_option", ["--sourceMap", "--inlineSourceMap"])
async def test_compiled_typescript_is_shown_at_its_typescript_lines(
        strobe: StrobeClient, ts_project: Path, map_option: str) -> None:
    """tsc's JavaScript in dist/ is what node runs: events name the .ts file and line its source map gives, and
    @file: selects by the .ts file."""
    root = ts_project
    compiled = subprocess.run([str(TSC), map_option, "--outDir", "dist", "--module", "commonjs", "--target", "es2020",
                               "--types", "node", "app.ts", "inventory.ts"],
                              cwd=root, capture_output=True, text=True, timeout=120)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    sid = await run_typescript(strobe, root, "node", ["dist/app.js"], ["@file:inventory.ts", "delivery"])
    assert [e["text"] for e in await strobe.all_events(sid, eventType="stdout")] == TS_OUTPUT
    events = await strobe.all_events(sid, verbose=True)
    enters = [e for e in events if e["eventType"] == "function_enter"]
    assert {e["sourceFile"] for e in enters} == {str(root / "inventory.ts"), str(root / "app.ts")}
    price = next(e for e in enters if e["function"] == "inventory.priceOf")
    assert price["line"] == line_of(root / "inventory.ts", "export function priceOf")
    delivery = next(e for e in enters if e["function"].endswith("delivery"))
    assert delivery["line"] == line_of(root / "app.ts", "function delivery")


# ---- an installed package's own functions ----

async def test_a_packages_own_functions_traced_while_a_script_uses_it(strobe: StrobeClient, tmp_path: Path) -> None:
    """ms (from npm, installed by the bootstrap) traced by its package name; the project's own code by
    @usercode, which never takes a package's files."""
    root = tmp_path / "uses_ms"
    (root / "node_modules").mkdir(parents=True)
    (root / "node_modules" / "ms").symlink_to(TOOLCHAINS / "ms")  # as npm link or pnpm install it
    (root / "main.js").write_text(
        "const ms = require('ms');\n"
        "function show(text) { return ms(text); }\n"
        "console.log(show('2 days'), ms(60000));\n"
    )
    launched = await run_to_end(strobe, root, "main.js", ["ms.parse", "ms.fmtShort", "@usercode"])
    sid = launched["sessionId"]
    output = [e["text"] for e in await strobe.all_events(sid, eventType="stdout")]
    assert output == ["172800000 1m\n"]
    events = await strobe.all_events(sid, verbose=True)
    assert calls(events) == [
        ("function_enter", "main.show"), ("function_enter", "ms.parse"), ("function_exit", "ms.parse"),
        ("function_exit", "main.show"), ("function_enter", "ms.fmtShort"), ("function_exit", "ms.fmtShort"),
    ]
    parse = [e for e in events if e.get("function") == "ms.parse"]
    assert (parse[0]["arguments"], parse[0]["argumentNames"]) == (["2 days"], ["str"])
    assert parse[1]["returnValue"] == 172800000
    assert parse[0]["sourceFile"] == str((TOOLCHAINS / "ms" / "index.js").resolve())
    assert parse[0]["line"] == 48  # `function parse(str) {` in ms 2.1.3


async def test_a_package_that_is_not_installed_says_how_packages_are_named(
        strobe: StrobeClient, tmp_path: Path) -> None:
    (tmp_path / "main.js").write_text("console.log('hi');\n")
    launched = await run_to_end(strobe, tmp_path, "main.js", ["leftpad.pad"])
    said = " ".join(launched.get("warnings", []))
    assert "'leftpad.pad' matched no function" in said and "named after the package" in said, launched
