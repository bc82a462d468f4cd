"""One contract between the agent and the host, checked from both ends.

- Every message interface of agent/src/common/protocol.ts and requests.ts, read by the TypeScript compiler (tag,
  fields, optional or not, basic types, nested types), equals the host's: the pydantic model parsing it (agent ->
  host) in strobe.instrument.protocol, or the TypedDict of the request (host -> agent) in strobe.instrument.requests.
- What the host really posts (handle.ProcessHandle's requests and acks) fits the agent's interfaces.
- PROTOCOL_VERSION, and the trace record constants and field offsets of records.py, equal the agent's
  (native/layout.ts, which the C structs are checked against when they compile; see test_tracer_c.py).
A disagreement fails with a line naming the message (or constant) and the field.
"""

from __future__ import annotations

import functools
import types
from pathlib import Path
from typing import Any, cast, get_args, get_type_hints, is_typeddict

import pytest
from tests.instrument.agent_ts import PROTOCOL_TS, layout_facts, protocol_facts, run_node
from tests.instrument.contract import AgentTypes, differences, python_shape, value_errors

from strobe.instrument import protocol, records, requests
from strobe.instrument.handle import ProcessHandle
from strobe.instrument.launcher import Launcher
from strobe.instrument.requests import HookOptions


@functools.cache
def agent() -> AgentTypes:
    return AgentTypes(protocol_facts())


def host_messages() -> dict[str, type]:
    """tag -> the pydantic model the host parses an agent message with."""
    models = get_args(protocol.AnyAgentMessage)
    return {get_args(m.model_fields["type"].annotation)[0]: m for m in models}


def host_requests() -> dict[str, type]:
    """tag -> the TypedDict describing a request the host sends (requests.py; protocol.py is read too, so that a
    request declared there is not missed)."""
    out = {}
    for value in {**vars(protocol), **vars(requests)}.values():
        if is_typeddict(value) and "type" in get_type_hints(value):
            out[get_args(get_type_hints(value)["type"])[0]] = value
    return out


def test_protocol_versions_agree() -> None:
    assert agent().consts["PROTOCOL_VERSION"] == protocol.PROTOCOL_VERSION


def test_both_sides_know_the_same_agent_messages() -> None:
    assert sorted(agent().agent_messages()) == sorted(host_messages())


def test_both_sides_know_the_same_requests() -> None:
    assert sorted(agent().host_requests()) == sorted(host_requests())


@pytest.mark.parametrize("tag", sorted(host_messages()))
def test_agent_message_shapes_agree(tag: str) -> None:
    ts = agent()
    name = ts.agent_messages()[tag]
    found = differences(ts.shape(name), python_shape(host_messages()[tag]), name, ts)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("tag", sorted(host_requests()))
def test_request_shapes_agree(tag: str) -> None:
    ts = agent()
    name = ts.host_requests()[tag]
    found = differences(ts.shape(name), python_shape(host_requests()[tag]), name, ts)
    assert not found, "\n".join(found)


def test_a_disagreement_names_the_message_and_the_field(tmp_path: Path) -> None:
    texts = {path.name: path.read_text() for path in PROTOCOL_TS}
    for old, new in [("  firstSeq: number;", "  firstSequence: number;"),
                     ("  scanned?: boolean;", "  scanned: boolean;"),
                     ('  action: "add" | "remove";', '  action: "add" | "replace";'),
                     ("  funcs: number[] | null;\n}\n\nexport interface JsWatchSpec", "  funcs: number[];\n}\n\n"
                                                                                       "export interface JsWatchSpec")]:
        [name] = [name for name, text in texts.items() if old in text]
        texts[name] = texts[name].replace(old, new)
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
    ts = AgentTypes(run_node("protocol", *(tmp_path / path.name for path in PROTOCOL_TS)))
    found = [
        *differences(ts.shape("TraceBatch"), python_shape(protocol.TraceBatch), "TraceBatch", ts),
        *differences(ts.shape("CrashReport"), python_shape(protocol.CrashReport), "CrashReport", ts),
        *differences(ts.shape("HooksRequest"), python_shape(requests.HooksRequest), "HooksRequest", ts),
        *differences(ts.shape("WatchesRequest"), python_shape(requests.WatchesRequest), "WatchesRequest", ts),
    ]
    assert found == [
        "TraceBatch.firstSeq: in the host's model, not in the agent's interface",
        "TraceBatch.firstSequence: in the agent's interface, not in the host's",
        "CrashReport.frames[].scanned: required in the agent, optional in the host",
        'HooksRequest.action: the agent allows "add" | "replace", the host "add" | "remove"',
        "WatchesRequest.native[].funcs: the agent says number[], the host number[] | null",
    ]


