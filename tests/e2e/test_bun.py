"""Bun programs over MCP: TypeScript and ES modules substituted through a Bun plugin, CommonJS through
require.extensions, async functions, and an uncaught error as a crash event; the same preload as Node's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import StrobeClient, poll

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

BUN = Path(__file__).resolve().parents[1] / "toolchains" / "node_modules" / ".bin" / "bun"

APP = """\
import { add, Meter } from "./lib.ts";
const legacy = require("./legacy.cjs");

async function later(n: number): Promise<number> {
  await new Promise((done) => setTimeout(done, 1));
  if (n < 0) throw new RangeError("negative " + n);
  return add(n, legacy.twice(n));
}

const meter = new Meter("m1");
meter.record(add(1, 2));
console.log("now", meter.total);
console.log("later", await later(4));
await later(-1).catch((e: Error) => console.log("caught", e.message));
"""

LIB = """\
export function add(a: number, b: number): number {
  return a + b;
}

export class Meter {
  total = 0;
  constructor(public name: string) {}
  record(value: number): void {
    this.total += value;
  }
}
"""

LEGACY = """\
function twice(x) {
  return 2 * x;
}
module.exports = { twice };
"""


def calls(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["eventType"], e["function"]) for e in events if e["eventType"].startswith("function_")]


@pytest.fixture
def bun() -> Path:
    if not BUN.exists():
        pytest.skip("bun is not installed in tests/toolchains (scripts/bootstrap.sh installs it)")
    return BUN


async def launch(strobe: StrobeClient, bun: Path, root: Path, patterns: list[str], script: str) -> str:
    await strobe.call("debug_trace", add=patterns, projectRoot=str(root))
    launched = await strobe.call("debug_launch", command=str(bun), args=[script], projectRoot=str(root),
                                 cwd=str(root))
    assert not any("cannot be traced" in w for w in launched.get("warnings", [])), launched
    await strobe.wait_for_status(launched["sessionId"], "exited", timeout=60)
    return str(launched["sessionId"])


async def test_typescript_esm_and_commonjs_functions_of_a_bun_program(
        strobe: StrobeClient, bun: Path, tmp_path: Path) -> None:
    (tmp_path / "app.ts").write_text(APP)
    (tmp_path / "lib.ts").write_text(LIB)
    (tmp_path / "legacy.cjs").write_text(LEGACY)
    sid = await launch(strobe, bun, tmp_path, ["lib.*", "Meter.*", "twice", "later"], "app.ts")
    output = [e["text"] for e in await strobe.all_events(sid, eventType="stdout")]
    assert output == ["now 3\n", "later 12\n", "caught negative -1\n"]  # unchanged by tracing
    events = await strobe.all_events(sid, verbose=True)
    traced = calls(events)
    assert traced[:6] == [
        ("function_enter", "lib.Meter.constructor"), ("function_exit", "lib.Meter.constructor"),
        ("function_enter", "lib.add"), ("function_exit", "lib.add"),
        ("function_enter", "lib.Meter.record"), ("function_exit", "lib.Meter.record"),
    ]
    add = next(e for e in events if e.get("function") == "lib.add" and e["eventType"] == "function_enter")
    assert (add["arguments"], add["argumentNames"]) == ([1, 2], ["a", "b"])
    assert add["sourceFile"] == str(tmp_path / "lib.ts") and add["line"] == 1
    twice = [e for e in events if e.get("function") == "legacy.twice"]
    assert [e["eventType"] for e in twice] == ["function_enter", "function_exit"]  # CommonJS, through require
    assert twice[1]["returnValue"] == 8
    later = [e for e in events if e.get("function") == "app.later" and e["eventType"] == "function_exit"]
    assert [e.get("returnValue") for e in later if "exception" not in e] == [12]  # when its promise resolved
    [rejected] = [e for e in later if "exception" in e]
    assert rejected["exception"]["type"] == "RangeError"


async def test_an_uncaught_error_in_bun_is_a_crash_event(strobe: StrobeClient, bun: Path, tmp_path: Path) -> None:
    (tmp_path / "boom.ts").write_text(
        "function explode(input: { value?: { size: number } }): number {\n"
        "  return input.value!.size;\n"
        "}\n"
        "explode({});\n"
    )
    sid = await launch(strobe, bun, tmp_path, ["explode"], "boom.ts")

    async def crash() -> dict[str, Any] | None:
        found = await strobe.call("debug_query", sessionId=sid, eventType="crash", verbose=True)
        return found["events"][0] if found["events"] else None

    event = await poll(crash, 10, "the crash event")
    assert "TypeError" in event["text"], event
    traced = calls(await strobe.all_events(sid))
    assert traced == [("function_enter", "boom.explode"), ("function_exit", "boom.explode")]
    sessions = (await strobe.call("debug_list_sessions"))["sessions"]
    assert [s.get("exitCode") for s in sessions if s["sessionId"] == sid] == [1]


async def test_a_bun_subcommand_runs_as_typed_and_the_programs_bun_children_work(
        strobe: StrobeClient, bun: Path, tmp_path: Path) -> None:
    """BUN_OPTIONS comes before Bun's arguments, where `--preload` would turn `bun run x`/`bun test` into a script
    name: a subcommand launch gets none, and a traced program's own bun children (node:child_process) get the
    user's options back."""
    (tmp_path / "package.json").write_text('{"scripts": {"hello": "echo from-script"}}\n')
    (tmp_path / "child.ts").write_text("console.log('child ran');\n")
    (tmp_path / "parent.ts").write_text(
        "import { spawnSync } from 'node:child_process';\n"
        "function spawnChild(): string {\n"
        "  const done = spawnSync(process.execPath, ['run', 'child.ts']);\n"
        "  return done.stdout.toString().trim();\n"
        "}\n"
        "console.log('parent got', spawnChild());\n"
    )
    sid = await launch(strobe, bun, tmp_path, ["spawnChild"], "parent.ts")
    output = [e["text"] for e in await strobe.all_events(sid, eventType="stdout")]
    assert output == ["parent got child ran\n"], output
    assert ("function_exit", "parent.spawnChild") in calls(await strobe.all_events(sid))
    launched = await strobe.call("debug_launch", command=str(bun), args=["run", "hello"], projectRoot=str(tmp_path),
                                 cwd=str(tmp_path))
    await strobe.wait_for_status(launched["sessionId"], "exited", timeout=60)
    text = "".join(e["text"] for e in await strobe.all_events(launched["sessionId"], eventType="stdout"))
    assert "from-script" in text, text
