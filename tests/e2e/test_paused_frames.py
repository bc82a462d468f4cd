"""Inspecting a paused thread's frames over MCP, on C, C++ and Rust programs built at test time (call chains of
three functions with locals: tests/targets/frames.c, frames_cpp.cpp, rust_frames): the pause event carries each
frame's locals; debug_read reads a local of the innermost frame by its bare name and a caller's with `frame`;
debug_write changes a local of a paused frame and the program prints the changed result once continued; what
cannot be read says why."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import StrobeClient, ToolError, poll

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

TARGETS = Path(__file__).parents[1] / "targets"


def line_of(source: Path, needle: str) -> int:
    text = source.read_text()
    return text[: text.index(needle)].count("\n") + 1


async def launch(strobe: StrobeClient, binary: Path, control: Path) -> str:
    launched = await strobe.call("debug_launch", command=str(binary), args=[str(control)], projectRoot=str(control))
    sid = str(launched["sessionId"])
    await printed(strobe, sid, "ready\n", f"{binary.name} to start")
    return sid


async def stdout(strobe: StrobeClient, sid: str) -> list[str]:
    return [e["text"] for e in await strobe.all_events(sid, eventType="stdout")]


async def printed(strobe: StrobeClient, sid: str, line: str, why: str) -> None:
    async def check() -> bool | None:
        return True if line in await stdout(strobe, sid) else None

    await poll(check, 30, why)


async def pause_event(strobe: StrobeClient, sid: str) -> dict[str, Any]:
    """The session's one pause event, once it is stored and its thread listed as paused."""

    async def check() -> dict[str, Any] | None:
        listed = await strobe.call("debug_list_sessions")
        session = next(s for s in listed["sessions"] if s["sessionId"] == sid)
        pauses = await strobe.all_events(sid, eventType="pause")
        return pauses[0] if session.get("paused") and pauses else None

    event: dict[str, Any] = await poll(check, 30, f"a pause in {sid}")
    return event


def frame_named(event: dict[str, Any], function: str) -> tuple[int, dict[str, Any]]:
    found = [(i, f) for i, f in enumerate(event["backtrace"]) if f.get("function") == function]
    assert found, [f.get("function") for f in event["backtrace"]]
    return found[0]


async def read(strobe: StrobeClient, sid: str, **target: Any) -> dict[str, Any]:
    [result] = (await strobe.call("debug_read", sessionId=sid, targets=[target]))["results"]
    return dict(result)


async def write(strobe: StrobeClient, sid: str, value: Any, **target: Any) -> dict[str, Any]:
    [result] = (await strobe.call("debug_write", sessionId=sid, targets=[{**target, "value": value}]))["results"]
    return dict(result)


async def finish(strobe: StrobeClient, sid: str, control: Path) -> None:
    (control / "quit").touch()
    await strobe.wait_for_status(sid, "exited", timeout=30)


C_SOURCE = TARGETS / "frames.c"


