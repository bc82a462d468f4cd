"""Register plans read back at query time: typed arguments and return values from raw register words, and
the verbose wire form of events whose function has a plan (store/registers.py, store/query.py, mcp/wire.py)."""

from __future__ import annotations

import json
import sqlite3
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.mcp.wire_pages import query_wire

from strobe.store import sessions as store_sessions
from strobe.store.functions import insert_functions, set_signatures
from strobe.store.query import EventFilter
from strobe.store.registers import parse_plan, words_of
from strobe.store.schema import EventKind, connect

GARBAGE = 0xDEAD_BEEF << 32
MASK = (1 << 64) - 1


def reg(name: str, at: int = 0, size: int = 8) -> dict[str, Any]:
    return {"at": at, "size": size, "reg": name}


def param(name: str, type_name: str, value: dict[str, Any], *pieces: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "type": type_name, "value": value, "pieces": list(pieces)}


INT = {"kind": "int", "size": 4}
COLOR = {"kind": "enum", "size": 4, "signed": True, "names": {"0": "RED", "5": "GREEN", "-1": "BLUE"}}
PAIR = {"kind": "struct", "size": 8, "fields": [
    {"name": "a", "offset": 0, "value": INT}, {"name": "b", "offset": 4, "value": INT}]}
MIXED = {"kind": "struct", "size": 16, "fields": [
    {"name": "id", "offset": 0, "value": {"kind": "int", "size": 8}},
    {"name": "weight", "offset": 8, "value": {"kind": "float", "size": 8}}]}

PLAN = {
    "params": [
        param("i", "int", INT, reg("rdi", size=4)),
        param("u", "unsigned int", {"kind": "uint", "size": 4}, reg("rsi", size=4)),
        param("s", "short int", {"kind": "int", "size": 2}, reg("rdx", size=2)),
        param("c", "char", {"kind": "char", "size": 1}, reg("rcx", size=1)),
        param("b", "_Bool", {"kind": "bool", "size": 1}, reg("r8", size=1)),
        param("col", "color", COLOR, reg("r9", size=4)),
        {"name": "d", "type": "double", "note": "<double in xmm register: not captured>"},
    ],
    "returns": {"type": "int", "value": INT, "pieces": [reg("rax", size=4)]},
    "variadic": False,
    "registers": 6,
}


def decode(plan: dict[str, Any], words: list[int], rax: int | None = None) -> tuple[list[Any], Any]:
    parsed = parse_plan(json.dumps(plan))
    assert parsed is not None
    return parsed.arguments(words), parsed.return_value(rax)


# ---- decoding ----------------------------------------------------------------------------------------


def test_scalars_by_size_and_sign_ignore_the_upper_bits() -> None:
    words = [GARBAGE | 0xFFFF_FFFF, GARBAGE | 4_000_000_000, 0xFFFF_FFFE, GARBAGE | ord("x"), GARBAGE | 1,
             0xFFFF_FFFF]
    arguments, returned = decode(PLAN, words, rax=GARBAGE | 0xFFFF_FF9C)
    assert arguments == [-1, 4_000_000_000, -2, "x", True, "BLUE", "<double in xmm register: not captured>"]
    assert returned == -100


def test_signed_words_as_stored_decode_the_same() -> None:
    # events.args holds int64 words: a register with the top bit set comes back negative.
    words = [w - (1 << 64) if w >> 63 else w for w in [0xFFFF_FFFF_FFFF_FFFF, 7, 0, 0x61, 0, 5]]
    assert decode(PLAN, words)[0][:6] == [-1, 7, 0, "a", False, "GREEN"]


def test_enums_without_a_matching_name_show_their_number() -> None:
    assert decode(PLAN, [0, 0, 0, 0, 0, 0xFFFF_FFFE])[0][5] == -2
    unsigned = {"kind": "enum", "size": 1, "signed": False, "names": {"1": "ON"}}
    plan = {"params": [param("e", "state", unsigned, reg("rdi", size=1))], "returns": {"type": "void"}}
    assert decode(plan, [GARBAGE | 1])[0] == ["ON"]
    assert decode(plan, [GARBAGE | 0xFE])[0] == [254]


