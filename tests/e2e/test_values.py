"""Arguments and return values beyond the integer registers, over MCP, with gdb as the oracle: doubles and
floats (xmm registers), arguments past the sixth and structs passed in memory (the stack at entry), a long
double, structs returned in xmm0 or in rax + xmm0 (tests/targets/values.c). The patterns are staged before the
launch, so the first calls already carry what their signatures need."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Control, StrobeClient, poll
from tests.e2e.test_read_variables import launch_ready

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

FUNCTIONS = ["scale", "eight", "length2", "dot", "make_span", "halve", "sum_wide", "grow", "mixed"]

_GDB_SCRIPT = r"""
import gdb, json, os
seen = {}
def py(v):
    t = v.type.strip_typedefs()
    if t.code == gdb.TYPE_CODE_STRUCT:
        return {f.name: py(v[f.name]) for f in t.fields()}
    if t.code == gdb.TYPE_CODE_ARRAY:
        lo, hi = t.range()
        return [py(v[i]) for i in range(lo, hi + 1)]
    if t.code == gdb.TYPE_CODE_FLT:
        return float(v)
    return int(v)
class Exit(gdb.FinishBreakpoint):
    def __init__(self, frame, name):
        super().__init__(frame, internal=True)
        self.function = name
    def stop(self):
        seen[self.function]["returned"] = py(self.return_value)
        return False
    def out_of_scope(self):
        pass
class Enter(gdb.Breakpoint):
    def __init__(self, name):
        super().__init__(name, internal=True)
        self.function = name
    def stop(self):
        if self.function not in seen:
            frame = gdb.selected_frame()
            args = [s for s in frame.block() if s.is_argument]
            seen[self.function] = {"names": [s.name for s in args],
                                   "args": [py(s.value(frame)) for s in args]}
            Exit(frame, self.function)
        return False
for name in os.environ["VALUE_FUNCTIONS"].split(","):
    Enter(name)
gdb.execute("run . once > /dev/null")
with open(os.environ["VALUE_OUT"], "w") as out:
    json.dump(seen, out)
"""


def gdb_calls(binary: Path, tmp_path: Path) -> dict[str, Any]:
    """Each function's arguments (gdb's `info args`) and return value (`finish`) in a run of one round."""
    if shutil.which("gdb") is None:
        pytest.skip("gdb is not installed")
    script, out = tmp_path / "values.py", tmp_path / "values.json"
    script.write_text(_GDB_SCRIPT)
    env = {**os.environ, "VALUE_FUNCTIONS": ",".join(FUNCTIONS), "VALUE_OUT": str(out)}
    done = subprocess.run(["gdb", "-nx", "-batch", "-x", str(script), str(binary)], env=env, capture_output=True,
                          text=True, timeout=120, check=False, cwd=tmp_path)
    assert out.exists(), f"gdb could not run the target: {done.stdout[-800:]} {done.stderr[-800:]}"
    seen: dict[str, Any] = json.loads(out.read_text())
    assert sorted(seen) == sorted(FUNCTIONS)
    return seen


async def test_float_stack_and_struct_values_match_gdb_from_the_first_call(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control, tmp_path: Path
) -> None:
    binary = c_target("values")
    oracle = gdb_calls(binary, tmp_path)
    staged = await strobe.call("debug_trace", add=FUNCTIONS, projectRoot=str(project))
    assert staged["mode"] == "pending"
    sid = await launch_ready(strobe, binary, project, control)
    await control.round(strobe, sid)

    async def first_calls() -> dict[str, tuple[dict[str, Any], dict[str, Any]]] | None:
        events = await strobe.all_events(sid, verbose=True)
        calls: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        for name in FUNCTIONS:
            enters = [e for e in events if e.get("function") == name and e["eventType"] == "function_enter"]
            exits = [e for e in events if e.get("function") == name and e["eventType"] == "function_exit"]
            if not enters or not exits:
                return None
            calls[name] = (enters[0], exits[0])
        return calls

    calls = await poll(first_calls, 30, "the first round's calls")
    for name, (enter, leave) in calls.items():
        assert enter["argumentNames"] == oracle[name]["names"], name
        assert enter["arguments"] == oracle[name]["args"], name
        if name == "grow":  # a long double comes back in st0, which the agent does not capture: said, not guessed
            assert leave["returnValue"] == "<long double in st0: not captured>"
        else:
            assert leave["returnValue"] == oracle[name]["returned"], name
    assert calls["eight"][0]["arguments"][6:] == [70, 80]  # past the six integer registers: on the stack
    assert calls["length2"][0]["arguments"][0] == {"x": 1.5, "y": -2.25, "z": 3.0}  # 24 bytes on the stack


async def test_a_trace_added_while_the_program_runs_records_every_call_whole(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control, tmp_path: Path
) -> None:
    binary = c_target("values")
    oracle = gdb_calls(binary, tmp_path)
    sid = await launch_ready(strobe, binary, project, control)
    assert (await strobe.call("debug_trace", sessionId=sid, add=FUNCTIONS))["hookedFunctions"] == len(FUNCTIONS)
    await control.round(strobe, sid)  # at once: the plans reached the agent before the hooks did

    async def enters() -> list[dict[str, Any]] | None:
        events = await strobe.all_events(sid, verbose=True, eventType="function_enter")
        return events if len(events) >= len(FUNCTIONS) else None

    first = {e["function"]: e for e in reversed(await poll(enters, 30, "the first round's calls"))}
    for name in FUNCTIONS:
        assert first[name]["arguments"] == oracle[name]["args"], name


async def test_conditions_and_messages_read_float_and_stack_parameters_at_an_entry(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, c_target("values"), project, control)
    answer = await strobe.call("debug_logpoint", sessionId=sid, add=[
        {"function": "scale", "message": "x={x} f={f} n={n}", "condition": "x > 2 && f < 1"},  # xmm0, xmm1
        {"function": "eight", "message": "g={g} h={h}", "condition": "g + h == 150"},  # past the registers
        {"function": "scale", "message": "never", "condition": "x < 0"},
    ])
    assert len(answer["logpoints"]) == 3 and "warnings" not in answer
    await control.round(strobe, sid)

    async def logged() -> list[str] | None:
        texts = [e["text"] for e in await strobe.all_events(sid, eventType="logpoint")]
        return texts if len(texts) >= 2 else None

    assert sorted(await poll(logged, 30, "the logpoint lines")) == ["g=70 h=80", "x=2.5 f=0.75 n=-3"]
