"""Breakpoints over MCP on a C program built at test time (tests/targets/breaks.c): one thread stops at a
function whose condition holds, the other keeps printing, the pause is in the timeline with the arguments and the
backtrace, debug_list_sessions shows the paused thread, debug_continue lets it go on; hitCount; errors; stopping a
session while a thread is paused."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import StrobeClient, ToolError, poll

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SOURCE = Path(__file__).parents[1] / "targets" / "breaks.c"


def line_of(needle: str) -> int:
    text = SOURCE.read_text()
    return text[: text.index(needle)].count("\n") + 1


ENTRY = line_of("int process_order(")  # process_order's first line: its entry
LOOP_BODY = line_of("process_order(id, id * 50);")
ADD_LINE = line_of("acc->total = before + n;")


async def launch(strobe: StrobeClient, binary: Path, control: Path) -> str:
    launched = await strobe.call("debug_launch", command=str(binary), args=[str(control)], projectRoot=str(control))
    sid = str(launched["sessionId"])

    async def ready() -> bool | None:
        return True if "ready\n" in await stdout(strobe, sid) else None

    await poll(ready, 30, "the target to start its threads")
    return sid


async def stdout(strobe: StrobeClient, sid: str) -> list[str]:
    return [e["text"] for e in await strobe.all_events(sid, eventType="stdout")]


async def orders_done(strobe: StrobeClient, sid: str, why: str) -> None:
    async def done() -> bool | None:
        return True if "orders done\n" in await stdout(strobe, sid) else None

    await poll(done, 30, why)


async def paused(strobe: StrobeClient, sid: str, count: int = 1) -> list[dict[str, Any]]:
    """The session's paused threads once `count` pause events are stored and a thread is listed paused."""

    async def check() -> list[dict[str, Any]] | None:
        listed = await strobe.call("debug_list_sessions")
        session = next(s for s in listed["sessions"] if s["sessionId"] == sid)
        pauses = await strobe.all_events(sid, eventType="pause")
        return session["paused"] if session.get("paused") and len(pauses) >= count else None

    result: list[dict[str, Any]] = await poll(check, 30, f"{count} pause(s) in {sid}")
    return result


async def test_a_conditional_breakpoint_stops_one_thread_until_continued(
        strobe: StrobeClient, c_target: Callable[[str], Path], tmp_path: Path) -> None:
    sid = await launch(strobe, c_target("breaks"), tmp_path)
    answer = await strobe.call("debug_breakpoint", sessionId=sid,
                               add=[{"function": "process_order", "condition": "qty > 100"}])
    [bp] = answer["breakpoints"]
    assert bp["function"] == "process_order" and bp["condition"] == "qty > 100"
    assert bp["locations"][0]["file"].endswith("breaks.c") and bp["locations"][0]["line"] == ENTRY
    (tmp_path / "go").touch()

    [thread] = await paused(strobe, sid)
    assert (thread["function"], thread["threadName"], thread["breakpointId"]) == ("process_order", "w-orders", bp["id"])
    assert any("orders" in frame for frame in thread["backtrace"]), thread["backtrace"]
    [pause] = await strobe.all_events(sid, eventType="pause")
    assert pause["arguments"] == {"id": 3, "qty": 150}  # orders 1 and 2 (qty 50, 100) did not meet the condition
    assert pause["threadName"] == "w-orders" and pause["line"] == ENTRY and pause["hit"] == 1
    assert pause["registers"]["rdi"] == "0x3"
    printed = await stdout(strobe, sid)
    assert "order 2 qty 100 total 150\n" in printed and not any(t.startswith("order 3") for t in printed)

    ticks = sum(t.startswith("tick") for t in printed)

    async def steady_runs_on() -> bool | None:  # the other thread is not stopped
        return True if sum(t.startswith("tick") for t in await stdout(strobe, sid)) >= ticks + 20 else None

    await poll(steady_runs_on, 30, "w-steady to keep printing while w-orders is paused")
    assert not any(t.startswith("order 3") for t in await stdout(strobe, sid))  # still paused

    resumed = await strobe.call("debug_continue", sessionId=sid)
    assert resumed["resumed"] == [{"threadId": thread["threadId"], "breakpointId": bp["id"]}]
    await paused(strobe, sid, count=2)  # order 4 (qty 200) stops it again
    second = (await strobe.all_events(sid, eventType="pause"))[1]
    assert second["arguments"] == {"id": 4, "qty": 200} and second["hit"] == 2
    assert "order 3 qty 150 total 300\n" in await stdout(strobe, sid)

    await strobe.call("debug_breakpoint", sessionId=sid, remove=[bp["id"]])
    await strobe.call("debug_continue", sessionId=sid, threadId=thread["threadId"])

    await orders_done(strobe, sid, "the orders thread to finish once the breakpoint is removed")
    assert len(await strobe.all_events(sid, eventType="pause")) == 2
    (tmp_path / "quit").touch()
    await strobe.wait_for_status(sid, "exited", timeout=30)