async def test_c_locals_of_every_frame_read_and_written(
        strobe: StrobeClient, c_target: Callable[[str], Path], tmp_path: Path) -> None:
    """Stopped at apply_discount's return line: the event shows the locals of apply_discount, price_cart and
    checkout (each read through its own frame); debug_read reads the innermost frame's by name and the callers'
    with `frame`; writing `discounted` (frame 0) and `order_id` (frame 2) changes what checkout prints."""
    sid = await launch(strobe, c_target("frames"), tmp_path)
    line = line_of(C_SOURCE, "return discounted;")
    await strobe.call("debug_breakpoint", sessionId=sid, add=[{"file": "frames.c", "line": line}])
    (tmp_path / "go").touch()
    event = await pause_event(strobe, sid)

    assert event["line"] == line and event["function"] == "apply_discount"
    inner = {"subtotal": 120, "percent": 10, "discount": 12, "discounted": 108}
    assert event["locals"] == inner and event["backtrace"][0]["locals"] == inner
    price, price_frame = frame_named(event, "price_cart")
    assert price == 1
    assert {k: price_frame["locals"][k] for k in ("count", "subtotal", "percent")} == {
        "count": 3, "subtotal": 120, "percent": 10}
    assert "i" not in price_frame["locals"]  # the loop's block does not hold the call: its `i` is out of scope
    checkout, checkout_frame = frame_named(event, "checkout")
    assert checkout == 2 and checkout_frame["locals"]["order_id"] == 7 and checkout_frame["locals"]["count"] == 3
    assert [item["price"] for item in checkout_frame["locals"]["items"]] == [10, 25, 40]
    assert "localsNotCaptured" in event["backtrace"][-1], event["backtrace"][-1]  # libc: no debug info

    bare = await read(strobe, sid, variable="discount")
    assert (bare["value"], bare["frame"], bare["function"], bare["type"]) == (12, 0, "apply_discount", "int")
    subtotal = await read(strobe, sid, variable="subtotal", frame=price)
    assert (subtotal["value"], subtotal["frame"], subtotal["function"]) == (120, 1, "price_cart")
    third = await read(strobe, sid, variable="items[2].price", frame=checkout)
    assert third["value"] == 40
    array = await read(strobe, sid, variable="items", frame=checkout)
    assert price_frame["locals"]["items"] == array["address"]  # price_cart's pointer is checkout's array
    through = await read(strobe, sid, variable="items->qty", frame=price)  # price_cart's pointer, followed
    assert through["value"] == 3

    written = await write(strobe, sid, 100, variable="discounted")
    assert (written["previousValue"], written["newValue"], written["frame"]) == (108, 100, 0)
    renamed = await write(strobe, sid, 9, variable="order_id", frame=checkout)
    assert (renamed["previousValue"], renamed["newValue"], renamed["function"]) == (7, 9, "checkout")
    assert (await read(strobe, sid, variable="order_id", frame=checkout))["value"] == 9
    await strobe.call("debug_continue", sessionId=sid)
    await printed(strobe, sid, "order 9 total 100\n", "checkout to print the written values")
    await finish(strobe, sid, tmp_path)


CPP_SOURCE = TARGETS / "frames_cpp.cpp"


async def test_cpp_a_method_its_caller_and_main(
        strobe: StrobeClient, cpp_target: Callable[[str], Path], tmp_path: Path) -> None:
    """Stopped in Till::add_tax: `this` and the method's locals, total_of's reference and pointer parameters and
    locals, main's; a write to `gross` in the method changes what main prints."""
    sid = await launch(strobe, cpp_target("frames_cpp"), tmp_path)
    line = line_of(CPP_SOURCE, "return gross;")
    await strobe.call("debug_breakpoint", sessionId=sid, add=[{"file": "frames_cpp.cpp", "line": line}])
    (tmp_path / "go").touch()
    event = await pause_event(strobe, sid)

    assert event["function"] == "shop::Till::add_tax"
    method = event["backtrace"][0]["locals"]
    assert {k: method[k] for k in ("net", "tax", "gross")} == {"net": 70, "tax": 5, "gross": 75}
    assert str(method["this"]).startswith("0x")
    total, total_frame = frame_named(event, "shop::total_of")
    assert (total_frame["locals"]["n"], total_frame["locals"]["net"]) == (2, 70)
    main, main_frame = frame_named(event, "main")
    assert main_frame["locals"]["argc"] == 2 and main_frame["locals"]["lines"] == [
        {"price": 10, "qty": 3}, {"price": 20, "qty": 2}]

    assert (await read(strobe, sid, variable="this->tax_percent"))["value"] == 8
    assert (await read(strobe, sid, variable="till.tax_percent", frame=total))["value"] == 8  # through a reference
    assert (await read(strobe, sid, variable="lines[1].price", frame=total))["value"] == 20
    assert (await read(strobe, sid, variable="till", frame=main))["fields"]["tax_percent"]["value"] == 8

    written = await write(strobe, sid, 500, variable="gross")
    assert (written["previousValue"], written["newValue"]) == (75, 500)
    await strobe.call("debug_continue", sessionId=sid)
    await printed(strobe, sid, "gross 500\n", "main to print the written gross")
    await finish(strobe, sid, tmp_path)