def test_pointers_are_hex_or_null() -> None:
    pointer = {"kind": "pointer", "size": 8}
    plan = {"params": [param("p", "int*", pointer, reg("rdi")), param("q", "char*", pointer, reg("rsi"))],
            "returns": {"type": "int*", "value": pointer, "pieces": [reg("rax")]}}
    arguments, returned = decode(plan, [0x7FFD_1234_5678, 0], rax=0)
    assert arguments == ["0x7ffd12345678", None]
    assert returned is None
    assert decode(plan, [-1, 0], rax=-(1 << 63))[0][0] == "0xffffffffffffffff"
    assert decode(plan, [0, 0], rax=-(1 << 63))[1] == "0x8000000000000000"


def test_structs_from_one_or_two_registers_and_from_part_of_an_xmm_split() -> None:
    tagged = {"kind": "struct", "size": 16, "fields": [
        {"name": "id", "offset": 0, "value": {"kind": "int", "size": 8}},
        {"name": "code", "offset": 8, "value": {"kind": "uint", "size": 2}},
        {"name": "tag", "offset": 10, "value": {"kind": "char", "size": 1}},
        {"name": "name", "offset": 11, "value": {"kind": "array", "size": 4, "count": 4,
                                                 "element": {"kind": "char", "size": 1}}}]}
    missing = {"at": 8, "size": 8, "missing": "<in xmm register: not captured>"}
    plan = {"params": [param("p", "pair", PAIR, reg("rdi")), param("t", "tagged", tagged, reg("rsi"), reg("rdx", 8)),
                       param("m", "mixed", MIXED, reg("rcx"), missing)],
            "returns": {"type": "mixed", "value": MIXED, "pieces": [reg("rax"), {**missing, "missing": "<xmm0>"}]}}
    words = [(4 << 32) | 0xFFFF_FFFD, 1 << 40, int.from_bytes(b"\xff\xff" + b"z" + b"ab\0c" + b"\0", "little"),
             -9 & MASK]
    arguments, returned = decode(plan, words, rax=20)
    assert arguments == [{"a": -3, "b": 4}, {"id": 1 << 40, "code": 65535, "tag": "z", "name": "ab"},
                         {"id": -9, "weight": "<in xmm register: not captured>"}]
    assert returned == {"id": 20, "weight": "<xmm0>"}


def test_floats_sharing_an_integer_eightbyte_are_decoded() -> None:
    # struct { float f; int i; }: one INTEGER eightbyte, so the float travels in rdi too.
    value = {"kind": "struct", "size": 8, "fields": [
        {"name": "f", "offset": 0, "value": {"kind": "float", "size": 4}}, {"name": "i", "offset": 4, "value": INT}]}
    plan = {"params": [param("v", "fi", value, reg("rdi"))], "returns": {"type": "void"}}
    word = struct.unpack("<Q", struct.pack("<fi", 2.5, -4))[0]
    assert decode(plan, [word])[0] == [{"f": 2.5, "i": -4}]
    nan = struct.unpack("<Q", struct.pack("<fi", float("nan"), 0))[0]
    assert decode(plan, [nan])[0] == [{"f": "NaN", "i": 0}]


def test_bitfields() -> None:
    flags = {"kind": "struct", "size": 4, "fields": [
        {"name": "ready", "offset": 0, "bitOffset": 0, "bitSize": 1, "value": {"kind": "uint", "size": 4}},
        {"name": "count", "offset": 0, "bitOffset": 1, "bitSize": 3, "value": {"kind": "uint", "size": 4}},
        {"name": "level", "offset": 0, "bitOffset": 4, "bitSize": 4, "value": INT},
        {"name": "on", "offset": 1, "bitOffset": 0, "bitSize": 1, "value": {"kind": "bool", "size": 1}}]}
    plan = {"params": [param("f", "flags", flags, reg("rdi", size=4))], "returns": {"type": "void"}}
    word = 1 | (5 << 1) | ((-3 & 0xF) << 4) | (1 << 8)
    assert decode(plan, [GARBAGE | word])[0] == [{"ready": 1, "count": 5, "level": -3, "on": True}]


