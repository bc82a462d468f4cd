"""Events cut to a size an LLM can read (mcp/sizing.py): the biggest subtrees go first, each cut leaves a marker
saying what is missing and how to see it, and what fits comes back untouched."""

from __future__ import annotations

import copy
import json
import time
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from strobe.mcp import sizing, wire
from strobe.mcp.sizing import Marks, fit, measure


def compact(value: Any) -> int:
    """The size as mcp/app.py sends an answer: compact JSON, ASCII."""
    return len(json.dumps(value, separators=(",", ":")))


def struct(prefix: str, fields: int, nested: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {f"{prefix}{i}": i * 1000 for i in range(fields)}
    if nested:
        out["next"] = struct(prefix, fields, nested - 1)
    return out


def typed_event(argument: Any) -> dict[str, Any]:
    return {"id": "app-1-7", "eventType": "function_enter", "timestampNs": 123, "function": "take",
            "arguments": [argument, 3], "argumentNames": ["big", "n"], "argumentTypes": ["struct big *", "int"]}


def markers(value: Any) -> list[str]:
    found: list[str] = []
    if isinstance(value, dict):
        for item in value.values():
            found += markers(item)
    elif isinstance(value, list):
        for item in value:
            found += markers(item)
    elif isinstance(value, str) and "…" in value:
        found.append(value)
    return found


SMALL = {"id": "shop-2026-02-05-14h32-123", "eventType": "function_enter", "timestampNs": 123456789,
         "function": "process_order", "sourceFile": "/home/u/proj/src/orders.c", "line": 42, "threadId": 4242,
         "threadName": "worker", "pid": 1234, "parentEventId": "shop-2026-02-05-14h32-120",
         "arguments": [{"id": 7, "qty": 150, "name": "apple", "next": "0x55d4a2c04010"}, 3],
         "argumentNames": ["order", "n"], "argumentTypes": ["struct order *", "int"]}


def test_a_small_event_comes_back_as_the_same_object() -> None:
    before = copy.deepcopy(SMALL)
    assert fit(SMALL, 4096) is SMALL
    assert before == SMALL


def test_measure_is_the_compact_ascii_json_the_answer_carries() -> None:
    for value in (SMALL, {"t": "é" * 10}, {"t": "\U0001f600"}, [1.5, None, True, False, -3], {"k": "a\"b\\\n"}):
        assert measure(value) == compact(value)


def test_exactly_at_the_limit_is_kept_one_byte_over_is_cut() -> None:
    event = {"id": "x", "values": {"s": "a" * 1000}}
    size = compact(event)
    assert fit(event, size) is event
    cut = fit(event, size - 1)
    assert cut is not event and compact(cut) <= size - 1
    assert cut["trimmed"] == {"bytes": size, "limit": size - 1}


def test_nested_structs_lose_their_deepest_fields_first() -> None:
    event = typed_event({"small": 1, "name": "alpha", "peer": struct("f", 40, nested=5)})
    assert compact(event) > 2900
    cut = fit(event, 2048, wire._values_rule, Marks(wire._namer(event, sizing.arrows({}, "->")),
                                                    "a smaller serializationDepth"))
    assert compact(cut) <= 2048
    argument = cut["arguments"][0]
    assert argument["small"] == 1 and argument["name"] == "alpha"  # the small fields stay whole
    assert cut["arguments"][1] == 3 and cut["function"] == "take" and cut["argumentNames"] == ["big", "n"]
    deepest = argument["peer"]
    while isinstance(deepest.get("next"), dict):
        deepest = deepest["next"]
    assert "…" in deepest
    found = markers(cut)
    assert found and all("more field" in m for m in found)
    assert any("(debug_read with a field path, e.g. 'big->peer->" in m and "or a smaller serializationDepth)" in m
               for m in found)


def test_the_marker_names_the_first_cut_field() -> None:
    event = typed_event({f"field{i}": "x" * 60 for i in range(100)})
    cut = fit(event, 1024, wire._values_rule, Marks(wire._namer(event, sizing.arrows({}, "->")), "a smaller depth"))
    argument = cut["arguments"][0]
    kept = [k for k in argument if k != "…"]
    assert kept == [f"field{i}" for i in range(len(kept))]  # a prefix of the fields
    assert argument["…"] == (f"… {100 - len(kept)} more fields (debug_read with a field path, e.g. "
                             f"'big->field{len(kept)}', or a smaller depth)")


def test_long_arrays_keep_their_first_elements() -> None:
    event = {"id": "x", "values": {"gTable": list(range(2000))}}
    cut = fit(event, 1024, wire._values_rule, Marks(wire._namer(event, lambda name: ".")))
    table = cut["values"]["gTable"]
    assert compact(cut) <= 1024
    shown = table[:-1]
    assert shown == list(range(len(shown)))
    assert table[-1] == f"… {2000 - len(shown)} more elements (debug_read e.g. 'gTable[{len(shown)}]')"


def test_long_strings_end_with_the_count_of_cut_characters() -> None:
    text = "0123456789" * 500
    cut = fit({"id": "x", "values": {"s": text}}, 1024)
    shown = cut["values"]["s"]
    head, _, tail = shown.partition("…")
    assert text.startswith(head) and tail == f"(+{len(text) - len(head)} chars)"
    assert compact(cut) <= 1024 and compact(cut) > 1024 - 40  # cut to fit, not far below


def test_unicode_is_counted_by_its_escaped_bytes() -> None:
    # 900 characters, but 5,400 bytes as the answer carries them (each one a \\uXXXX escape): cut.
    event = {"id": "x", "values": {"s": "é" * 900}}
    assert compact(event) > 4096
    cut = fit(event, 4096)
    assert compact(cut) <= 4096 and cut["values"]["s"].startswith("é" * 600)
    astral = fit({"id": "x", "values": {"s": "\U0001f600" * 1000}}, 2048)  # surrogate pairs: 12 bytes each
    shown = astral["values"]["s"]
    assert compact(astral) <= 2048
    assert set(shown.partition("…")[0]) == {"\U0001f600"}  # never half a character
    json.loads(json.dumps(astral))


def test_mixed_values_cut_the_biggest_subtree_and_leave_the_small_ones() -> None:
    event = {"id": "x", "eventType": "function_enter", "function": "f" * 300,
             "arguments": [{"a": 1, "b": "short"}, "y" * 5000, struct("g", 200), [1, 2, 3]]}
    cut = fit(event, 4096)
    assert compact(cut) <= 4096
    assert cut["function"] == "f" * 300  # not a value: kept
    args = cut["arguments"]
    assert args[0] == {"a": 1, "b": "short"} and args[3] == [1, 2, 3]
    assert args[1].startswith("yyy") and args[1].endswith("chars)") and "…" in args[2]


def test_trimming_is_idempotent_and_leaves_its_input_alone() -> None:
    event = typed_event({"peer": struct("f", 50, nested=6), "text": "z" * 3000, "list": list(range(500))})
    before = copy.deepcopy(event)
    once = fit(event, 2048)
    assert event == before
    assert fit(once, 2048) is once
    assert compact(once) <= 2048 and once["trimmed"]["bytes"] == compact(event)


def test_kept_parts_are_never_cut() -> None:
    crash = {"id": "x", "eventType": "crash", "registers": {f"r{i}": "0x" + "f" * 16 for i in range(18)},
             "frameMemory": {"hex": "00" * 640, "size": 640},
             "backtrace": [{"address": "0x1000", "function": "main", "locals": {"buf": "q" * 3000}}] * 3,
             "locals": {"big": struct("f", 300)}}
    cut = fit(crash, 4096, wire._values_rule)
    assert compact(cut) <= 4096
    assert cut["registers"] == crash["registers"] and cut["frameMemory"] == crash["frameMemory"]
    assert [f["address"] for f in cut["backtrace"]] == ["0x1000"] * 3
    assert all(f["locals"]["buf"].endswith("chars)") for f in cut["backtrace"])
    assert "…" in cut["locals"]["big"]


def test_a_caller_frames_local_is_named_with_its_frame() -> None:
    pause = {"id": "x", "eventType": "pause", "backtrace": [
        {"function": "inner", "locals": {}}, {"function": "outer", "locals": {"cfg": struct("opt", 300)}}]}
    cut = fit(pause, 2048, wire._values_rule, Marks(wire._namer(pause, lambda name: ".")))
    marker = cut["backtrace"][1]["locals"]["cfg"]["…"]
    assert "{variable: 'cfg.opt" in marker and "frame: 1}" in marker


def test_debug_read_results_are_named_through_their_typed_fields() -> None:
    fields = {f"f{i}": {"type": "int", "value": i} for i in range(400)}
    result = {"target": "g_big", "address": "0x1000", "type": "Big", "size": 1600,
              "fields": {"inner": {"type": "Inner", "fields": fields}, "id": {"type": "int", "value": 1}}}
    cut = wire.read_result(result, 2048)
    assert compact(cut) <= 2048 and cut["trimmed"]["bytes"] == compact(result)
    assert cut["target"] == "g_big" and cut["fields"]["id"] == {"type": "int", "value": 1}
    inner = cut["fields"]["inner"]["fields"]
    first_cut = sum(1 for k in inner if k != "…")
    assert inner["…"].startswith(f"… {400 - first_cut} more fields (debug_read with a field path, e.g. "
                                 f"'g_big.inner.f{first_cut}', or a smaller depth)")


def test_pointer_evidence_spells_arrows() -> None:
    value = {"next": "0x10", "mid": "<struct mid>", "loop": "<circular ref to head>", "gone": None,
             "deeper": {"mid": {"x": 1}}}
    assert sizing.pointer_fields(value) == {"next": True, "mid": False, "loop": True, "gone": True}
    after = sizing.arrows(sizing.pointer_fields(value), "->")
    assert sizing.spell("head", value, ("deeper", "mid", "x"), "->", after) == "head->deeper->mid.x"
    assert sizing.spell("head", value, ("items", 3, "x"), ".", after) == "head.items[3].x"
    assert sizing.spell("head", value, ("…",), ".", after) is None


@settings(max_examples=150, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=400),
        lambda inner: st.lists(inner, max_size=30) | st.dictionaries(st.text(max_size=12), inner, max_size=30),
        max_leaves=400,
    ),
    st.integers(min_value=1024, max_value=6000),
)
def test_any_value_fits_under_any_limit(value: Any, limit: int) -> None:
    event = {"id": "s-1", "eventType": "function_enter", "arguments": [value]}
    cut = fit(event, limit)
    assert compact(cut) <= limit
    assert fit(cut, limit) is cut
    if compact(event) <= limit:
        assert cut is event
    else:
        assert cut["trimmed"] == {"bytes": compact(event), "limit": limit}


def test_a_small_event_costs_a_few_microseconds() -> None:
    rounds = 2000

    def timed(call: Any) -> float:
        best = float("inf")
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(rounds):
                call()
            best = min(best, (time.perf_counter() - start) / rounds)
        return best

    per_event = timed(lambda: fit(SMALL, 4096))
    serialize = timed(lambda: json.dumps(SMALL, separators=(",", ":")))
    # One measuring pass: about what serializing the event costs, far from the ~10 µs budget per event.
    assert per_event < max(3 * serialize, 20e-6), (per_event, serialize)