async def test_a_line_breakpoint_shows_the_frames_locals(
        strobe: StrobeClient, c_target: Callable[[str], Path], tmp_path: Path) -> None:
    """At the line inside the loop of orders() the frame exists: the pause shows its locals (the loop's `id`), read
    through DWARF from the stack; the int3 stays armed for the next iteration (hitCount counts them)."""
    sid = await launch(strobe, c_target("breaks"), tmp_path)
    answer = await strobe.call("debug_breakpoint", sessionId=sid, add=[{"file": "breaks.c", "line": LOOP_BODY,
                                                                        "hitCount": 3}])
    [bp] = answer["breakpoints"]
    assert (bp["file"].endswith("tests/targets/breaks.c"), bp["line"]) == (True, LOOP_BODY)
    assert [loc["function"] for loc in bp["locations"]] == ["orders"]
    (tmp_path / "go").touch()
    [thread] = await paused(strobe, sid)
    assert (thread["function"], thread["line"], thread["threadName"]) == ("orders", LOOP_BODY, "w-orders")
    [pause] = await strobe.all_events(sid, eventType="pause")
    assert pause["hit"] == 3
    assert pause["locals"]["id"] == 3, pause["locals"]  # stopped before the third call
    assert sum(t.startswith("order ") for t in await stdout(strobe, sid)) == 2
    await strobe.call("debug_continue", sessionId=sid)

    await orders_done(strobe, sid, "the orders thread to finish after the third iteration's stop")
    assert sum(t.startswith("order ") for t in await stdout(strobe, sid)) == 5  # the int3 ran each instruction once
    (tmp_path / "quit").touch()
    await strobe.wait_for_status(sid, "exited", timeout=30)


