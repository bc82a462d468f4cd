"""Commands on a live process (targets replaced, eval of dotted chains, watches, stop), the drop counter, and
fork, under every interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.instrument.pytracer.runner import (
    ENTER,
    PROGRAMS,
    RETURN,
    assert_clean,
    driven,
    interpreters,
    poll,
    run_program,
    targets,
)

STEPS, FLOOD, FORKS = PROGRAMS / "steps.py", PROGRAMS / "flood.py", PROGRAMS / "forks.py"


@pytest.fixture(params=interpreters())
def python(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_targets_eval_watches_and_stop_on_a_live_process(python: str, tmp_path: Path) -> None:
    beta, alpha = targets(STEPS, "beta", "alpha")
    with driven(python, STEPS, tmp_path, {"targets": [beta]}) as session:
        session.wait_line("one")  # beta(1) ran with only beta targeted
        reply = session.command({"cmd": "targets", "targets": [alpha]})
        assert reply["targets"] == 1 and reply["ok"] is True
        session.go()
        session.wait_line("two")  # beta(2) ran with only alpha targeted
        reply = session.command({"cmd": "eval", "exprs": [
            "__main__.settings.retries", "__main__.settings.timeout", "__main__.Settings.timeout", "os.sep",
            "__main__.settings.expensive", "__main__.settings.missing", "nowhere.x", "__main__.step(1)", "a..b",
        ]})
        values = dict(reply["values"])
        assert values["__main__.settings.retries"] == 3 and values["__main__.settings.timeout"] == 30
        assert values["__main__.Settings.timeout"] == 30 and values["os.sep"] == "/"
        assert values["__main__.settings.expensive"] == {
            "__error__": "`__main__.settings.expensive` is a property: not read (it would run code)"}
        assert values["__main__.settings.missing"] == {"__error__": "`__main__.settings` has no attribute `missing`"}
        assert "no loaded module named `nowhere`" in values["nowhere.x"]["__error__"]
        for invalid in ("__main__.step(1)", "a..b"):
            assert "not a dotted name" in values[invalid]["__error__"]
            assert "accepted: a dotted chain of identifiers" in values[invalid]["__error__"]
        reply = session.command({"cmd": "watches", "watches": [
            {"id": 1, "expr": "__main__.counter"}, {"id": 2, "expr": "__main__.settings.expensive"},
            {"id": 3, "expr": "not valid!"}]})
        assert [e[0] for e in reply["errors"]] == [3]
        session.command({"cmd": "targets", "targets": [beta, alpha]})
        session.go()
        session.wait_line("three")  # beta(3) -> alpha(3), both traced, with watches
        assert session.command({"cmd": "stop"}) == {"v": 1, "pid": reply["pid"], "reply": 1005, "stopped": True}
        session.go()
    run = session.run
    assert_clean(run)
    assert "property not run" in run.stdout and "uninstalled" in run.stdout
    beta_events, alpha_events = run.of(1), run.of(2)
    assert [e[6].get("args") for e in beta_events if e[0] == ENTER] == [[["n", 1]], [["n", 3]]]
    assert [e[6].get("args") for e in alpha_events if e[0] == ENTER] == [[["n", 2]], [["n", 3]]]
    alpha_2, alpha_3 = (e for e in alpha_events if e[0] == ENTER)
    beta_3 = [e for e in beta_events if e[0] == ENTER][1]
    assert alpha_2[5] == -1 and alpha_3[5] == beta_3[4]  # beta was not a target during step two
    assert "watches" not in alpha_2[6]
    assert beta_3[6]["watches"] == {"1": 3, "2": {
        "__error__": "`__main__.settings.expensive` is a property: not read (it would run code)"}}
    alpha_return = next(e for e in alpha_events if e[0] == RETURN and e[6]["enter"] == alpha_3[4])
    assert alpha_return[6]["watches"]["1"] == 6  # read again when alpha returned


def test_past_the_cap_events_are_dropped_and_counted(python: str, tmp_path: Path) -> None:
    config = {"targets": targets(FLOOD, "tick"), "max_buffered": 100, "flush_interval": 3600.0,
              "flush_at": 10**9}
    run = run_program(python, FLOOD, tmp_path, config)
    assert_clean(run)
    assert len(run.events()) == 100
    assert run.batches()[-1]["dropped"] == 2 * 5000 - 100
    assert run.report["stats"]["dropped"] == 2 * 5000 - 100


def test_a_forked_child_gets_its_own_helper_pid_and_tid(python: str, tmp_path: Path) -> None:
    run = run_program(python, FORKS, tmp_path, {"targets": targets(FORKS, "work")})
    assert run.returncode == 0 and run.stdout.strip() == "0", run.stderr
    pids = {b["pid"] for b in run.batches()}
    assert len(pids) == 2
    by_pid = {pid: [e for e in run.events(pid) if e[0] == ENTER] for pid in pids}
    child = next(pid for pid, events in by_pid.items() if any(e[6]["args"] == [["who", "child"]] for e in events))
    parent = (pids - {child}).pop()
    assert [e[6]["args"][0][1] for e in by_pid[child]] == ["child"]  # the parent's buffered events stay its own
    assert [e[6]["args"][0][1] for e in by_pid[parent]] == ["parent-before", "parent-after"]
    assert {e[3] for e in run.events(child)} == {child}
    child_threads = [t for b in run.batches() if b["pid"] == child for t in b["threads"]]
    assert child_threads == [[child, "MainThread"]]
    assert not [e for b in run.batches() for e in b["errors"]]


def test_the_helper_flushes_on_its_period_and_at_4096_events(python: str, tmp_path: Path) -> None:
    burst = PROGRAMS / "burst.py"
    with driven(python, burst, tmp_path / "period", {"targets": targets(burst, "tick")}) as session:
        session.wait_line("one")  # the program is blocked: only the helper's 10 ms period can send the call
        poll(lambda: len(session.run.events()) == 2, "the periodic flush")
        session.go()
        session.wait_line("burst")
        session.go()
    with driven(python, burst, tmp_path / "threshold",
                {"targets": targets(burst, "tick"), "flush_interval": 3600.0}) as session:
        session.wait_line("one")
        session.go()
        session.wait_line("burst")  # no period now: 4202 events buffered, the 4096th woke the helper
        poll(lambda: len(session.run.events()) >= 4096, "the flush at 4096 events")
        assert max(len(b["events"]) for b in session.run.batches()) <= 4096
        session.go()
    assert len(session.run.events()) == 2 + 2 * 2100
