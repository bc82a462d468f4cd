"""Watch planning and decoding, without a process."""

from __future__ import annotations

import struct

import pytest

from strobe.daemon.memory import PreparedRead, prepare_raw
from strobe.daemon.python_reads import prepare_python
from strobe.daemon.watches import (
    MAX_WATCHES,
    WatchDecoder,
    WatchSpec,
    agent_watches,
    assign,
    plan_watches,
    scope_warnings,
)
from strobe.errors import InvalidPattern, ValidationError, WatchFailed


def raw(address: str, type_name: str = "u32", size: int = 4) -> PreparedRead:
    return prepare_raw(address, size, type_name)


def test_labels_default_to_the_source_and_must_be_unique() -> None:
    specs = [WatchSpec(address="0x10", type="u32"), WatchSpec(expr="1 + 1", label="two")]
    watches, warnings = plan_watches([], specs, [], {"0x10": raw("0x10")}, None)
    assert [w.label for w in watches] == ["0x10", "two"] and warnings == []
    with pytest.raises(ValidationError, match="already exists"):
        plan_watches(watches, [WatchSpec(expr="3", label="two")], [], {}, None)
    kept, warnings = plan_watches(watches, [], ["two", "ghost"], {}, None)
    assert [w.label for w in kept] == ["0x10"] and warnings == ["Watch 'ghost' was not active; nothing to remove."]


def test_unreadable_watches_and_bad_scopes_change_nothing() -> None:
    failed = PreparedRead("gFoo", "?", 0, error="Variable 'gFoo' not found in debug symbols")
    with pytest.raises(WatchFailed, match="not found"):
        plan_watches([], [WatchSpec(variable="gFoo")], [], {"gFoo": failed}, None)
    with pytest.raises(WatchFailed, match="raw buffer"):
        plan_watches([], [WatchSpec(address="0x1")], [], {"0x1": prepare_raw("0x1", 8, "bytes")}, None)
    with pytest.raises(InvalidPattern):
        plan_watches([], [WatchSpec(expr="1", on=("a:::b",))], [], {}, None)


def test_at_most_32_watches() -> None:
    specs = [WatchSpec(expr=str(i)) for i in range(MAX_WATCHES)]
    watches, _ = plan_watches([], specs, [], {}, None)
    with pytest.raises(ValidationError, match="at most 32"):
        plan_watches(watches, [WatchSpec(expr="extra")], [], {}, None)


def test_the_first_four_direct_scalars_are_native_and_scopes_become_function_ids() -> None:
    reads = {f"0x{i}0": raw(f"0x{i}0") for i in range(1, 7)}
    specs = [WatchSpec(address=a, type="u32", on=("audio::*",) if a == "0x10" else None) for a in reads]
    specs.insert(1, WatchSpec(expr="ptr('0x10').readU8()", label="e"))
    watches, _ = plan_watches([], specs, [], reads, None)
    assignment = assign(watches)
    assert [(slot, w.label) for slot, w in assignment.native] == [(0, "0x10"), (1, "0x20"), (2, "0x30"), (3, "0x40")]
    assert [(wid, w.label) for wid, w in assignment.js] == [(4, "e"), (5, "0x50"), (6, "0x60")]
    hooked = [(7, "audio::mix", None), (8, "net::send", None)]
    message = agent_watches(assignment, hooked, 5)
    assert message["version"] == 5
    assert message["native"][0] == {"slot": 0, "address": "0x10", "size": 4, "funcs": [7]}
    assert message["native"][1]["funcs"] is None
    assert message["js"][0] == {"id": 4, "label": "e", "funcs": None, "expr": "ptr('0x10').readU8()"}
    assert message["js"][1]["recipe"]["address"] == "0x50"
    assert scope_warnings(watches, [(8, "net::send", None)]) == [
        "Watch '0x10' is scoped to ['audio::*'], which match no traced function yet: its values appear once "
        "such a function is traced (add a pattern with debug_trace)."
    ]


def test_decoder_turns_captures_into_watch_values() -> None:
    reads = {"0x10": raw("0x10", "i16", 2), "0x20": raw("0x20", "f64", 8), "0x30": raw("0x30", "pointer", 8)}
    specs = [WatchSpec(address=a, type="u32") for a in reads] + [WatchSpec(expr="1", label="x")]
    watches, _ = plan_watches([], specs, [], reads, None)
    decoder = WatchDecoder(assign(watches))
    words = [0xFFFE, struct.unpack("<Q", struct.pack("<d", 2.5))[0], 0, 0]
    assert decoder.native(0b011, words) == {"0x10": -2, "0x20": 2.5}
    assert decoder.native(0b100, words) == {"0x30": None}
    assert decoder.js({"4": {"v": [1, 2]}}) == {"x": [1, 2]}
    assert decoder.js({"4": {"e": "boom"}, "99": {"v": 1}}) == {"x": {"error": "boom"}}


def test_watches_past_the_native_four_are_decoded_from_the_bytes_the_agent_read() -> None:
    reads = {f"0x{i}0": raw(f"0x{i}0", "u16", 2) for i in range(1, 6)}
    watches, _ = plan_watches([], [WatchSpec(address=a, type="u16") for a in reads], [], reads, None)
    decoder = WatchDecoder(assign(watches))
    assert decoder.js({"4": {"h": "3412"}}) == {"0x50": 0x1234}


def test_python_watches_are_sent_as_chains_and_scoped_by_python_names() -> None:
    specs = [WatchSpec(variable="app.count", on=("shop.cart.*",)), WatchSpec(variable="app.cfg", on=("auth::*",))]
    reads = {"app.count": prepare_python("app.count"), "app.cfg": prepare_python("app.cfg")}
    watches, _ = plan_watches([], specs, [], reads, None)
    hooked = [(1, "shop.cart.checkout", None), (2, "shop.cart.Cart.total", None), (3, "auth::check", None)]
    message = agent_watches(assign(watches), hooked, 5)
    assert message["native"] == []
    assert message["js"] == [  # '*' stops at '.' in a Python scope: Cart.total is one level too deep
        {"id": 4, "label": "app.count", "funcs": [1], "python": "app.count"},
        {"id": 5, "label": "app.cfg", "funcs": [3], "python": "app.cfg"}]
    decoder = WatchDecoder(assign(watches), hooked)
    assert decoder.python(4, 1, 7) == ("app.count", 7) and decoder.python(4, 2, 7) is None
    assert decoder.python(5, 3, {"__error__": "gone"}) == ("app.cfg", {"error": "gone"})