def thread_state(pid: int, name: str) -> str | None:
    """The /proc state letter of the thread of `pid` named `name` ('t': stopped by a tracer), None if none."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if (task / "comm").read_text().strip() == name:
                return (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
    return None


async def test_all_threads_stops_the_other_threads_until_continued(
        strobe: StrobeClient, c_target: Callable[[str], Path], tmp_path: Path) -> None:
    """allThreads: w-orders stops at the breakpoint and w-steady (and main) are stopped with it: its ticks stop and
    its state is a tracer's stop; continuing lets both go on."""
    sid = await launch(strobe, c_target("breaks"), tmp_path)
    [bp] = (await strobe.call("debug_breakpoint", sessionId=sid, add=[
        {"function": "process_order", "condition": "id == 2", "allThreads": True}]))["breakpoints"]
    assert bp["allThreads"] is True
    (tmp_path / "go").touch()
    [thread] = await paused(strobe, sid)
    assert thread["otherThreads"] == {"stopped": 2}, thread  # main and w-steady; Frida's own threads run on
    pid = thread["pid"]

    async def steady_held() -> bool | None:
        return True if thread_state(pid, "w-steady") == "t" else None

    await poll(steady_held, 10, "w-steady to be stopped with the paused thread")
    ticks = sum(t.startswith("tick") for t in await stdout(strobe, sid))

    async def paused_a_while() -> bool | None:  # time passes with the program stopped: ~40 ticks' worth
        listed = await strobe.call("debug_list_sessions")
        [held] = next(s for s in listed["sessions"] if s["sessionId"] == sid)["paused"]
        return True if held["pausedMs"] >= 200 else None

    await poll(paused_a_while, 10, "the pause to last 200 ms")
    assert sum(t.startswith("tick") for t in await stdout(strobe, sid)) <= ticks + 1  # one may have been in flight
    assert thread_state(pid, "w-steady") == "t"

    # A step lets the others run while it runs and stops them again where it ends.
    # (waitMs: the step has all threads to release and stop again; on a busy machine 10 s did not always do)
    stepped = await strobe.call("debug_continue", sessionId=sid, action="step-over", waitMs=60_000)
    assert (stepped["status"], stepped.get("function"), stepped.get("otherThreads")) == (
        "paused", "process_order", {"stopped": 2}), stepped
    await poll(steady_held, 10, "w-steady to be stopped again at the step's end")

    await strobe.call("debug_continue", sessionId=sid)

    async def steady_runs_again() -> bool | None:
        return True if sum(t.startswith("tick") for t in await stdout(strobe, sid)) >= ticks + 10 else None

    await poll(steady_runs_again, 30, "w-steady to print again once continued")
    await orders_done(strobe, sid, "the orders thread to finish")
    assert thread_state(pid, "w-steady") != "t"
    (tmp_path / "quit").touch()
    await strobe.wait_for_status(sid, "exited", timeout=30)


async def test_hit_count_stops_at_the_nth_hit_only(
        strobe: StrobeClient, c_target: Callable[[str], Path], tmp_path: Path) -> None:
    sid = await launch(strobe, c_target("breaks"), tmp_path)
    await strobe.call("debug_breakpoint", sessionId=sid, add=[{"function": "process_order", "hitCount": 4}])
    (tmp_path / "go").touch()
    await paused(strobe, sid)
    [pause] = await strobe.all_events(sid, eventType="pause")
    assert pause["arguments"] == {"id": 4, "qty": 200} and pause["hit"] == 4
    await strobe.call("debug_continue", sessionId=sid)

    await orders_done(strobe, sid, "the orders thread to finish: the 5th hit does not stop")
    assert len(await strobe.all_events(sid, eventType="pause")) == 1
    (tmp_path / "quit").touch()
    await strobe.wait_for_status(sid, "exited", timeout=30)


async def test_bad_breakpoints_and_continues_say_why(
        strobe: StrobeClient, c_target: Callable[[str], Path], tmp_path: Path) -> None:
    sid = await launch(strobe, c_target("breaks"), tmp_path)
    cases: list[tuple[dict[str, Any], str]] = [
        ({"add": [{"function": "no_such_function"}]}, "matched no function"),
        ({"add": [{"file": "breaks.c", "line": line_of("static void *orders") - 1}]}, "has no code"),
        ({"add": [{"file": "nosuch.c", "line": 3}]}, "No source file named 'nosuch.c'"),
        ({"add": [{"file": "breaks.c", "line": ADD_LINE, "condition": "nn > 1"}]},
         "'nn' is not a parameter or local in scope at breaks.c:"),
        ({"add": [{"file": "breaks.c", "line": ADD_LINE, "condition": "acc->totl > 1"}]},
         "has no field 'totl'. Did you mean 'total'?"),
        ({"add": [{"file": "breaks.c", "line": ADD_LINE, "condition": "acc.total > 1"}]}, "use '->' instead of '.'"),
        ({"add": [{"function": "process_order", "condition": "g_account > 1"}]}, "name one of its fields"),
        ({"add": [{"function": "process_order", "condition": "qty >"}]}, "SyntaxError"),
        ({"remove": ["bp-99"]}, "No breakpoint bp-99"),
    ]
    for arguments, expected in cases:
        if expected == "SyntaxError":  # the agent compiles the condition: the breakpoint is not set, and says why
            answer = await strobe.call("debug_breakpoint", sessionId=sid, **arguments)
            assert answer["breakpoints"] == [] and expected in answer["warnings"][0], answer
            continue
        with pytest.raises(ToolError) as raised:
            await strobe.call("debug_breakpoint", sessionId=sid, **arguments)
        assert raised.value.code == "VALIDATION_ERROR" and expected in raised.value.message, raised.value.message
    with pytest.raises(ToolError) as raised:
        await strobe.call("debug_continue", sessionId=sid)
    assert "no thread is paused" in raised.value.message
    # The ENTRY line starts at process_order's entry, where tracing it put a hook's jump: the int3 is refused.
    await strobe.call("debug_trace", sessionId=sid, add=["process_order"])
    answer = await strobe.call("debug_breakpoint", sessionId=sid, add=[{"file": "breaks.c", "line": ENTRY}])
    assert answer["breakpoints"] == [] and "start of a traced function (process_order)" in answer["warnings"][0]
    await strobe.call("debug_trace", sessionId=sid, remove=["process_order"])
    [line_bp] = (await strobe.call("debug_breakpoint", sessionId=sid,
                                   add=[{"file": "breaks.c", "line": ENTRY}]))["breakpoints"]
    traced = await strobe.call("debug_trace", sessionId=sid, add=["process_order"])  # and the other way round
    assert traced["hookedFunctions"] == 0
    assert any("a line breakpoint is set at its first instruction" in w for w in traced["warnings"]), traced
    await strobe.call("debug_breakpoint", sessionId=sid, remove=[line_bp["id"]])
    assert "ready\n" in await stdout(strobe, sid)  # the target runs on
    (tmp_path / "quit").touch()
    (tmp_path / "go").touch()
    await strobe.wait_for_status(sid, "exited", timeout=30)