def test_registers_the_recording_did_not_keep_show_as_not_captured() -> None:
    arguments, _ = decode(PLAN, [1, 2])
    assert arguments == [1, 2, "<not captured>", "<not captured>", "<not captured>", "<not captured>",
                         "<double in xmm register: not captured>"]
    assert decode(PLAN, [], rax=None)[1] == "<not captured>"


def test_notes_opaque_values_and_empty_structs() -> None:
    plan = {"params": [
        {"name": "big", "type": "big", "note": "<struct passed in memory: not captured>"},
        param("e", "Empty", {"kind": "struct", "size": 0, "fields": []}),
        param("o", "Option<u32>", {"kind": "opaque", "size": 8, "text": "<enum Option<u32>>"}, reg("rdi")),
        param("x", "__m64", {"kind": "bytes", "size": 2}, reg("rsi", size=2)),
    ], "returns": {"type": "double", "note": "<double in xmm0: not captured>"}}
    arguments, returned = decode(plan, [5, 0xABCD])
    assert arguments == ["<struct passed in memory: not captured>", {}, "<enum Option<u32>>", "cd ab"]
    assert returned == "<double in xmm0: not captured>"


def test_void_and_unreadable_plans() -> None:
    parsed = parse_plan(json.dumps({"params": [], "returns": {"type": "void"}, "variadic": True}))
    assert parsed is not None
    assert (parsed.return_type, parsed.returns_value, parsed.variadic, parsed.names) == ("void", False, True, [])
    assert parse_plan(None) is None and parse_plan("") is None and parse_plan("{oops") is None
    assert parse_plan("[1]") is None


def test_words_of() -> None:
    assert words_of(None) == [] and words_of(b"") == []
    assert words_of(struct.pack("<2q", -1, 7)) == [-1, 7]


# ---- the store ---------------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[tuple[sqlite3.Connection, int, str]]:
    conn = connect(tmp_path / "strobe.db")
    session = store_sessions.insert_session(conn, "prog", "/p/prog", "/p", 100, 1_000)
    try:
        yield conn, session.key, session.id
    finally:
        conn.close()


def add_events(conn: sqlite3.Connection, session: int, rows: list[tuple[int, int, int, Any, Any]]) -> None:
    """(ts, kind, func, args, retval) rows; registers stored as int64, the way the ingest does."""
    conn.executemany(
        "INSERT INTO events (session, ts, kind, pid, tid, func, args, retval, duration) "
        "VALUES (?, ?, ?, 100, 1, ?, ?, ?, ?)",
        [(session, ts, kind, func, args, None if retval is None else signed(retval),
          None if kind == EventKind.FUNCTION_ENTER else 10) for ts, kind, func, args, retval in rows],
    )


def signed(word: int) -> int:
    return word - (1 << 64) if word >> 63 else word


def events(conn: sqlite3.Connection, session: int, session_id: str, verbose: bool = True) -> list[dict[str, Any]]:
    return query_wire(conn, session, session_id, EventFilter(), limit=100, offset=0, verbose=verbose).events


def blob(*words: int) -> bytes:
    return struct.pack(f"<{len(words)}q", *[signed(w) for w in words])


ENTER, EXIT = int(EventKind.FUNCTION_ENTER), int(EventKind.FUNCTION_EXIT)