async def test_rust_callers_of_a_function_breakpoint(
        strobe: StrobeClient, rust_target: Callable[[str], Path], tmp_path: Path) -> None:
    """Rust debug builds keep no frame pointer (their frame base is rsp): stopped at scale's entry (Rust lines
    cannot be broken at), scale's own frame does not exist yet and says so, and its callers' frames, unwound through
    the call frame information, show weigh's and run's locals; writing weigh's `extra` (a `let mut`, whose slot is
    its storage) changes the printed result."""
    sid = await launch(strobe, rust_target("rust_frames"), tmp_path)
    await strobe.call("debug_breakpoint", sessionId=sid, add=[{"function": "rust_frames::scale"}])
    (tmp_path / "go").touch()
    event = await pause_event(strobe, sid)

    assert event["function"] == "rust_frames::scale" and event["arguments"] == {"value": 10, "factor": 3}
    assert "frame is not set up yet" in event["backtrace"][0]["localsNotCaptured"]
    weigh, weigh_frame = frame_named(event, "rust_frames::weigh")
    assert weigh == 1
    assert (weigh_frame["locals"]["base"], weigh_frame["locals"]["bonus"], weigh_frame["locals"]["extra"]) == (
        10, 7, 7)
    run, run_frame = frame_named(event, "rust_frames::run")
    assert (run_frame["locals"]["round"], run_frame["locals"]["base"]) == (1, 10)

    assert (await read(strobe, sid, variable="base", frame=run))["value"] == 10
    refused = await read(strobe, sid, variable="value")  # scale's parameter: in a register at its entry
    assert "stopped at its entry" in refused["error"] and "frame: 1" in refused["error"], refused
    written = await write(strobe, sid, 100, variable="extra", frame=weigh)
    assert (written["previousValue"], written["newValue"], written["function"]) == (7, 100, "rust_frames::weigh")
    assert "`let mut` binding's slot is its storage" in written["warning"]
    await strobe.call("debug_breakpoint", sessionId=sid, remove=["bp-1"])
    await strobe.call("debug_continue", sessionId=sid)
    await printed(strobe, sid, "round 1 result 130\n", "run to print the written result")
    await finish(strobe, sid, tmp_path)


async def test_c_function_entry_and_what_cannot_be_read(
        strobe: StrobeClient, c_target: Callable[[str], Path], tmp_path: Path) -> None:
    """Stopped at apply_discount's entry its own frame is not set up: a bare `subtotal` says so and where to read
    it, the caller's `subtotal` is read with frame 1; unknown names, frames and threads, polls of a local and locals
    once the thread went on are refused with what to do instead."""
    sid = await launch(strobe, c_target("frames"), tmp_path)
    refused = await read(strobe, sid, variable="subtotal", frame=0)
    assert "No thread is paused" in refused["error"], refused
    await strobe.call("debug_breakpoint", sessionId=sid, add=[{"function": "apply_discount"}])
    (tmp_path / "go").touch()
    event = await pause_event(strobe, sid)
    assert event["arguments"] == {"subtotal": 120, "percent": 10}
    assert "frame is not set up yet" in event["backtrace"][0]["localsNotCaptured"]
    assert "locals" not in event  # the innermost frame has none of its own yet
    assert event["backtrace"][1]["function"] == "price_cart" and event["backtrace"][1]["locals"]["subtotal"] == 120
    thread = event["threadId"]

    bare = await read(strobe, sid, variable="subtotal")
    assert "parameter of frame 0 (apply_discount)" in bare["error"] and "stopped at its entry" in bare["error"]
    assert (await read(strobe, sid, variable="subtotal", frame=1, threadId=thread))["value"] == 120
    unknown = await read(strobe, sid, variable="subtotl", frame=1)
    assert "Did you mean 'subtotal'" in unknown["error"] and "Its variables: items, count" in unknown["error"]
    assert f"has {len(event['backtrace'])} frames" in (await read(strobe, sid, variable="x", frame=40))["error"]
    # Frida's backtrace repeats price_cart at a hook; the stack's chain replaces the repeat with the real callers.
    assert [f.get("function") for f in event["backtrace"][:4]] == ["apply_discount", "price_cart", "checkout", "main"]
    assert event["backtrace"][2]["unwound"] is True and event["backtrace"][2]["locals"]["order_id"] == 7
    assert "is not paused" in (await read(strobe, sid, variable="count", frame=1, threadId=1))["error"]
    too_big = await write(strobe, sid, 1 << 40, variable="count", frame=1)
    assert "does not fit" in too_big["error"] and too_big["frame"] == 1
    with pytest.raises(ToolError) as raised:
        await strobe.call("debug_read", sessionId=sid, targets=[{"variable": "count", "frame": 1}],
                          poll={"intervalMs": 100, "durationMs": 1000})
    assert raised.value.code == "VALIDATION_ERROR" and "not polled" in raised.value.message
    with pytest.raises(ToolError) as raised:
        await strobe.call("debug_read", sessionId=sid, targets=[{"address": "0x1000", "size": 4, "type": "u32",
                                                                 "frame": 1}])
    assert raised.value.code == "VALIDATION_ERROR" and "give a variable" in raised.value.message

    await strobe.call("debug_continue", sessionId=sid)
    await printed(strobe, sid, "order 7 total 108\n", "checkout to finish")
    assert "No thread is paused" in (await read(strobe, sid, variable="count", frame=1))["error"]
    await finish(strobe, sid, tmp_path)