async def test_stopping_a_session_with_a_paused_thread_ends_the_process(
        strobe: StrobeClient, c_target: Callable[[str], Path], tmp_path: Path) -> None:
    binary = c_target("breaks")
    sid = await launch(strobe, binary, tmp_path)
    await strobe.call("debug_breakpoint", sessionId=sid, add=[{"function": "process_order"}])
    (tmp_path / "go").touch()
    await paused(strobe, sid)
    await strobe.call("debug_stop", sessionId=sid)
    assert subprocess.run(["pgrep", "-f", f"{binary} {tmp_path}"], capture_output=True).returncode == 1


async def test_logpoints_record_lines_without_stopping(
        strobe: StrobeClient, c_target: Callable[[str], Path], tmp_path: Path) -> None:
    sid = await launch(strobe, c_target("breaks"), tmp_path)
    answer = await strobe.call("debug_logpoint", sessionId=sid, add=[
        {"function": "process_order", "message": "order {id} qty={qty} double={qty * 2}", "condition": "qty > 100"},
        {"file": "breaks.c", "line": LOOP_BODY, "message": "loop body"},
        # At a line: its locals, a pointer's fields and C string, a global; pointers in hex.
        {"file": "breaks.c", "line": ADD_LINE, "message": "n={n} total={acc->total} owner={acc->owner} "
                                                          "len={acc->owner.length} g={g_total} at={acc}"},
        # At an entry: a pointer parameter followed, a global, a condition over both.
        {"function": "add_to", "message": "account {acc->id} +{n}", "condition": "acc->total >= 150 && g_total <= 500"},
    ])
    assert [lp["id"].startswith("lp-") for lp in answer["logpoints"]] == [True] * 4
    (tmp_path / "go").touch()

    await orders_done(strobe, sid, "the orders thread to run through its logpoints without stopping")

    async def logged() -> list[dict[str, Any]] | None:
        found = await strobe.all_events(sid, eventType="logpoint")
        return found if len(found) >= 8 else None

    lines = await poll(logged, 30, "the logpoint lines to be stored")
    texts = [e["text"] for e in lines]
    assert [t for t in texts if t.startswith("order")] == [
        "order 3 qty=150 double=300", "order 4 qty=200 double=400", "order 5 qty=250 double=500"]
    assert texts.count("loop body") == 5
    [address] = (await strobe.call("debug_read", sessionId=sid, targets=[{"variable": "g_account"}]))["results"]
    at = f"at=0x{int(address['address'], 16):x}"
    assert [t for t in texts if t.startswith("n=")] == [  # before each add: totals 0, 50, 150, 300, 500
        f"n={n} total={before} owner=ada len=3 g={before + n} {at}"
        for n, before in [(50, 0), (100, 50), (150, 150), (200, 300), (250, 500)]]
    assert [t for t in texts if t.startswith("account")] == ["account 7 +150", "account 7 +200"]
    assert all(e["threadName"] == "w-orders" for e in lines)
    assert {e["logpointId"] for e in lines} == {lp["id"] for lp in answer["logpoints"]}
    assert await strobe.all_events(sid, eventType="pause") == []
    (tmp_path / "quit").touch()
    await strobe.wait_for_status(sid, "exited", timeout=30)


