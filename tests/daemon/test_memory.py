"""The host half of memory reads, without a process: raw recipes, decoding what the agent returns,
byte dumps, and poll bookkeeping."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from strobe.daemon.memory import (
    SessionPolls,
    describe_fields,
    pair_results,
    prepare_raw,
    result_of,
    snapshot_row,
    snapshot_values,
)
from strobe.instrument.protocol import PollComplete, ReadResult, VariableSnapshot
from strobe.store.schema import EVENT_COLUMNS, EventKind
from strobe.symbols.types import Field, ValueLayout


def test_raw_recipe_is_absolute_and_checks_the_size_against_the_type() -> None:
    read = prepare_raw("0x10A0", 4, "u32")
    assert read.recipe == {"label": "0x10A0", "address": "0x10a0", "derefs": [], "offset": 0, "size": 4,
                           "strings": []}
    mismatch = prepare_raw("0x10", 2, "u32")
    assert mismatch.recipe is None and mismatch.error is not None and "use size 4" in mismatch.error
    assert prepare_raw("0x10", 3, "bytes").is_bytes


def test_raw_values_decode_by_type() -> None:
    data = struct.pack("<iqdQ", -5, 1 << 40, 2.5, 0)
    cases = [("i32", 0, 4, -5), ("i64", 4, 8, 1 << 40), ("f64", 12, 8, 2.5), ("pointer", 20, 8, None)]
    for type_name, offset, size, expected in cases:
        target = prepare_raw("0x10", size, type_name)
        result = ReadResult(label="0x10", address="0x10", dataOffset=offset, size=size)
        assert result_of(target, result, data, bytes_dir=None, session_id="s")["value"] == expected


def test_agent_errors_and_missing_answers_stay_per_target(tmp_path: Path) -> None:
    good, bad, refused = prepare_raw("0x1", 1, "u8"), prepare_raw("0x2", 1, "u8"), prepare_raw("0x3", 2, "u8")
    answers = [ReadResult(label="0x1", address="0x1", dataOffset=0, size=1),
               ReadResult(label="0x2", error="Address 0x2 not readable")]
    paired = pair_results([good, refused, bad], answers)
    assert [r.label if r else None for _, r in paired] == ["0x1", None, "0x2"]
    out = [result_of(t, r, b"\x07", bytes_dir=tmp_path, session_id="s") for t, r in paired]
    assert out[0]["value"] == 7
    assert "does not match" in out[1]["error"]
    assert out[2] == {"target": "0x2", "type": "u8", "error": "Address 0x2 not readable"}


def test_bytes_go_to_a_private_file_of_the_session_with_a_preview(tmp_path: Path) -> None:
    target = prepare_raw("0x10", 40, "bytes")
    data = bytes(range(40))
    out = result_of(target, ReadResult(label="0x10", address="0x10", dataOffset=0, size=40), data,
                    bytes_dir=tmp_path, session_id="app-1")
    path = Path(out["file"])
    assert path.parent == tmp_path / "app-1" and path.read_bytes() == data
    assert path.stat().st_mode & 0o777 == 0o600
    assert out["preview"] == " ".join(f"{b:02x}" for b in range(32)) + " …"


def test_struct_fields_show_types_and_nested_structs() -> None:
    point = ValueLayout("struct", "Point", 8, fields=(Field("x", 0, ValueLayout("int", "int", 4)),))
    deep = ValueLayout("struct", "Deep", 8, truncated=True)
    outer = ValueLayout("struct", "Outer", 16, fields=(Field("p", 0, point), Field("d", 8, deep)))
    shown = describe_fields(outer, {"p": {"x": 3}, "d": "<struct>"})
    assert shown == {"p": {"type": "Point", "fields": {"x": {"type": "int", "value": 3}}},
                     "d": {"type": "Deep", "value": "<struct>"}}


def test_polls_count_samples_and_end_states() -> None:
    polls = SessionPolls()
    target = prepare_raw("0x10", 2, "u16")
    poll = polls.add([target], 100, 1000)
    assert poll.expected == 10 and polls.running() == 1
    snap = VariableSnapshot(type="variable_snapshot", pollId=poll.poll_id, sec=1, nsec=2,
                            results=[ReadResult(label="0x10", address="0x10", dataOffset=0, size=2)])
    assert polls.on_snapshot(snap, b"\x01\x02") == {"0x10": 0x0201}
    assert polls.on_snapshot(snap.model_copy(update={"pollId": 99}), b"") is None
    polls.on_complete(PollComplete(type="poll_complete", pollId=poll.poll_id, sampleCount=1))
    assert polls.states()[0].state == "complete" and polls.states()[0].samples == 1
    second = polls.add([target], 50, 100)
    polls.process_gone()
    assert [p.state for p in polls.states()] == ["complete", "process_exited"]
    assert second.samples == 0 and polls.running() == 0


def test_a_snapshot_is_one_event_with_every_value() -> None:
    values = snapshot_values([prepare_raw("0x1", 1, "u8"), prepare_raw("0x2", 1, "u8")],
                             [ReadResult(label="0x1", dataOffset=0, size=1), ReadResult(label="0x2", error="gone")],
                             b"\x05")
    assert values == {"0x1": 5, "0x2": {"error": "gone"}}
    row = dict(zip(EVENT_COLUMNS, snapshot_row(3, 77, 1234, values), strict=True))
    assert row["kind"] == EventKind.VARIABLE_SNAPSHOT and row["ts"] == 1234 and row["pid"] == 77
    assert json.loads(row["args"]) == values and row["func"] is None