async def test_optimised_code_says_what_it_cannot_read(
        strobe: StrobeClient, build_dir: Path, tmp_path: Path) -> None:
    """gcc -O2 keeps no frame pointer, turns apply_discount's and price_cart's calls into tail calls and keeps
    variables in registers whose DWARF locations change with the pc: the frames left on the stack are unwound through
    their call frame information, and a variable with a location list is shown as not captured, and not written."""
    binary = build_dir / "frames-O2"
    if not binary.exists():
        subprocess.run(["gcc", "-g", "-O2", "-o", str(binary), str(C_SOURCE)], check=True)
    sid = await launch(strobe, binary, tmp_path)
    await strobe.call("debug_breakpoint", sessionId=sid, add=[{"function": "at_least"}])
    (tmp_path / "go").touch()
    event = await pause_event(strobe, sid)
    checkout, checkout_frame = frame_named(event, "checkout")
    assert checkout == 1  # price_cart and apply_discount jumped to their callees: their frames are gone
    assert "location list" in checkout_frame["locals"]["order_id"] and "not captured" in \
        checkout_frame["locals"]["order_id"]
    assert [item["price"] for item in checkout_frame["locals"]["items"]] == [10, 25, 40]  # on the stack
    refused = await write(strobe, sid, 9, variable="order_id", frame=checkout)
    assert "has no address to read or write" in refused["error"] and "-O0" in refused["error"], refused
    await strobe.call("debug_continue", sessionId=sid)
    await printed(strobe, sid, "order 7 total 108\n", "checkout to finish")
    await finish(strobe, sid, tmp_path)


async def test_a_leaf_functions_locals_below_the_stack_pointer(
        strobe: StrobeClient, c_target: Callable[[str], Path], tmp_path: Path) -> None:
    """at_least calls nothing: gcc keeps its parameters in the red zone below the stack pointer, which the pause's
    stack dump starts below; writing one there changes its result."""
    sid = await launch(strobe, c_target("frames"), tmp_path)
    line = line_of(C_SOURCE, "return value < low ? low : value;")
    await strobe.call("debug_breakpoint", sessionId=sid, add=[{"file": "frames.c", "line": line}])
    (tmp_path / "go").touch()
    event = await pause_event(strobe, sid)
    assert event["function"] == "at_least" and event["locals"] == {"value": 108, "low": 0}
    value = await read(strobe, sid, variable="value")
    assert int(value["address"], 16) < int(event["registers"]["sp"], 16)  # in the red zone
    assert event["backtrace"][1]["locals"]["discount"] == 12
    written = await write(strobe, sid, 200, variable="low")
    assert (written["previousValue"], written["newValue"]) == (0, 200)
    await strobe.call("debug_continue", sessionId=sid)
    await printed(strobe, sid, "order 7 total 200\n", "checkout to print the raised floor")
    await finish(strobe, sid, tmp_path)