async def test_conditions_read_locals_fields_and_globals_at_lines_and_entries(
        strobe: StrobeClient, c_target: Callable[[str], Path], tmp_path: Path) -> None:
    """A line's condition reads the frame's locals and what a pointer local points to; a function's reads a global;
    each stops only where it holds."""
    sid = await launch(strobe, c_target("breaks"), tmp_path)
    [at_line] = (await strobe.call("debug_breakpoint", sessionId=sid, add=[
        {"file": "breaks.c", "line": ADD_LINE, "condition": "n > 100 && acc->total >= 300 && acc->owner == 'ada'"},
    ]))["breakpoints"]
    assert at_line["condition"].startswith("n > 100") and at_line["locations"][0]["function"] == "add_to"
    (tmp_path / "go").touch()
    await paused(strobe, sid)
    [pause] = await strobe.all_events(sid, eventType="pause")
    assert (pause["line"], pause["locals"]["n"], pause["locals"]["before"]) == (ADD_LINE, 200, 300), pause["locals"]
    await strobe.call("debug_breakpoint", sessionId=sid, remove=[at_line["id"]])
    await strobe.call("debug_continue", sessionId=sid)
    await orders_done(strobe, sid, "the orders thread to finish")
    (tmp_path / "quit").touch()
    await strobe.wait_for_status(sid, "exited", timeout=30)

    control = tmp_path / "second"
    control.mkdir()
    sid = await launch(strobe, c_target("breaks"), control)
    await strobe.call("debug_breakpoint", sessionId=sid, add=[{"function": "process_order",
                                                                "condition": "g_total > 200 && g_account.id == 7"}])
    (control / "go").touch()
    await paused(strobe, sid)
    [pause] = await strobe.all_events(sid, eventType="pause")
    assert pause["arguments"] == {"id": 4, "qty": 200}  # g_total before orders 1-4: 0, 50, 150, 300
    await strobe.call("debug_stop", sessionId=sid)


