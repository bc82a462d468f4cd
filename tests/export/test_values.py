"""An exported call's values are the ones debug_query's verbose events show: typed native arguments (a struct with a
float field, a followed string, a double), Python strings, floats and dicts, a null pointer returned, and values
too big for an event, cut the same way."""

from __future__ import annotations

import contextlib
import json
import struct
from pathlib import Path
from typing import Any

from strobe.export.exporting import export_session, open_store
from strobe.store.query import EventFilter
from strobe.store.schema import EventKind
from strobe.store.sessions import SessionStatus
from tests.export.checks import check_chrome, load_chrome
from tests.export.dataset import ENTER, EXIT, PID, Stored, row, store_session
from tests.mcp.wire_pages import query_wire

SESSION = "values-2026-03-01-10h00"
DOUBLE = {"kind": "float", "size": 8}
PAIR = {"kind": "struct", "size": 16, "fields": [
    {"name": "id", "offset": 0, "value": {"kind": "int", "size": 8}}, {"name": "weight", "offset": 8, "value": DOUBLE}]}
PLAN = {
    "params": [
        {"name": "p", "type": "struct pair", "value": PAIR,
         "pieces": [{"at": 0, "size": 8, "reg": "rdi"}, {"at": 8, "size": 8, "reg": "rsi"}]},
        {"name": "name", "type": "const char *", "value": {"kind": "pointer", "size": 8},
         "pieces": [{"at": 0, "size": 8, "reg": "rdx"}]},
        {"name": "scale", "type": "double", "value": DOUBLE, "pieces": [{"at": 0, "size": 8, "reg": "xmm0"}]},
    ],
    "returns": {"type": "struct pair *", "value": {"kind": "pointer", "size": 8},
                "pieces": [{"at": 0, "size": 8, "reg": "rax"}]},
}
FUNCTIONS = [(1, "make_pair", "/proj/pair.c", 5, None), (2, "app.greet", "/proj/app.py", 10, "cpython")]


def bits(value: float) -> int:
    return int(struct.unpack("<q", struct.pack("<d", value))[0])


def words(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}q", *values)


def events(key: int) -> list[tuple[Any, ...]]:
    native = words(7, bits(2.5), 0x7F0000001000, 0, 0, 0, bits(-0.125), 0, 0, 0, 0, 0)
    big = "ü" * 6000
    return [
        row(key, 1000, ENTER, tid=PID, func=1, args=native, extra=json.dumps({"followed": {"1": "héllo"}})),
        row(key, 2000, EXIT, tid=PID, func=1, duration=1000, retval=0),
        row(key, 3000, ENTER, tid=PID, func=2,
            args=json.dumps([["who", "wörld"], ["ratio", 1e16], ["cfg", {"a": [1.5]}]])),
        row(key, 4000, EXIT, tid=PID, func=2, duration=1000, retval=json.dumps({"text": "hi", "n": 0.1})),
        row(key, 5000, ENTER, tid=PID, func=2, args=json.dumps([["who", big], ["ratio", 0.5], ["cfg", None]]),
            sampled=1),
        row(key, 6000, EXIT, tid=PID, func=2, duration=1000, retval=json.dumps([big, big])),
    ]


def store(home: Path) -> Stored:
    return store_session(home, SESSION, "/proj/values", FUNCTIONS, events, signatures=[(1, json.dumps(PLAN))],
                         status=SessionStatus.EXITED, code=0)


def test_exported_values_are_debug_querys_verbose_values(tmp_path: Path) -> None:
    home = tmp_path / "home"
    stored = store(home)
    with contextlib.closing(open_store(stored.db)) as conn:
        shown = query_wire(conn, stored.key, SESSION, EventFilter(), limit=100, offset=0, verbose=True).events
        result = export_session(conn, SESSION, "chrome", None, home=home)
    calls = check_chrome(load_chrome(result.path))[(PID, PID)]
    assert [c["name"] for c in calls] == ["make_pair", "app.greet", "app.greet"]
    enters = [e for e in shown if e["eventType"] == EventKind.FUNCTION_ENTER.wire_name]
    exits = [e for e in shown if e["eventType"] == EventKind.FUNCTION_EXIT.wire_name]
    for call, enter, exit_ in zip(calls, enters, exits, strict=True):
        args = call["args"]
        for key_ in ("arguments", "argumentNames", "argumentTypes", "sampled", "sourceFile", "line", "id"):
            assert args.get(key_) == enter.get(key_), (call["name"], key_)
        for key_ in ("returnValue", "returnType"):
            assert args.get(key_) == exit_.get(key_), (call["name"], key_)
        assert args.get("trimmed") == exit_.get("trimmed", enter.get("trimmed"))  # the exit's, when both are cut
    native = calls[0]["args"]
    assert native["arguments"] == [{"id": 7, "weight": 2.5}, "héllo", -0.125]
    assert native["argumentTypes"] == ["struct pair", "const char *", "double"]
    assert "returnValue" in native and native["returnValue"] is None  # a null pointer shows as null
    assert calls[1]["args"]["arguments"] == ["wörld", 1e16, {"a": [1.5]}]
    assert calls[1]["args"]["returnValue"] == {"text": "hi", "n": 0.1}
    assert "trimmed" in enters[2] and isinstance(calls[2]["args"]["arguments"][0], str)  # cut as debug_query cuts
