"""Chrome trace export of a session stored by the real writer: the file parses strictly, calls are properly nested
slices with their arguments and return values, output and crashes are instants, polls are counters, calls without
an exit end at the session's last timestamp marked unfinished, and maxEvents and time windows bound it."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import pytest

from strobe.errors import SessionNotFound
from strobe.export.exporting import ExportPathError, export_session, open_store
from strobe.store.filters import parse_time
from strobe.store.sessions import SessionStatus
from tests.export.checks import check_chrome, load_chrome
from tests.export.dataset import MAIN, PID, SCRIPT_LINE, WORKER, Stored, store


@pytest.fixture
def stored(tmp_path: Path) -> Stored:
    return store(tmp_path)


def export(stored: Stored, path: Path | None = None, **options: Any) -> tuple[Any, dict[str, Any]]:
    with contextlib.closing(open_store(stored.db)) as conn:
        result = export_session(conn, stored.session_id, "chrome", path, home=stored.home, **options)
    return result, load_chrome(result.path)


def by_name(doc: dict[str, Any], ph: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for e in doc["traceEvents"]:
        if e["ph"] == ph:
            out.setdefault(e["name"], []).append(e)
    return out


def test_calls_are_nested_slices_with_arguments_and_return_values(stored: Stored) -> None:
    result, doc = export(stored)
    assert result.path == stored.home / "exports" / f"{stored.session_id}.json"
    assert result.path.stat().st_mode & 0o777 == 0o600
    slices = check_chrome(doc)
    main = [(e["name"], e["ts"], e["dur"], e["_depth"]) for e in slices[(PID, MAIN)]]
    assert main == [("app.main", 1000.0, 5000.0, 0), ("app.compute", 2000.0, 2000.0, 1),
                    ("app.helper", 2500.0, 500.0, 2), ("native_add", 4100.0, 100.0, 1)]
    worker = [(e["name"], e["ts"], e["dur"], e["_depth"]) for e in slices[(PID, WORKER)]]
    assert worker == [("app.compute", 2200.0, 3800.0, 0), ("app.stuck", 2300.0, 3700.0, 1)]
    compute = slices[(PID, MAIN)][1]["args"]
    assert compute["arguments"] == [3] and compute["argumentNames"] == ["n"]
    assert compute["returnValue"] == 6 and compute["returnType"] == "int" and compute["sourceFile"] == "/proj/app.py"
    assert "unfinished" not in compute
    native = slices[(PID, MAIN)][3]["args"]
    assert native["arguments"][:2] == [6, 7] and native["returnValue"] == 13
    # No exit: they end at the session's last timestamp (the crash), saying why.
    for e in (slices[(PID, MAIN)][0], *slices[(PID, WORKER)]):
        assert e["ts"] + e["dur"] == 6000.0 and e["args"]["unfinished"] == "no exit recorded: the process crashed"
    assert result.events == 6 + 2 + 1 + 3 * 2 and result.threads == 2 and not result.truncated


def test_metadata_names_processes_and_threads(stored: Stored) -> None:
    _, doc = export(stored)
    meta = {(e["name"], e["pid"], e.get("tid")): e["args"] for e in doc["traceEvents"] if e["ph"] == "M"}
    assert meta[("process_name", PID, None)] == {"name": "demo (100)"}
    assert meta[("thread_name", PID, MAIN)] == {"name": "demo"}
    assert meta[("thread_name", PID, WORKER)] == {"name": "worker"}
    assert doc["metadata"]["sessionId"] == stored.session_id and doc["metadata"]["status"] == "crashed"
    assert doc["metadata"]["truncated"] is False


def test_output_and_crash_are_instants(stored: Stored) -> None:
    _, doc = export(stored)
    instants = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    output = [e for e in instants if e["cat"] in ("stdout", "stderr")]
    assert [(e["cat"], e["ts"], e["args"]["text"], e["s"]) for e in output] == [
        ("stdout", 1500.0, SCRIPT_LINE, "p"), ("stderr", 5000.0, "oops\n", "p")]
    (crash,) = [e for e in instants if e["cat"] == "crash"]
    assert crash["name"] == "crash: SIGSEGV in app.stuck" and crash["s"] in ("p", "g") and crash["ts"] == 6000.0
    assert crash["tid"] == WORKER
    args = crash["args"]
    assert args["signal"] == "SIGSEGV" and args["address"] == "0x401000" and args["faultAddress"] == "0x0"
    assert [f["function"] for f in args["backtrace"]] == ["app.stuck", "app.compute"]
    assert "frameMemory" not in args  # bulk a picture does not need


def test_poll_snapshots_are_counters_of_their_numbers(stored: Stored) -> None:
    _, doc = export(stored)
    counters = by_name(doc, "C")
    assert [(e["ts"], e["args"]) for e in counters["counter"]] == [
        (1000.0, {"value": 10.0}), (3000.0, {"value": 30.0}), (5000.0, {"value": 50.0})]
    assert [e["args"] for e in counters["cfg"]] == [{"limit": 5.0}] * 3  # the string field is left out
    assert "bad" not in counters  # an error has no number


def test_max_events_truncates_and_closes_open_calls(stored: Stored) -> None:
    result, doc = export(stored, max_events=4)
    assert result.truncated and doc["metadata"]["truncated"] is True
    slices = check_chrome(doc)
    unfinished = [e for own in slices.values() for e in own if "unfinished" in e["args"]]
    assert unfinished and all(e["args"]["unfinished"] == "export stopped at maxEvents" for e in unfinished)
    # Two counters at 1 ms, the stdout line, two at 3 ms: the walk stopped there (the row that reached the cap is
    # whole), and the five calls still open end at 3 ms.
    assert sorted(e["name"] for e in unfinished) == ["app.compute", "app.compute", "app.helper", "app.main",
                                                     "app.stuck"]
    assert result.events == 5 + 5
    assert all(e["ph"] == "M" or e["ts"] + e.get("dur", 0.0) <= 3000.0 for e in doc["traceEvents"])


def test_a_time_window_keeps_calls_whose_enter_is_before_it(stored: Stored) -> None:
    _, doc = export(stored, time_from=parse_time("2600us"), time_to=parse_time("4500us"))
    slices = check_chrome(doc)
    main = [(e["name"], e["ts"], e["dur"], e["args"].get("enter")) for e in slices[(PID, MAIN)]]
    assert main == [("app.compute", 2000.0, 2000.0, "not recorded"), ("app.helper", 2500.0, 500.0, "not recorded"),
                    ("native_add", 4100.0, 100.0, None)]
    assert (PID, WORKER) not in slices


def test_a_running_session_exports_and_says_calls_are_still_running(tmp_path: Path) -> None:
    stored = store(tmp_path, status=SessionStatus.RUNNING)
    _, doc = export(stored)
    slices = check_chrome(doc)
    assert slices[(PID, MAIN)][0]["args"]["unfinished"] == "still running when exported"


def test_paths_unknown_sessions_and_unwritable_places(stored: Stored, tmp_path: Path) -> None:
    inside = tmp_path / "out"
    inside.mkdir()
    result, _ = export(stored, inside)  # a directory: <sessionId>.json in it
    assert result.path == inside / f"{stored.session_id}.json" and list(inside.iterdir()) == [result.path]
    named, _ = export(stored, inside / "t.json")
    assert named.path == inside / "t.json"
    with pytest.raises(ExportPathError, match="does not exist"):
        export(stored, tmp_path / "missing" / "t.json")
    unwritable = Path("/sys") if os.geteuid() == 0 else tmp_path / "locked"  # root writes through mode bits
    if os.geteuid() != 0:
        unwritable.mkdir(mode=0o500)
    with pytest.raises(ExportPathError, match=r"Cannot write the export .*Permission denied"):
        export(stored, unwritable / "t.json")
    with contextlib.closing(open_store(stored.db)) as conn, pytest.raises(SessionNotFound):
        export_session(conn, "nope", "chrome", None, home=stored.home)