async def test_breakpoints_and_traces_share_functions_and_threads(
        strobe: StrobeClient, c_target: Callable[[str], Path], tmp_path: Path) -> None:
    """A function breakpoint on a traced function and a line breakpoint inside another traced one both stop, with the
    traced calls leading up to the stop in the timeline before it; a trace added while the thread is paused records
    the paused thread's calls once it goes on."""
    sid = await launch(strobe, c_target("breaks"), tmp_path)
    traced = await strobe.call("debug_trace", sessionId=sid, add=["process_order"])
    assert traced["hookedFunctions"] == 1
    bps = (await strobe.call("debug_breakpoint", sessionId=sid, add=[
        {"function": "process_order", "hitCount": 2},  # the same entry as the trace's hook
    ]))["breakpoints"]
    (tmp_path / "go").touch()
    await paused(strobe, sid)
    [pause] = await strobe.all_events(sid, eventType="pause")
    assert pause["arguments"] == {"id": 2, "qty": 100}
    enters = [e for e in await strobe.all_events(sid, eventType="function_enter") if e["function"] == "process_order"]
    assert len(enters) == 2 and all(e["id"] < pause["id"] for e in enters[:1]), enters  # order 1 (and 2's enter)

    # While paused: trace add_to and break inside it (a line after its first bytes, where the trace's hook is).
    await strobe.call("debug_trace", sessionId=sid, add=["add_to"])
    inside = (await strobe.call("debug_breakpoint", sessionId=sid, add=[
        {"file": "breaks.c", "line": ADD_LINE, "condition": "n == 150"}]))["breakpoints"][-1]
    assert inside["file"].endswith("breaks.c")
    await strobe.call("debug_breakpoint", sessionId=sid, remove=[bps[0]["id"]])
    await strobe.call("debug_continue", sessionId=sid)
    await paused(strobe, sid, count=2)
    second = (await strobe.all_events(sid, eventType="pause"))[1]
    assert (second["function"], second["line"], second["locals"]["n"]) == ("add_to", ADD_LINE, 150), second
    adds = [e for e in await strobe.all_events(sid, eventType="function_enter", verbose=True)
            if e["function"] == "add_to"]
    assert [a["arguments"][1] for a in adds] == [100, 150], adds  # the paused thread's calls after the trace's add
    await strobe.call("debug_breakpoint", sessionId=sid, remove=[inside["id"]])
    await strobe.call("debug_continue", sessionId=sid)
    await orders_done(strobe, sid, "the orders thread to finish")
    exits = [e for e in await strobe.all_events(sid, eventType="function_exit") if e["function"] == "add_to"]
    assert len(exits) == 4, exits  # orders 2-5: each traced call returned through the hooks, the stopped one too
    (tmp_path / "quit").touch()
    await strobe.wait_for_status(sid, "exited", timeout=30)


async def test_writes_change_what_the_program_does(
        strobe: StrobeClient, c_target: Callable[[str], Path], tmp_path: Path) -> None:
    sid = await launch(strobe, c_target("breaks"), tmp_path)
    [by_name] = (await strobe.call("debug_write", sessionId=sid, targets=[{"variable": "g_total", "value": 1000}]))[
        "results"]
    assert (by_name["previousValue"], by_name["newValue"], by_name["type"]) == (0, 1000, "int")
    [raw] = (await strobe.call("debug_write", sessionId=sid, targets=[
        {"address": by_name["address"], "type": "i32", "value": "2000"}]))["results"]
    assert (raw["previousValue"], raw["newValue"]) == (1000, 2000)
    refused = (await strobe.call("debug_write", sessionId=sid, targets=[
        {"variable": "g_limit", "value": 1},  # const: in read-only memory
        {"variable": "g_total", "value": 1 << 40},  # does not fit an int
        {"variable": "g_total", "value": "many"},
        {"variable": "no_such_global", "value": 1},
    ]))["results"]
    assert "not writable" in refused[0]["error"], refused[0]
    assert "does not fit" in refused[1]["error"] and "not a number" in refused[2]["error"]
    assert "no_such_global" in refused[3]["error"]
    (tmp_path / "go").touch()

    async def first_order() -> str | None:
        return next((t for t in await stdout(strobe, sid) if t.startswith("order 1 ")), None)

    assert await poll(first_order, 30, "the first order") == "order 1 qty 50 total 2050\n"  # 2000 + 50
    (tmp_path / "quit").touch()
    await strobe.wait_for_status(sid, "exited", timeout=30)


async def launch_rounds(strobe: StrobeClient, binary: Path, control: Path) -> str:
    launched = await strobe.call("debug_launch", command=str(binary), args=[str(control)], projectRoot=str(control))
    sid = str(launched["sessionId"])

    async def ready() -> bool | None:
        return True if "ready\n" in await stdout(strobe, sid) else None

    await poll(ready, 30, f"{binary.name} to start")
    return sid


async def round_done(strobe: StrobeClient, sid: str) -> None:
    async def done() -> bool | None:
        return True if "round 1 done\n" in await stdout(strobe, sid) else None

    await poll(done, 30, "the round to finish once continued")