REPLIES: dict[str, Any] = {  # what the agent answers each request with
    "hooks": lambda rid: protocol.HooksUpdated(type="hooks_updated", requestId=rid, activeCount=0, failed=[]),
    "read_memory": lambda rid: protocol.ReadResponse(type="read_response", requestId=rid, results=[]),
    "watches": lambda rid: protocol.WatchesUpdated(type="watches_updated", requestId=rid, activeCount=0, errors=[]),
    "follow": lambda rid: protocol.FollowUpdated(type="follow_updated", requestId=rid),
    "flush": lambda rid: protocol.Flushed(type="flushed", requestId=rid),
    "py_setup": lambda rid: protocol.PySetupDone(type="py_setup_done", requestId=rid, state="waiting"),
    "lifeline": lambda rid: protocol.LifelineState(type="lifeline_state", requestId=rid, scope="group"),
    "release": lambda rid: protocol.LifelineState(type="lifeline_state", requestId=rid, scope="none"),
    "capture_output": lambda rid: protocol.OutputCapture(type="output_capture", requestId=rid, hooked=["write"]),
    "stdin": lambda rid: protocol.StdinState(type="stdin_state", requestId=rid),
    "breakpoints": lambda rid: protocol.BreakpointsUpdated(type="breakpoints_updated", requestId=rid, failed=[]),
    "write_memory": lambda rid: protocol.MemoryWritten(type="memory_written", requestId=rid, results=[]),
}
BREAKPOINT: dict[str, Any] = {
    "id": "bp-1", "kind": "entry", "address": "0x401000", "condition": "args[0] > 3 && $v(0) > 1 && $v(1) == 'a'",
    "hitCount": 2, "args": [{"name": "n", "reg": "rdi", "size": 4, "signed": True}],
    "values": [{"address": "0x404000", "add": 0, "derefs": [], "offset": 0, "size": 4, "kind": "int", "load": True},
               {"reg": "rbp", "add": -24, "derefs": [0], "offset": 16, "size": 8, "kind": "cstring", "load": True}]}


class RecordingScript:
    """A frida Script stand-in: keeps what the host posts and answers each request as the agent would."""

    def __init__(self) -> None:
        self.posted: list[dict[str, Any]] = []
        self.handle: ProcessHandle | None = None

    def post(self, message: dict[str, Any]) -> None:
        self.posted.append(message)
        if "requestId" in message and self.handle is not None:
            self.handle.deliver_reply(REPLIES[message["type"]](message["requestId"]))


class QuietObserver:
    def on_exit_code(self, pid: int, code: int) -> None:
        pass


RECIPE: dict[str, object] = {"label": "g->next", "address": "0x4010", "derefs": [{"offset": 8, "label": "g"}],
                             "offset": 0, "size": 8, "strings": [0]}
WATCHES: dict[str, object] = {
    "version": 3,
    "native": [{"slot": 0, "address": "0x4010", "size": 4, "funcs": None}],
    "js": [{"id": 4, "label": "g->name", "recipe": RECIPE, "funcs": [1, 2]},
           {"id": 5, "label": "errno", "expr": "Process.id", "funcs": None}],
}
FOLLOW: list[dict[str, object]] = [
    {"id": 1, "version": 2, "nodes": [{"n": 16, "s": [8], "p": [[0, 1]]}, {"n": 0, "t": 1}],
     "slots": [["0", 0, 0], ["r", 6, 1]]},
    {"id": 3, "version": 1, "nodes": [], "slots": []},
]


