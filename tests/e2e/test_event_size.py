"""Answers sized for an LLM: a traced call whose followed struct chain is far bigger than query.maxEventBytes shows
as events under the limit, cut biggest-first, with markers naming what was cut and a debug_read path that shows it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Control, StrobeClient, poll
from tests.e2e.test_read_variables import launch_ready

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

LIMIT = 4096  # the default of query.maxEventBytes
FIELD_MARKER = re.compile(r"^… (\d+) more fields? \(debug_read with a field path, e.g. '([^']+)', or a smaller "
                          r"serializationDepth\)$")
CHAIN_FIELD = re.compile(r"^big((?:->peer)*)->(f\d\d)$")


def size(event: dict[str, Any]) -> int:
    return len(json.dumps(event, separators=(",", ":")))  # as mcp/app.py sends it


def field_markers(value: Any) -> list[tuple[dict[str, Any], re.Match[str]]]:
    """Each struct that lost fields, with its marker parsed."""
    found: list[tuple[dict[str, Any], re.Match[str]]] = []
    if isinstance(value, dict):
        match = FIELD_MARKER.match(value.get("…", "")) if isinstance(value.get("…"), str) else None
        if match:
            found.append((value, match))
        for item in value.values():
            found += field_markers(item)
    elif isinstance(value, list):
        for item in value:
            found += field_markers(item)
    return found


async def test_big_followed_values_are_cut_under_the_limit(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, c_target("bigstruct"), project, control)
    traced = await strobe.call("debug_trace", sessionId=sid, add=["take"], serializationDepth=10)
    assert traced["hookedFunctions"] == 1

    async def a_followed_call() -> dict[str, Any] | None:
        await control.round(strobe, sid)
        enters = await strobe.all_events(sid, verbose=True, eventType="function_enter", function={"equals": "take"})
        followed = [e for e in enters if isinstance(e.get("arguments", [None])[0], dict)]
        return followed[-1] if followed else None

    event = await poll(a_followed_call, 30, "take's chain to be followed ten levels deep")
    assert event["argumentNames"] == ["big"] and event["trimmed"]["limit"] == LIMIT
    assert event["trimmed"]["bytes"] > 2 * LIMIT  # ten struct big of ~1,500 bytes of JSON each, before the cut
    head = event["arguments"][0]
    assert head["f00"] == 0 and head["f29"] == 29  # the first struct's small fields are all there

    page = await strobe.call("debug_query", sessionId=sid, verbose=True, function={"equals": "take"}, limit=500)
    assert any("query.maxEventBytes" in w for w in page.get("warnings", []))
    for verbose in (True, False):
        events = await strobe.all_events(sid, verbose=verbose)
        assert events
        for e in events:
            assert size(e) <= LIMIT, (verbose, size(e), e["id"])
            if "trimmed" in e:
                assert e["trimmed"]["bytes"] > LIMIT and "…" in json.dumps(e, ensure_ascii=False)

    # A cut struct of the chain: its marker names its first missing field, and debug_read of that path reads it
    # (the global `big` holds the same pointer as the parameter).
    markers = field_markers(head)
    assert markers, json.dumps(head)[:2000]
    readable = [(holder, match) for holder, match in markers
                if (chain := CHAIN_FIELD.match(match.group(2))) and chain.group(1).count("->") < 4]
    assert readable, [m.group(0) for _, m in markers]
    holder, match = readable[0]
    path = match.group(2)
    chain = CHAIN_FIELD.match(path)
    assert chain is not None
    depth, field = chain.group(1).count("->peer"), chain.group(2)
    assert field not in holder  # the field the marker names was cut from this struct
    kept = [k for k in holder if k != "…"]
    assert len(kept) + int(match.group(1)) == 30 + 4  # f00..f29, nested, more, text, peer
    got = (await strobe.call("debug_read", sessionId=sid, targets=[{"variable": path}]))["results"][0]
    assert got.get("error") is None and got["value"] == 1000 * depth + int(field[1:]), got


async def test_debug_read_results_are_cut_per_value(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, c_target("bigstruct"), project, control)
    results = (await strobe.call("debug_read", sessionId=sid, depth=3,
                                 targets=[{"variable": "chain"}, {"variable": "big->f03"}]))["results"]
    chain, small = results
    assert small == {k: small[k] for k in small if k != "trimmed"} and small["value"] == 3 and "trimmed" not in small
    assert size(chain) <= LIMIT and chain["trimmed"]["limit"] == LIMIT and chain["trimmed"]["bytes"] > 4 * LIMIT
    assert chain["target"] == "chain" and chain["type"].startswith("big")
    elements = chain["value"]
    last = elements[-1]
    assert isinstance(last, str) and re.match(r"^… \d+ more elements \(debug_read e\.g\. 'chain\[\d+\]'\)$", last)
    index = int(re.search(r"chain\[(\d+)\]", last).group(1))  # type: ignore[union-attr]
    got = (await strobe.call("debug_read", sessionId=sid, targets=[{"variable": f"chain[{index}].f05"}]))["results"]
    assert got[0]["value"] == 1000 * index + 5


PY_PROGRAM = """
import os, sys, time
control = sys.argv[1]
print("ready", flush=True)
while not os.path.exists(os.path.join(control, "round-1")):
    time.sleep(0.002)
for i in range(20):
    repr([i, "x" * i])
print("round 1 done", flush=True)
while not os.path.exists(os.path.join(control, "end")):
    time.sleep(0.002)
"""


async def test_a_pyobject_argument_does_not_explode_into_its_type(
    strobe: StrobeClient, project: Path, control: Control, tmp_path: Path
) -> None:
    # Debian's debug interpreter: PyObject_Repr(PyObject *v) at depth 3 once showed its ob_type's tables, 7.5 KB.
    interpreter = Path("/usr/bin/python3.11d")
    if not interpreter.exists():
        pytest.skip("python3.11d (python3.11-dbg) is not installed")
    script = tmp_path / "reprs.py"
    script.write_text(PY_PROGRAM)
    sid = (await strobe.call("debug_launch", command=str(interpreter), args=[str(script), str(control.directory)],
                             projectRoot=str(project)))["sessionId"]

    async def ready() -> bool | None:
        page = await strobe.call("debug_query", sessionId=sid, eventType="stdout")
        return True if any(e["text"] == "ready\n" for e in page["events"]) else None

    await poll(ready, 60, "the interpreter to be ready")
    assert (await strobe.call("debug_trace", sessionId=sid, add=["PyObject_Repr"]))["hookedFunctions"] == 1
    await control.round(strobe, sid)

    async def enters() -> list[dict[str, Any]] | None:
        events = await strobe.all_events(sid, verbose=True, eventType="function_enter",
                                         function={"equals": "PyObject_Repr"})
        return events if events and all("argumentNames" in e for e in events[-5:]) else None

    events = (await poll(enters, 30, "typed calls of PyObject_Repr"))[-5:]
    for event in events:
        [value] = event["arguments"]
        assert isinstance(value, dict) and "ob_refcnt" in value, value  # the object, followed
        assert isinstance(value["ob_type"], str) and value["ob_type"].startswith("0x")  # its type: an address
        assert "trimmed" not in event and size(event) < 1024
    (control.directory / "end").touch()
