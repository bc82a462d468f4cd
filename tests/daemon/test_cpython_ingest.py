"""PythonIngest: the Python tracer's JSON batches to rows (parents, returns, exceptions, generator segments,
crashes, watch values, thread names, loss counters), read back through a real store and mcp/wire.py."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.mcp.wire_pages import query_wire
from tests.store.summaries import rebuilt, summaries

from strobe.daemon.python_reads import prepare_python
from strobe.daemon.runtimes.cpython_ingest import WATCH_ID_STRIDE, PythonIngest
from strobe.daemon.watches import Watch, WatchDecoder, WatchSpec, assign
from strobe.store import sessions as store_sessions
from strobe.store.functions import insert_functions
from strobe.store.query import EventFilter, install_functions
from strobe.store.schema import EventKind, connect
from strobe.store.writer import Writer

START = 5_000_000_000


def make_ingest(writer: Writer) -> PythonIngest:
    record = writer.call(lambda c: store_sessions.insert_session(c, "s", "/usr/bin/python3", "/", os.getpid(), 0)
                         ).result(10)
    keys = writer.call(lambda c: insert_functions(c, [
        ("shop.cart.checkout", "checkout", "/p/shop/cart.py", 6, 1, "cpython"),
        ("shop.cart.prices", "prices", "/p/shop/cart.py", 9, 1, "cpython")])).result(10)
    ingest = PythonIngest(writer, record.key, os.getpid(), START)
    ingest.hook(7, keys[0], 1)
    ingest.hook(8, keys[1], 1)
    return ingest


def batch(events: list[list[Any]], **fields: Any) -> bytes:
    return json.dumps({"v": 1, "pid": os.getpid(), "threads": [[4242, "worker"]], "dropped": 0, "errors": [],
                       "events": events, **fields}).encode()


def read(writer: Writer, tmp_path: Path, ingest: PythonIngest) -> list[dict[str, Any]]:
    writer.call(lambda c: None).result(10)
    conn = connect(tmp_path / "strobe.db", readonly=True)
    install_functions(conn)
    try:
        return query_wire(conn, ingest.session, "s", EventFilter(), limit=500, offset=0, verbose=True).events
    finally:
        conn.close()


def test_calls_become_linked_events_with_python_values(writer: Writer, tmp_path: Path) -> None:
    ingest = make_ingest(writer)
    ingest.on_py_batch(batch([
        [1, 7, START + 100, 4242, 1, -1, {"args": [["owner", {"__type__": "shop.User", "name": "ann"}]]}],
        [1, 8, START + 200, 4242, 2, 1, {"args": [["cart", [1, 2]]]}],
        [2, 8, START + 300, 4242, 3, 1, {"yielded": 10, "duration": 100, "enter": 2}],
        [1, 8, START + 400, 4242, 4, 1, {"resumed": True}],
        [3, 8, START + 500, 4242, 5, 1, {"exception": {"type": "KeyError", "message": "'x'", "line": 11},
                                         "duration": 100, "enter": 4}],
    ]))
    ingest.on_py_batch(batch([[2, 7, START + 900, 4242, 6, -1, {"return": 72.5, "duration": 800, "enter": 1}]]))
    events = read(writer, tmp_path, ingest)
    assert [(e["eventType"], e["function"]) for e in events] == [
        ("function_enter", "shop.cart.checkout"), ("function_enter", "shop.cart.prices"),
        ("function_exit", "shop.cart.prices"), ("function_enter", "shop.cart.prices"),
        ("function_exit", "shop.cart.prices"), ("function_exit", "shop.cart.checkout")]
    checkout, prices, yielded, resumed, unwound, returned = events
    assert checkout["timestampNs"] == 100 and checkout["threadName"] == "worker"
    assert checkout["arguments"] == [{"__type__": "shop.User", "name": "ann"}]
    assert checkout["argumentNames"] == ["owner"]
    assert checkout["functionRaw"] == "checkout" and checkout["sourceFile"] == "/p/shop/cart.py"
    assert prices["parentEventId"] == checkout["id"] and yielded["parentEventId"] == checkout["id"]
    assert yielded["returnValue"] == 10 and yielded["yielded"] is True and yielded["returnType"] == "int"
    assert resumed["resumed"] is True and "arguments" not in resumed
    assert unwound["exception"] == {"type": "KeyError", "message": "'x'", "line": 11}
    assert "returnValue" not in unwound and unwound["durationNs"] == 100
    assert returned["returnValue"] == 72.5 and returned["returnType"] == "float" and "parentEventId" not in returned


def test_an_uncaught_exception_is_a_crash_event(writer: Writer, tmp_path: Path) -> None:
    ingest = make_ingest(writer)
    frames = [{"file": "/p/app.py", "line": 30, "function": "<module>", "locals": {}},
              {"file": "/p/shop/cart.py", "line": 48, "function": "explode", "locals": {"order_id": 1}}]
    ingest.on_py_batch(batch([[9, -1, START + 50, 4242, 1, -1, {
        "type": "RuntimeError", "message": "cannot ship", "thread": "MainThread", "traceback": frames}]]))
    (crash,) = read(writer, tmp_path, ingest)
    conn = connect(tmp_path / "strobe.db", readonly=True)
    try:
        assert summaries(conn) == rebuilt(conn)
    finally:
        conn.close()
    assert crash["eventType"] == "crash" and crash["runtime"] == "cpython"
    assert crash["exceptionType"] == "RuntimeError" and crash["exceptionMessage"] == "cannot ship"
    assert (crash["function"], crash["sourceFile"], crash["line"]) == ("explode", "/p/shop/cart.py", 48)
    assert crash["locals"] == {"order_id": 1} and [f["function"] for f in crash["backtrace"]] == ["explode",
                                                                                                   "<module>"]
    assert crash["text"] == "Uncaught RuntimeError: cannot ship in explode (cart.py:48)"


def test_watch_values_by_the_set_they_were_sent_in_and_their_scope(writer: Writer, tmp_path: Path) -> None:
    ingest = make_ingest(writer)
    scoped = Watch("count", WatchSpec(variable="app.count"), prepare_python("app.count"), None)
    everywhere = Watch("tax", WatchSpec(variable="cart.TAX"), prepare_python("cart.TAX"), None)
    assignment = assign([scoped, everywhere])
    decoder = WatchDecoder(assignment, [(7, "shop.cart.checkout", None), (8, "shop.cart.prices", None)])
    version = ingest.watches.add(decoder)
    (count_id, _), (tax_id, _) = assignment.js
    ids = {str(version * WATCH_ID_STRIDE + count_id): 3, str(version * WATCH_ID_STRIDE + tax_id):
           {"__error__": "`cart` has no attribute `TAX`"}, str(999 * WATCH_ID_STRIDE + 4): 1}  # unknown set: ignored
    ingest.on_py_batch(batch([[1, 7, START + 1, 4242, 1, -1, {"args": [], "watches": ids}]]))
    (event,) = read(writer, tmp_path, ingest)
    assert event["watchValues"] == {"count": 3, "tax": {"error": "`cart` has no attribute `TAX`"}}


def test_unknown_kinds_replies_and_losses(writer: Writer, tmp_path: Path) -> None:
    ingest = make_ingest(writer)
    ingest.on_py_batch(b'{"v":1,"pid":1,"reply":3,"ok":true}')  # replies are the session's, not rows
    ingest.on_py_batch(b"not json")
    ingest.on_py_batch(batch([[7, 7, START, 4242, 1, -1, {}], [1, 7, START + 5, 4242, 2, -1, {"args": []}]],
                             dropped=12))
    events = read(writer, tmp_path, ingest)
    assert [e["eventType"] for e in events] == ["function_enter"]  # the unknown kind is skipped
    dropped = writer.call(lambda c: c.execute("SELECT dropped FROM sessions WHERE key = ?",
                                              (ingest.session,)).fetchone()[0]).result(10)
    assert dropped == 12


def test_return_values_are_found_by_debug_querys_filter(writer: Writer, tmp_path: Path) -> None:
    ingest = make_ingest(writer)
    values: list[Any] = [3, 2.5, True, "ok", None, [1, 2], "3", 2**53]  # the tracer sends larger ints as text
    events = []
    for n, value in enumerate(values):
        events += [[1, 7, START + 10 * n, 4242, 2 * n + 1, -1, {"args": []}],
                   [2, 7, START + 10 * n + 5, 4242, 2 * n + 2, -1, {"return": value, "duration": 5,
                                                                    "enter": 2 * n + 1}]]
    ingest.on_py_batch(batch(events))
    writer.call(lambda c: None).result(10)
    conn = connect(tmp_path / "strobe.db", readonly=True)
    install_functions(conn)

    def returning(**flt: Any) -> list[Any]:
        page = query_wire(conn, ingest.session, "s", EventFilter(kind=EventKind.FUNCTION_EXIT, **flt), limit=50,
                          offset=0, verbose=True)
        return [(e.get("returnValue"), e["returnType"]) for e in page.events]

    try:
        assert summaries(conn) == rebuilt(conn)  # the count tables kept by the writer are exact
        assert returning() == [(3, "int"), (2.5, "float"), (True, "bool"), ("ok", "str"), (None, "None"),
                               ([1, 2], "list"), ("3", "str"), (2**53, "int")]
        assert returning(return_equals=3) == [(3, "int")]  # not the string "3"
        assert returning(return_equals="3") == [(3, "int"), ("3", "str")]  # as text it names both
        assert returning(return_equals=2.5) == [(2.5, "float")]
        assert returning(return_equals=True) == [(True, "bool")]
        assert returning(return_equals="ok") == [("ok", "str")]
        assert returning(return_is_null=True) == [(None, "None")]
    finally:
        conn.close()