def test_what_the_host_posts_fits_the_agent_interfaces() -> None:
    script = RecordingScript()
    handle = ProcessHandle(pid=1, session=types.SimpleNamespace(detach=lambda: None), script=script,
                           observer=cast(Any, QuietObserver()))
    script.handle = handle
    handle.tie_lifeline(4242, 7)
    handle.capture_output()
    handle.redirect_stdin(4242, 9)
    handle.update_hooks("add", [(1, 0x401000, 64), (2, 0x401200, 0)], HookOptions(100000, 100))
    handle.update_hooks("remove", [(2, 0x401200, 0)], HookOptions(100000, 100))
    handle.read_memory([RECIPE], 5.0)
    handle.read_memory([RECIPE], 5.0, poll=(7, 10, 1000))
    handle.set_watches(WATCHES)
    handle.set_follow(FOLLOW)
    handle.flush(5.0)
    handle.py_setup("print('@SINK@', @CONTROL_FD@)")
    handle.py_command('{"cmd": "depth", "depth": 2}')
    handle.ack_crash()
    handle.set_breakpoints([cast(Any, BREAKPOINT)], ["bp-0"])
    handle.write_memory([{"recipe": cast(Any, RECIPE), "data": "2a000000"}])
    handle.resume_thread(4243)
    handle.release()
    Launcher()._on_message(handle, {"type": "send", "payload": {"type": "process_exit", "code": 3}}, None)
    ts = agent()
    requests = ts.host_requests()
    # A resume is addressed to the paused thread: its type is `resume:<tid>` (the agent waits on that type).
    resumes = [m for m in script.posted if m["type"].startswith("resume:")]
    assert [m["type"] for m in resumes] == ["resume:4243"]
    posted = [{**m, "type": "resume"} if m in resumes else m for m in script.posted]
    assert sorted({m["type"] for m in posted}) == sorted(requests), "every request kind is exercised"
    found = [e for m in posted for e in value_errors(m, ts.shape(requests[m["type"]]), requests[m["type"]], ts)]
    assert not found, "\n".join(found)


def test_a_posted_request_the_agent_does_not_expect_is_reported() -> None:
    ts = agent()
    bad = {"type": "hooks", "requestId": 1, "action": "add", "functions": [{"id": "1", "address": "0x1", "size": 8}],
           "sampling": {"hotCallsPerSecond": 1}, "fastPath": True, "extra": True}
    assert value_errors(bad, ts.shape("HooksRequest"), "HooksRequest", ts) == [
        "HooksRequest.extra: not in the agent's interface",
        "HooksRequest.functions[0].id: '1' is not number",
        "HooksRequest.sampling.sampleEvery: missing (required by the agent)",
    ]


RECORD_FIELD_OFFSETS = {"ts": "RECORD_TS", "tid": "RECORD_TID", "func": "RECORD_FUNC", "kind": "RECORD_KIND",
                        "flags": "RECORD_FLAGS", "parent": "RECORD_PARENT", "a": "RECORD_ARGS"}


def test_record_constants_agree_with_the_agent_layout() -> None:
    layout: dict[str, int] = layout_facts()["constants"]
    host = {name: getattr(records, name) for name in dir(records)
            if name.startswith(("KIND_", "FLAG_", "WATCH_CAPTURE_")) or name in ("RECORD_SIZE", "NO_PARENT")}
    agent_side = {name: layout[name] for name in layout
                  if name.startswith(("KIND_", "FLAG_", "WATCH_CAPTURE_")) or name in ("RECORD_SIZE", "NO_PARENT")}
    assert host == agent_side, "records.py and agent/src/native/layout.ts disagree"


def test_record_fields_sit_where_the_agent_writes_them() -> None:
    layout: dict[str, int] = layout_facts()["constants"]
    fields = records.RECORD_DTYPE.fields
    assert fields is not None and sorted(fields) == sorted(RECORD_FIELD_OFFSETS)
    for name, constant in RECORD_FIELD_OFFSETS.items():
        assert fields[name][1] == layout[constant], f"records.RECORD_DTYPE {name} at {fields[name][1]}, " \
                                                    f"layout.ts {constant} = {layout[constant]}"
    args = fields["a"][0]
    assert args.shape == (layout["RECORD_ARG_COUNT"],) and args.base.itemsize == layout["RECORD_ARG_SIZE"]
    assert records.RECORD_DTYPE.itemsize == layout["RECORD_SIZE"]