async def test_a_line_breakpoint_in_cpp(
        strobe: StrobeClient, cpp_target: Callable[[str], Path], tmp_path: Path) -> None:
    """The round loop's increment line: the thread stops there with the loop's `round` among its locals, a write to
    the namespaced global is read back, and continuing lets the round finish."""
    source = Path(__file__).parents[1] / "targets" / "memory_cpp.cpp"
    text = source.read_text()
    line = text[: text.index("audio::g_engine.voices += 1;")].count("\n") + 1
    sid = await launch_rounds(strobe, cpp_target("memory_cpp"), tmp_path)
    [bp] = (await strobe.call("debug_breakpoint", sessionId=sid,
                              add=[{"file": "memory_cpp.cpp", "line": line}]))["breakpoints"]
    (tmp_path / "round-1").touch()
    [thread] = await paused(strobe, sid)
    assert thread["line"] == line and thread["sourceFile"].endswith("memory_cpp.cpp"), thread
    [pause] = await strobe.all_events(sid, eventType="pause")
    assert pause["locals"]["round"] == 1, pause["locals"]
    assert "round 1 done\n" not in await stdout(strobe, sid)
    [written] = (await strobe.call("debug_write", sessionId=sid,
                                   targets=[{"variable": "audio::g_engine.voices", "value": 41}]))["results"]
    assert (written["previousValue"], written["newValue"]) == (8, 41), written
    await strobe.call("debug_breakpoint", sessionId=sid, remove=[bp["id"]])
    await strobe.call("debug_continue", sessionId=sid)
    await round_done(strobe, sid)
    read = await strobe.call("debug_read", sessionId=sid, targets=[{"variable": "audio::g_engine.voices"}])
    assert read["results"][0]["value"] == 42  # the write, then the line's += 1
    (tmp_path / "quit").touch()
    await strobe.wait_for_status(sid, "exited", timeout=30)


async def test_rust_stops_at_functions(
        strobe: StrobeClient, rust_target: Callable[[str], Path], tmp_path: Path) -> None:
    """A Rust function's entry stops the thread (an Interceptor hook); lines: tests/e2e/test_breakpoints_rust.py."""
    sid = await launch_rounds(strobe, rust_target("rust_memory"), tmp_path)
    await strobe.call("debug_breakpoint", sessionId=sid, add=[{"function": "core::sync::atomic::AtomicU64::fetch_add"}])
    (tmp_path / "round-1").touch()
    [thread] = await paused(strobe, sid)
    assert thread["function"] == "core::sync::atomic::AtomicU64::fetch_add", thread
    assert any("rust_memory::main" in frame for frame in thread["backtrace"]), thread["backtrace"]
    await strobe.call("debug_breakpoint", sessionId=sid, remove=["bp-1"])
    await strobe.call("debug_continue", sessionId=sid)
    await round_done(strobe, sid)
    (tmp_path / "quit").touch()
    await strobe.wait_for_status(sid, "exited", timeout=30)


async def test_a_staged_breakpoint_is_armed_before_the_first_instruction(
        strobe: StrobeClient, c_target: Callable[[str], Path], tmp_path: Path) -> None:
    """Staged without a sessionId, it is armed at launch: the orders thread, started at once (go exists), stops at
    its first order whose quantity passes the condition with no call made after the launch."""
    staged = await strobe.call("debug_breakpoint", projectRoot=str(tmp_path),
                               add=[{"function": "process_order", "condition": "qty > 100"},
                                    {"function": "no_such_function"}])
    assert staged["mode"] == "pending" and len(staged["breakpoints"]) == 2
    (tmp_path / "go").touch()
    launched = await strobe.call("debug_launch", command=str(c_target("breaks")), args=[str(tmp_path)],
                                 projectRoot=str(tmp_path))
    sid = str(launched["sessionId"])
    assert any("Staged breakpoint not set" in w and "no_such_function" in w for w in launched.get("warnings", [])), \
        launched
    await paused(strobe, sid)
    [pause] = await strobe.all_events(sid, eventType="pause")
    assert pause["arguments"] == {"id": 3, "qty": 150}
    removed = await strobe.call("debug_breakpoint", remove=[b["id"] for b in staged["breakpoints"]])
    assert removed["breakpoints"] == []  # unstaged: the next launch arms nothing
    await strobe.call("debug_stop", sessionId=sid)
