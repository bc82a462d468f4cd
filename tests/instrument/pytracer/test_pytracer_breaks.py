"""Breakpoints, logpoints and steps in the in-process tracer (breaks.py), on real interpreters: a thread stops alone
and goes on when told, conditions, hit counts, entry breakpoints, logpoint batches, each step kind, breakpoints on
traced functions, and what lets a paused thread go when the host cannot resume it any more."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.instrument.pytracer.runner import (
    ENTER,
    PROGRAMS,
    RETURN,
    Driven,
    assert_clean,
    driven,
    interpreters,
    marked_line,
    poll,
    targets,
    version_of,
)

PROGRAM = PROGRAMS / "breaks.py"
FILE = str(PROGRAM)


@pytest.fixture(params=interpreters())
def python(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def at(name: str, bid: str = "bp-1#0", program: Path = PROGRAM, **extra: Any) -> dict[str, Any]:
    """A line breakpoint at the line marked `# @name`."""
    return {"id": bid, "kind": "line", "file": str(program), "line": marked_line(program, name), **extra}


def entry(qualname: str, bid: str = "bp-1#0", **extra: Any) -> dict[str, Any]:
    target = targets(PROGRAM, qualname)[0]
    return {"id": bid, "kind": "entry", "file": FILE, "line": target["line"], "qualname": qualname, **extra}


def start(session: Driven, *specs: dict[str, Any]) -> None:
    """Set breakpoints once the program is ready, then let it run its scenario."""
    session.wait_line("ready")
    reply = session.command({"cmd": "breakpoints", "set": list(specs)})
    assert reply["ok"] is True and reply["failed"] == [], reply
    session.go()


def resume(session: Driven, pause: dict[str, Any], action: str = "continue") -> None:
    assert session.command({"cmd": "resume", "tid": pause["tid"], "action": action}).get("ok") is True


def where(pause: dict[str, Any]) -> tuple[str, int, str]:
    return pause["function"], pause["line"], pause["breakpoint"]


def scenario(name: str, **env: str) -> dict[str, str]:
    return {"STROBE_TEST_SCENARIO": name, **{f"STROBE_TEST_{k.upper()}": v for k, v in env.items()}}


def test_a_line_breakpoint_stops_one_thread_while_another_runs(python: str, tmp_path: Path) -> None:
    config = {"targets": targets(PROGRAM, "compute")}
    with driven(python, PROGRAM, tmp_path, config, scenario("threads")) as session:
        start(session, at("compute"))
        pause = session.pause(1)
        assert where(pause) == ("compute", marked_line(PROGRAM, "compute"), "bp-1#0")
        assert pause["file"] == FILE and pause["thread"] == "MainThread" and pause["hit"] == 1
        assert pause["entry"] is False and pause["step"] is None and pause["conditionError"] is None
        frames = pause["frames"]
        assert [f["function"] for f in frames[:3]] == ["compute", "handle", "<module>"]
        assert frames[0]["locals"] == {"order": 7, "qty": 70, "total": 140}
        assert frames[1]["locals"] == {"order": 7, "qty": 70}
        assert frames[1]["line"] == marked_line(PROGRAM, "handle-call") and frames[1]["file"] == FILE
        assert all(f["file"] != "<strobe-tracer>" for f in frames) and len(frames) <= 16

        def ticks() -> int:
            value: int = session.command({"cmd": "eval", "exprs": ["__main__.ticks"]})["values"][0][1]
            return value

        first = ticks()
        poll(lambda: ticks() >= first + 20, "the ticker thread's progress while the main thread is paused")
        assert "handled" not in session._stdout
        messages = session.run.messages()
        paused_at = next(i for i, m in enumerate(messages) if "pause" in m)
        enters = [i for i, m in enumerate(messages) for e in m.get("events", []) if e[0] == ENTER and e[1] == 1]
        assert enters and enters[0] < paused_at  # the traced call leading to the pause was sent before it
        resume(session, pause)
        session.wait_line("handled 141")
    run = session.run
    assert_clean(run)
    assert len(run.pauses()) == 1
    assert [(e[0], e[6].get("args"), e[6].get("return")) for e in run.of(1)] == [
        (ENTER, [["order", 7], ["qty", 70]], None), (RETURN, None, 141)]


def test_a_breakpoint_set_while_its_loop_runs_stops_that_thread(python: str, tmp_path: Path) -> None:
    with driven(python, PROGRAM, tmp_path, {}, scenario("running")) as session:
        session.wait_line("ready")
        session.go()
        session.wait_line("stop ticking")  # the ticker's loop is running, the main thread waits for go
        assert session.command({"cmd": "breakpoints", "set": [at("tick")]})["failed"] == []
        pause = session.pause(1)
        assert pause["thread"] == "ticker" and where(pause) == ("ticker", marked_line(PROGRAM, "tick"), "bp-1#0")
        resume(session, pause)
        second = session.pause(2)
        assert second["hit"] == 2 and second["tid"] == pause["tid"]
        reply = session.command({"cmd": "breakpoints", "remove": ["bp-1#0"]})
        assert reply == {"v": 1, "pid": reply["pid"], "reply": reply["reply"], "ok": True, "failed": []}
        resume(session, second)
        session.go()
        session.wait_line("ticked")
    assert_clean(session.run)
    assert len(session.run.pauses()) == 2


def test_condition_and_hit_count_stop_at_exactly_the_nth_hit_that_holds(python: str, tmp_path: Path) -> None:
    with driven(python, PROGRAM, tmp_path, {}, scenario("loop", loop="10")) as session:
        start(session, at("record", condition="i % 2 == 1", hitCount=3))
        pause = session.pause(1)
        assert pause["hit"] == 3 and pause["frames"][0]["locals"] == {"i": 5}
        resume(session, pause)
        session.wait_line("squares 285")
    assert_clean(session.run)
    assert len(session.run.pauses()) == 1


def test_a_condition_that_raises_stops_and_says_why(python: str, tmp_path: Path) -> None:
    with driven(python, PROGRAM, tmp_path, {}, scenario("threads")) as session:
        start(session, at("compute", condition="undefined_name > 1"))
        pause = session.pause(1)
        assert pause["conditionError"] == "NameError: name 'undefined_name' is not defined"
        assert pause["breakpoint"] == "bp-1#0" and pause["hit"] == 0
        resume(session, pause)
        session.wait_line("handled 141")
    assert_clean(session.run)


def test_an_entry_breakpoint_stops_before_the_first_line_with_the_arguments(python: str, tmp_path: Path) -> None:
    with driven(python, PROGRAM, tmp_path, {}, scenario("threads")) as session:
        start(session, entry("compute", condition="qty > 50"))
        pause = session.pause(1)
        assert pause["entry"] is True and pause["function"] == "compute" and pause["breakpoint"] == "bp-1#0"
        assert pause["line"] == targets(PROGRAM, "compute")[0]["line"]  # the def line, co_firstlineno
        assert pause["frames"][0]["locals"] == {"order": 7, "qty": 70}
        assert pause["frames"][1]["function"] == "handle"
        resume(session, pause, "over")
        first = session.pause(2)
        assert where(first) == ("compute", marked_line(PROGRAM, "compute-first"), "") and first["step"] == "over"
        resume(session, first)
        session.wait_line("handled 141")
    assert_clean(session.run)


def test_logpoints_send_their_lines_in_batches_without_stopping(python: str, tmp_path: Path) -> None:
    log = "i={i} sq={i * i!r} {{braces}} {'x' * 2} bad={missing}"
    with driven(python, PROGRAM, tmp_path, {}, scenario("loop", loop="300")) as session:
        start(session, at("record", log=log), at("record", "bp-2#0", log="odd {i}", condition="i % 2"))
        session.wait_line("squares 8955050")
    run = session.run
    assert_clean(run)
    assert run.pauses() == []
    messages = run.logpoints()
    lines = [line for m in messages for line in m["logpoints"]]
    assert len(messages) < len(lines) / 10 and all(m["dropped"] == 0 for m in messages)
    first = [line for line in lines if line["id"] == "bp-1#0"]
    assert [line["text"] for line in first[:2]] == [
        f"i={i} sq={i * i!r} {{braces}} xx bad=<error: NameError: name 'missing' is not defined>" for i in (0, 1)]
    assert len(first) == 300 and [line["text"] for line in lines if line["id"] == "bp-2#0"][:2] == ["odd 1", "odd 3"]
    main_tid = next(tid for tid, name in run.threads().items() if name == "MainThread") if run.threads() else None
    assert {line["thread"] for line in lines} == {"MainThread"}
    assert main_tid is None or {line["tid"] for line in lines} == {main_tid}
    stamps = [line["ts"] for line in first]
    assert stamps == sorted(stamps)


def test_logpoint_lines_past_the_cap_are_counted_as_dropped(python: str, tmp_path: Path) -> None:
    config = {"max_logpoints": 50, "flush_interval": 3600.0}
    with driven(python, PROGRAM, tmp_path, config, scenario("loop", loop="200")) as session:
        start(session, at("record", log="{i}"))
        session.wait_line("squares 2646700")
    messages = session.run.logpoints()
    assert [line["text"] for m in messages for line in m["logpoints"]] == [str(i) for i in range(50)]
    assert messages[-1]["dropped"] == 150


def test_step_over_a_call_a_recursion_and_a_return(python: str, tmp_path: Path) -> None:
    with driven(python, PROGRAM, tmp_path, {}, scenario("steps")) as session:
        start(session, at("middle-call"), at("fact-rec", "bp-2#0", condition="n == 3"))
        pause = session.pause(1)
        resume(session, pause, "over")  # leaf(1) runs without stopping
        after = session.pause(2)
        assert where(after) == ("middle", marked_line(PROGRAM, "middle-after"), "") and after["step"] == "over"
        assert after["frames"][0]["locals"] == {"x": 1, "a": 4} and after["tid"] == pause["tid"]
        resume(session, after)
        rec = session.pause(3)
        assert where(rec) == ("fact", marked_line(PROGRAM, "fact-rec"), "bp-2#0")
        resume(session, rec, "over")  # the deeper fact() frames run the same lines without stopping
        ret = session.pause(4)
        assert where(ret) == ("fact", marked_line(PROGRAM, "fact-return"), "")
        assert ret["frames"][0]["locals"] == {"n": 3, "r": 6} and ret["frames"][1]["function"] == "<module>"
        resume(session, ret, "over")  # fact(3) returns: the next line of its caller
        caller = session.pause(5)
        assert where(caller) == ("<module>", marked_line(PROGRAM, "module-outer"), "")
        resume(session, caller)
        session.wait_line("steps 5 6 6")
    assert_clean(session.run)
    assert len(session.run.pauses()) == 5


def test_a_breakpoint_reached_during_a_step_ends_it_there(python: str, tmp_path: Path) -> None:
    with driven(python, PROGRAM, tmp_path, {}, scenario("steps")) as session:
        start(session, at("middle-call"), at("leaf", "bp-2#0"))
        resume(session, session.pause(1), "over")
        inside = session.pause(2)
        assert where(inside) == ("leaf", marked_line(PROGRAM, "leaf"), "bp-2#0") and inside["step"] == "over"
        resume(session, inside)  # the step ended: nothing more stops
        session.wait_line("steps 5 6 6")
    assert len(session.run.pauses()) == 2


def test_step_into_a_call_a_return_a_recursion_never_strobe(python: str, tmp_path: Path) -> None:
    with driven(python, PROGRAM, tmp_path, {}, scenario("steps")) as session:
        start(session, at("middle-call"), at("fact-rec", "bp-2#0", condition="n == 3"),
              at("module-flush", "bp-3#0"))
        resume(session, session.pause(1), "into")
        inside = session.pause(2)
        assert where(inside) == ("leaf", marked_line(PROGRAM, "leaf"), "") and inside["step"] == "into"
        assert inside["frames"][0]["locals"] == {"x": 1} and inside["frames"][1]["function"] == "middle"
        resume(session, inside, "into")
        resume(session, session.pause(3), "into")  # from leaf's return line: back in middle
        back = session.pause(4)
        assert where(back) == ("middle", marked_line(PROGRAM, "middle-after"), "")
        resume(session, back)
        rec = session.pause(5)
        resume(session, rec, "into")
        deeper = session.pause(6)
        assert where(deeper) == ("fact", marked_line(PROGRAM, "fact-first"), "")
        assert deeper["frames"][0]["locals"] == {"n": 2} and deeper["frames"][1]["locals"] == {"n": 3}
        resume(session, deeper)
        flush = session.pause(7)
        resume(session, flush, "into")
        called = session.pause(8)
        assert where(called) == ("flush_tracer", marked_line(PROGRAM, "flush-call"), "")
        resume(session, called, "into")  # the tracer's own flush() is no stop
        after = session.pause(9)
        assert where(after) == ("<module>", marked_line(PROGRAM, "module-print"), "")
        resume(session, after)
        session.wait_line("steps 5 6 6")
    assert_clean(session.run)


def test_step_out_to_the_caller_and_out_of_a_recursion(python: str, tmp_path: Path) -> None:
    with driven(python, PROGRAM, tmp_path, {}, scenario("steps")) as session:
        start(session, at("leaf"), at("fact-first", "bp-2#0", condition="n == 1"))
        resume(session, session.pause(1), "out")
        back = session.pause(2)
        assert where(back) == ("middle", marked_line(PROGRAM, "middle-after"), "") and back["step"] == "out"
        assert back["frames"][0]["locals"] == {"x": 1, "a": 4}
        resume(session, back)
        bottom = session.pause(3)
        assert bottom["frames"][0]["locals"] == {"n": 1}
        resume(session, bottom, "out")
        up = session.pause(4)
        assert where(up) == ("fact", marked_line(PROGRAM, "fact-return"), "")
        assert up["frames"][0]["locals"] == {"n": 2, "r": 2}
        resume(session, up, "out")
        top = session.pause(5)
        assert where(top) == ("fact", marked_line(PROGRAM, "fact-return"), "")
        assert top["frames"][0]["locals"] == {"n": 3, "r": 6}
        resume(session, top)
        session.wait_line("steps 5 6 6")
    assert_clean(session.run)


def test_other_threads_running_the_stepped_lines_do_not_stop(python: str, tmp_path: Path) -> None:
    with driven(python, PROGRAM, tmp_path, {}, scenario("other")) as session:
        start(session, at("shared-go", condition="role == 'main'"))
        pause = session.pause(1)
        resume(session, pause, "over")
        waiting = session.pause(2)
        assert where(waiting) == ("shared", marked_line(PROGRAM, "shared-wait"), "")
        resume(session, waiting, "over")  # the other thread runs shared() while this step waits for it
        done = session.pause(3)
        assert where(done) == ("shared", marked_line(PROGRAM, "shared-value"), "") and done["tid"] == pause["tid"]
        session.wait_line("other OTHER")
        resume(session, done)
        session.wait_line("main MAIN")
    assert_clean(session.run)
    assert len(session.run.pauses()) == 3


def test_a_breakpoint_in_a_traced_nested_function(python: str, tmp_path: Path) -> None:
    config = {"targets": targets(PROGRAM, "outer.<locals>.inner")}
    with driven(python, PROGRAM, tmp_path, config, scenario("steps")) as session:
        start(session, at("inner"), entry("outer.<locals>.inner", "bp-2#0"))
        first = session.pause(1)
        assert first["entry"] is True and first["breakpoint"] == "bp-2#0"
        resume(session, first)
        line = session.pause(2)
        assert where(line) == ("outer.<locals>.inner", marked_line(PROGRAM, "inner"), "bp-1#0")
        assert line["frames"][0]["locals"] == {"v": 2}
        resume(session, line)
        session.wait_line("steps 5 6 6")
    run = session.run
    assert_clean(run)
    assert [(e[0], e[6].get("args"), e[6].get("return")) for e in run.of(1)] == [
        (ENTER, [["v", 2]], None), (RETURN, None, 6)]


def test_breakpoints_in_a_module_imported_later(python: str, tmp_path: Path) -> None:
    later = PROGRAMS / "breaks_later.py"
    with driven(python, PROGRAM, tmp_path, {}, scenario("import")) as session:
        start(session, at("later-module", program=later), at("triple", "bp-2#0", program=later))
        module = session.pause(1)
        assert where(module) == ("<module>", marked_line(later, "later-module"), "bp-1#0")
        assert module["file"] == str(later) and module["frames"][0]["locals"]["triple"] == "<function triple>"
        resume(session, module)
        inside = session.pause(2)
        assert where(inside) == ("triple", marked_line(later, "triple"), "bp-2#0")
        assert inside["frames"][0]["locals"] == {"v": 2}
        resume(session, inside)
        session.wait_line("imported 6")
    assert_clean(session.run)


@pytest.mark.parametrize("how", ["stop", "close"])
def test_stop_or_the_host_going_away_lets_a_paused_thread_go_on(python: str, tmp_path: Path, how: str) -> None:
    with driven(python, PROGRAM, tmp_path, {}, scenario("threads")) as session:
        start(session, at("compute"))
        session.pause(1)
        if how == "stop":
            assert session.command({"cmd": "stop"})["stopped"] is True
        else:
            session.close_control()
        session.wait_line("handled 141")
    assert_clean(session.run)
    assert len(session.run.pauses()) == 1


def test_a_forked_child_never_stops_but_logs(python: str, tmp_path: Path) -> None:
    with driven(python, PROGRAM, tmp_path, {}, scenario("fork")) as session:
        start(session, at("record"), at("record", "bp-2#0", log="i={i}"))
        pause = session.pause(1)  # the parent's record(2), once the child has run record(1) and exited
        assert pause["frames"][0]["locals"] == {"i": 2}
        resume(session, pause)
        session.wait_line("child 0 parent 4")
    run = session.run
    assert len(run.pauses()) == 1
    lines = {(m["pid"], line["text"]) for m in run.logpoints() for line in m["logpoints"]}
    parent = next(m["pid"] for m in run.messages() if "pause" in m)
    assert {text for pid, text in lines if pid == parent} == {"i=2"}
    assert {text for pid, text in lines if pid != parent} == {"i=1"}


def test_a_step_that_cannot_end_is_dropped_with_its_thread(python: str, tmp_path: Path) -> None:
    if version_of(python) < (3, 12):
        pytest.skip("3.11 traces only the threads started through threading after install")
    with driven(python, PROGRAM, tmp_path, {}, scenario("lonely")) as session:
        start(session, at("lonely-last"))
        resume(session, session.pause(1), "over")  # its frame returns to no Python caller, its thread ends
        session.wait_line("finished")
        poll(lambda: session.command({"cmd": "eval", "exprs": ["_strobe_tracer._installed.breaks.steps"]})[
            "values"][0][1] == {}, "the step of the ended thread dropped")
        session.go()
    assert_clean(session.run)
    assert len(session.run.pauses()) == 1


def test_bad_breakpoints_are_refused_with_why_and_resume_says_who_is_paused(python: str, tmp_path: Path) -> None:
    with driven(python, PROGRAM, tmp_path, {}, scenario("threads")) as session:
        session.wait_line("ready")
        reply = session.command({"cmd": "breakpoints", "set": [
            at("compute", "bad-1", condition="qty >"), at("compute", "bad-2", log="total {"),
            at("compute", "bad-3", log="{x!z}"), {"id": "bad-4", "kind": "line", "file": "app.py", "line": 3},
            at("compute", "good", condition="qty > 1"),
        ]})
        assert reply["ok"] is True
        errors = {f["id"]: f["error"] for f in reply["failed"]}
        assert set(errors) == {"bad-1", "bad-2", "bad-3", "bad-4"}
        assert errors["bad-1"].startswith("condition 'qty >' is not a Python expression: invalid syntax")
        assert "never closed" in errors["bad-2"] and "conversion" in errors["bad-3"]
        assert "absolute path" in errors["bad-4"]
        assert session.command({"cmd": "resume", "tid": 1, "action": "continue"})["error"] == (
            "thread 1 is not paused; paused: []")
        session.go()
        pause = session.pause(1)
        assert pause["breakpoint"] == "good"
        assert session.command({"cmd": "resume", "tid": pause["tid"], "action": "sideways"})["error"].startswith(
            "action must be one of continue, over, into, out")
        assert session.command({"cmd": "resume", "tid": 1})["error"] == (
            f"thread 1 is not paused; paused: [{pause['tid']}]")
        resume(session, pause)
        session.wait_line("handled 141")
    assert_clean(session.run)


def test_a_paused_frames_locals_are_read_and_written(python: str, tmp_path: Path) -> None:
    """`eval` with a thread and frame reads a paused frame's names (locals, then its globals, attributes read
    statically); `set` writes a local, and the program goes on with the new value."""
    with driven(python, PROGRAM, tmp_path, {}, scenario("threads")) as session:
        start(session, at("compute"))
        pause = session.pause(1)
        tid = pause["tid"]
        read = session.command({"cmd": "eval", "tid": tid, "frame": 0, "exprs": ["total", "order", "ticking"]})
        assert read["values"] == [["total", 140], ["order", 7], ["ticking", True]], read
        assert session.command({"cmd": "eval", "tid": tid, "frame": 1, "exprs": ["qty"]})["values"] == [["qty", 70]]
        missing = session.command({"cmd": "eval", "tid": tid, "frame": 0, "exprs": ["nosuch"]})["values"][0][1]
        assert "not a local or global of compute" in missing["__error__"], missing
        assert "not one of" in session.command({"cmd": "eval", "tid": tid, "frame": 99, "exprs": ["x"]})["error"]
        written = session.command({"cmd": "set", "tid": tid, "frame": 0, "local": "total", "value": 1000})
        assert (written["previous"], written["value"]) == (140, 1000), written
        refused = session.command({"cmd": "set", "tid": tid, "frame": 0, "local": "nosuch", "value": 1})
        assert "is not a local of compute" in refused["error"], refused
        resume(session, pause)
        session.wait_line("handled 1001")  # subtotal = total + 1, from the written total
    assert_clean(session.run)