def test_verbose_events_show_typed_arguments_and_return_values(store: tuple[sqlite3.Connection, int, str]) -> None:
    conn, session, sid = store
    typed, void, pointer, raw = insert_functions(conn, [
        ("scalars", None, "/p/a.c", 1, 7, None), ("nothing", None, "/p/a.c", 2, 1, None),
        ("nowhere", None, "/p/a.c", 3, 0, None), ("plain", None, "/p/a.c", 4, 2, None)])
    set_signatures(conn, [
        (typed, json.dumps(PLAN)),
        (void, json.dumps({"params": [param("x", "int", INT, reg("rdi", size=4))], "returns": {"type": "void"}})),
        (pointer, json.dumps({"params": [], "returns": {"type": "int*", "value": {"kind": "pointer", "size": 8},
                                                        "pieces": [reg("rax")]}})),
    ])
    add_events(conn, session, [
        (1, ENTER, typed, blob(GARBAGE | 0xFFFF_FFFF, 7, 0xFFFE, ord("x"), 1, 5), None),
        (2, EXIT, typed, None, GARBAGE | 0xFFFF_FFFF),
        (3, ENTER, void, blob(15), None),
        (4, EXIT, void, None, 0x1234),
        (5, ENTER, pointer, None, None),
        (6, EXIT, pointer, None, 0),
        (7, ENTER, raw, blob(GARBAGE | 0xFFFF_FFFF, 2), None),
        (8, EXIT, raw, None, GARBAGE | 3),
    ])
    shown = events(conn, session, sid)
    enter = shown[0]
    assert enter["arguments"] == [-1, 7, -2, "x", True, "GREEN", "<double in xmm register: not captured>"]
    assert enter["argumentNames"] == ["i", "u", "s", "c", "b", "col", "d"]
    assert enter["argumentTypes"] == ["int", "unsigned int", "short int", "char", "_Bool", "color", "double"]
    assert (shown[1]["returnType"], shown[1]["returnValue"]) == ("int", -1)
    assert shown[2]["arguments"] == [15] and shown[2]["argumentNames"] == ["x"]
    assert shown[3]["returnType"] == "void" and "returnValue" not in shown[3]
    # No parameters: no argument lists; a null pointer is shown as null rather than left out.
    assert not {"arguments", "argumentNames", "argumentTypes"} & set(shown[4])
    assert shown[5]["returnType"] == "int*" and shown[5]["returnValue"] is None
    # Without a plan: raw registers, as before.
    assert shown[6]["arguments"] == [hex(GARBAGE | 0xFFFF_FFFF), 2]
    assert "argumentNames" not in shown[6] and "argumentTypes" not in shown[6]
    assert shown[7]["returnValue"] == hex(GARBAGE | 3) and shown[7]["returnType"] == "pointer"


def test_summary_events_show_the_dwarf_return_type(store: tuple[sqlite3.Connection, int, str]) -> None:
    conn, session, sid = store
    typed, raw = insert_functions(conn, [("is_even", None, None, None, 1, None), ("plain", None, None, None, 1, None)])
    plan = {"params": [param("x", "int", INT, reg("rdi", size=4))],
            "returns": {"type": "_Bool", "value": {"kind": "bool", "size": 1}, "pieces": [reg("rax", size=1)]}}
    set_signatures(conn, [(typed, json.dumps(plan))])
    add_events(conn, session, [(1, ENTER, typed, blob(4), None), (2, EXIT, typed, None, GARBAGE | 1),
                               (3, EXIT, raw, None, 1)])
    summary = events(conn, session, sid, verbose=False)
    assert "arguments" not in summary[0] and "argumentNames" not in summary[0]
    assert summary[1]["returnType"] == "_Bool" and "returnValue" not in summary[1]
    assert summary[2]["returnType"] == "int"
    assert events(conn, session, sid)[1]["returnValue"] is True


def test_set_signatures_replaces_and_clears_plans(store: tuple[sqlite3.Connection, int, str]) -> None:
    conn, _, _ = store
    (key,) = insert_functions(conn, [("f", None, None, None, 0, None)])
    set_signatures(conn, [(key, '{"params": []}')])
    assert conn.execute("SELECT signature FROM functions WHERE key = ?", (key,)).fetchone() == ('{"params": []}',)
    set_signatures(conn, [(key, None)])
    assert conn.execute("SELECT signature FROM functions WHERE key = ?", (key,)).fetchone() == (None,)


def test_an_older_store_gains_the_signature_column(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    old = sqlite3.connect(db)
    old.execute("CREATE TABLE functions (key INTEGER PRIMARY KEY, name TEXT NOT NULL, raw TEXT, file TEXT, "
                "line INTEGER)")
    old.execute("INSERT INTO functions (key, name) VALUES (1, 'kept')")
    old.commit()
    old.close()
    conn = connect(db)
    try:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(functions)")}
        assert {"params", "signature"} <= columns
        assert conn.execute("SELECT name, signature FROM functions").fetchall() == [("kept", None)]
    finally:
        conn.close()
