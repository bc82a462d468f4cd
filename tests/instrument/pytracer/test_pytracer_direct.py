"""The tracer's Python API without a control pipe (Tracer.command), failures reported under "errors" in the next
batch instead of raised, and on 3.12+ the report when every sys.monitoring tool id is already taken."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.instrument.pytracer.runner import ENTER, PROGRAMS, RETURN, driven, interpreters, run_program, version_of

PROGRAM = PROGRAMS / "direct.py"


@pytest.fixture(params=interpreters())
def python(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_commands_replies_and_errors(python: str, tmp_path: Path) -> None:
    run = run_program(python, PROGRAM, tmp_path, {})
    assert run.returncode == 0, run.stderr
    assert run.reply(1) == {"v": 1, "pid": run.reply(1)["pid"], "reply": 1, "targets": 1,  # type: ignore[index]
                            "backend": run.report["stats"]["backend"], "ok": True}
    assert [(e[0], e[6].get("args"), e[6].get("return")) for e in run.of(5)][:2] == [
        (ENTER, [["x", 1]], None), (RETURN, None, 1)]
    errors = [e for b in run.batches() for e in b["errors"]]
    assert {"where": "command", "error": "ValueError: depth must be an integer from 0 to 10, not 11",
            "count": 1} in errors
    assert run.reply(2)["error"] == (  # type: ignore[index]
        "unknown command 'bogus': one of targets, depth, watches, eval, flush, breakpoints, resume, set, stop")
    assert "needs id (int), file (str), line (int), qualname (str)" in run.reply(3)["error"]  # type: ignore[index]
    messages = run.messages()
    flushed = next(i for i, m in enumerate(messages) if m.get("reply") == 4)
    assert messages[flushed]["flushed"] is True
    assert any(e[1] == 5 for m in messages[:flushed] for e in m.get("events", []))  # flushed before the reply

    if version_of(python) < (3, 12):
        return
    assert run.reply(5)["stopped"] is True  # type: ignore[index]
    sent = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    install_errors = [e for m in sent for e in m.get("errors", []) if e["where"] == "install"]
    assert len(install_errors) == 1
    assert install_errors[0]["error"].startswith("sys.monitoring: every tool id is in use (0: someone else")
    reply = next(m for m in sent if m.get("reply") == 6)
    assert reply["error"].startswith("sys.monitoring: every tool id is in use") and "ok" not in reply
    assert not [e for m in sent for e in m.get("events", [])]


@pytest.mark.parametrize("bad", ["not json", '["a list"]', '{"cmd": "eval", "id": 9, "exprs": "x"}'])
def test_bad_command_lines_are_reported_not_raised(python: str, tmp_path: Path, bad: str) -> None:
    with driven(python, PROGRAMS / "idle.py", tmp_path, {}) as session:
        session.wait_line("ready")
        session.send_raw(bad + "\n")
        assert session.command({"cmd": "flush"})["flushed"] is True  # read after the bad line
        session.go()
    run = session.run
    assert run.returncode == 0, run.stderr
    errors = [e for b in run.batches() for e in b["errors"]]
    if bad == "not json":
        assert [e["where"] for e in errors] == ["command"] and "not a JSON command" in errors[0]["error"]
    elif bad.startswith("["):
        assert [e["where"] for e in errors] == ["command"] and "unknown command" in errors[0]["error"]
    else:
        assert not errors
        assert run.reply(9) == {"v": 1, "pid": run.reply(9)["pid"], "reply": 9,  # type: ignore[index]
                                "error": "exprs must be a list of at most 100 dotted names"}
