"""debug_trace end to end: patterns added and removed on live C, C++ and Rust programs built now,
checked by exact call counts, arguments, return values, durations, threads and parents."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Control, StrobeClient, connect, poll, write_settings

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def launch_ready(client: StrobeClient, binary: Path, project: Path, *args: str) -> str:
    sid = (await client.call("debug_launch", command=str(binary), args=list(args), projectRoot=str(project)))[
        "sessionId"
    ]

    async def ready() -> bool | None:
        page = await client.call("debug_query", sessionId=sid, eventType="stdout")
        return True if any(e["text"] == "ready\n" for e in page["events"]) else None

    await poll(ready, 15, "the target to be ready")
    return sid


async def calls(client: StrobeClient, sid: str, **filters: Any) -> list[dict[str, Any]]:
    return await client.all_events(sid, verbose=True, **filters)


def low_byte(value: int | str) -> int:
    """A bool return value lives in the low byte of the return register."""
    return (int(value, 16) if isinstance(value, str) else value) & 0xFF


def by_function(events: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    return Counter((e["function"], e["eventType"]) for e in events)


async def test_c_runtime_add_remove_with_exact_calls(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, c_target("traced"), project, str(control.directory))
    added = await strobe.call(
        "debug_trace", sessionId=sid, add=["add", "multiply", "validate", "process_command", "slow_function"]
    )
    assert added["mode"] == "runtime"
    assert added["hookedFunctions"] == 5 and "matchedFunctions" not in added
    assert added["activePatterns"] == ["add", "multiply", "validate", "process_command", "slow_function"]
    assert added["warnings"] == [] and added["activeWatches"] == [] and added["eventLimit"] == 200_000
    assert "excellent" in added["status"]

    await control.round(strobe, sid)
    events = await calls(strobe, sid, eventType="function_enter")
    counts = Counter(e["function"] for e in events)
    assert counts == {"add": 15, "process_command": 1, "multiply": 1, "slow_function": 1, "validate": 2}
    first = events[0]
    assert first["sourceFile"].endswith("tests/targets/traced.c") and first["line"] > 0
    assert first["functionRaw"] == first["function"]

    # Arguments and return values, raw registers.
    multiply = next(e for e in events if e["function"] == "multiply")
    assert multiply["arguments"] == [6, 7]
    exits = await calls(strobe, sid, eventType="function_exit")
    assert [e["returnValue"] for e in exits if e["function"] == "multiply"] == [42]
    assert [e["returnValue"] for e in exits if e["function"] == "validate"] == [0, 1]
    assert all(e["returnType"] == "int" for e in exits if e["function"] == "validate")

    # Parents from the per-thread call stack: process_command's five add() calls hang under it.
    command = next(e for e in events if e["function"] == "process_command")
    assert command["arguments"][1] == 5
    main_adds = [e for e in events if e["function"] == "add" and e["threadId"] == command["threadId"]]
    assert [e["arguments"] for e in main_adds] == [[i, 3 * i] for i in range(5)]
    assert all(e["parentEventId"] == command["id"] for e in main_adds)
    main_add_exits = [e for e in exits if e["function"] == "add" and e["threadId"] == command["threadId"]]
    assert [e["returnValue"] for e in main_add_exits] == [4 * i for i in range(5)]

    # Threads: each worker's calls carry its own thread id and name, none misattributed.
    worker_adds = [e for e in events if e["function"] == "add" and e["threadId"] != command["threadId"]]
    assert Counter(e["threadName"] for e in worker_adds) == {"worker-1": 5, "worker-2": 5}
    for e in worker_adds:
        worker = int(e["threadName"][-1])
        assert e["arguments"] == [100 + worker, worker] and "parentEventId" not in e
    named = await strobe.call("debug_query", sessionId=sid, threadName={"contains": "worker"})
    assert named["totalCount"] == 20

    # Durations.
    slow = await strobe.call("debug_query", sessionId=sid, minDurationNs=20_000_000)
    assert [(e["function"], e["eventType"]) for e in slow["events"]] == [("slow_function", "function_exit")]
    assert slow["events"][0]["durationNs"] >= 20_000_000
    forty_two = await strobe.call("debug_query", sessionId=sid, returnValue={"equals": 42})
    assert {e["function"] for e in forty_two["events"]} == {"multiply", "process_command"}  # 6*7, 2+sum(4i)

    # Remove a pattern on the live process: its calls stop being recorded, the others go on.
    removed = await strobe.call("debug_trace", sessionId=sid, remove=["add"])
    assert removed["hookedFunctions"] == 4 and "add" not in removed["activePatterns"]
    await control.round(strobe, sid)
    counts = Counter(e["function"] for e in await calls(strobe, sid, eventType="function_enter"))
    assert counts["add"] == 15 and counts["multiply"] == 2 and counts["validate"] == 4

    state = await strobe.call("debug_trace", sessionId=sid)
    assert state["hookedFunctions"] == 4 and state["activePatterns"] == removed["activePatterns"]
    await strobe.call("debug_stop", sessionId=sid)


async def test_pending_patterns_catch_calls_before_main(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    staged = await strobe.call("debug_trace", add=["early_setup", "init_config"], projectRoot=str(project))
    assert staged["mode"] == "pending" and staged["hookedFunctions"] == 0
    assert staged["activePatterns"] == ["early_setup", "init_config"]
    launched = await strobe.call(
        "debug_launch", command=str(c_target("traced")), args=[str(control.directory)], projectRoot=str(project)
    )
    assert launched["pendingPatternsApplied"] == 2
    sid = launched["sessionId"]

    async def both() -> list[dict[str, Any]] | None:
        events = await calls(strobe, sid, eventType="function_exit")
        return events if len(events) == 2 else None

    exits = await poll(both, 15, "the constructor's and main's first calls")
    assert [(e["function"], e["returnValue"]) for e in exits] == [("early_setup", 8), ("init_config", 84)]
    enters = await calls(strobe, sid, eventType="function_enter")
    assert [e["arguments"] for e in enters] == [[7], [42]]
    # Staged patterns stay staged for the next launch until removed.
    still = await strobe.call("debug_trace", remove=["early_setup", "init_config"])
    assert still["activePatterns"] == []
    await strobe.call("debug_stop", sessionId=sid)


async def test_validation_scenario_cpp(
    strobe: StrobeClient, cpp_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, cpp_target("shapes"), project, str(control.directory))
    assert (await strobe.call("debug_query", sessionId=sid, eventType="stderr"))["totalCount"] == 0
    traced = await strobe.call("debug_trace", sessionId=sid, add=["submit::*", "form::validate"])
    assert traced["hookedFunctions"] == 3  # submit::handle, submit::retry, form::validate
    await control.round(strobe, sid)
    found = await strobe.call("debug_query", sessionId=sid, function={"contains": "validate"})
    assert {e["function"] for e in found["events"]} == {"form::validate"}
    assert Counter(e["eventType"] for e in found["events"]) == {"function_enter": 2, "function_exit": 2}
    verbose = await strobe.call(
        "debug_query", sessionId=sid, function={"equals": "form::validate"}, eventType="function_exit", verbose=True
    )
    assert [low_byte(e["returnValue"]) for e in verbose["events"]] == [0, 1]  # false for 3 fields, true for 12
    enters = await strobe.call(
        "debug_query", sessionId=sid, function={"equals": "form::validate"}, eventType="function_enter", verbose=True
    )
    assert [e["arguments"] for e in enters["events"]] == [[3], [12]]
    assert enters["events"][0]["functionRaw"] == "_ZN4form8validateEi"
    handle = await strobe.call("debug_query", sessionId=sid, function={"matches": "^submit::"}, verbose=True)
    assert by_function(handle["events"]) == {
        ("submit::handle", "function_enter"): 1, ("submit::handle", "function_exit"): 1,
        ("submit::retry", "function_enter"): 1, ("submit::retry", "function_exit"): 1,
    }
    stopped = await strobe.call("debug_stop", sessionId=sid)
    assert stopped["success"] is True


async def test_cpp_pattern_syntax(
    strobe: StrobeClient, cpp_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, cpp_target("shapes"), project, str(control.directory))
    cases: list[tuple[str, set[str]]] = [
        ("auth::**::validate", {"auth::validate", "auth::user::validate"}),
        ("*::validate", {"auth::validate", "form::validate"}),
        ("form::**", {"form::validate", "form::Form::validate"}),
        ("geo::**", {"geo::Box<int>::get"}),
        ("twice<*>", {"twice<int>", "twice<double>"}),
        ("area", {"area"}),
    ]
    patterns = [p for p, _ in cases]
    traced = await strobe.call("debug_trace", sessionId=sid, add=patterns)
    expected = set().union(*(names for _, names in cases))
    # area is overloaded: two functions behind one name.
    assert traced["hookedFunctions"] == len(expected) + 1, traced
    await control.round(strobe, sid)
    enters = await calls(strobe, sid, eventType="function_enter")
    assert Counter(e["function"] for e in enters) == {
        "auth::validate": 1, "auth::user::validate": 1, "form::validate": 2, "form::Form::validate": 1,
        "geo::Box<int>::get": 1, "twice<int>": 1, "twice<double>": 1, "area": 2,
    }
    assert {e["functionRaw"] for e in enters if e["function"] == "area"} == {"_Z4areai", "_Z4aread"}
    exits = await calls(strobe, sid, eventType="function_exit")
    assert [e["returnValue"] for e in exits if e["function"] == "twice<int>"] == [42]
    assert [e["returnValue"] for e in exits if e["function"] == "geo::Box<int>::get"] == [9]
    for pattern in patterns:
        await strobe.call("debug_trace", sessionId=sid, remove=[pattern])
    assert (await strobe.call("debug_trace", sessionId=sid))["hookedFunctions"] == 0
    await control.round(strobe, sid)
    assert len(await calls(strobe, sid, eventType="function_enter")) == len(enters)
    await strobe.call("debug_stop", sessionId=sid)


async def test_rust_functions(
    strobe: StrobeClient, rust_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, rust_target("rust_app"), project, str(control.directory))
    traced = await strobe.call(
        "debug_trace", sessionId=sid,
        add=["rust_app::submit::*", "rust_app::form::validate", "rust_app::geometry::**", "rust_app::double<*>"],
    )
    assert traced["hookedFunctions"] == 4, traced
    await control.round(strobe, sid)
    exits = await calls(strobe, sid, eventType="function_exit")
    returns = [(e["function"], low_byte(e["returnValue"]) if "validate" in e["function"] else e["returnValue"])
               for e in exits]
    assert returns == [
        ("rust_app::form::validate", 0),
        ("rust_app::submit::handle", 1),
        ("rust_app::form::validate", 1),
        ("rust_app::geometry::Square::area", 16),
        ("rust_app::double<i64>", 42),
    ]
    assert all(e["sourceFile"].endswith("rust_app/src/main.rs") for e in exits)
    await strobe.call("debug_stop", sessionId=sid)


async def test_hot_function_is_sampled_and_every_event_is_accounted_for(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    write_settings(project / ".strobe", {"events.maxPerSession": 2_000_000})
    total_calls = 3_000_000
    sid = await launch_ready(strobe, c_target("hot"), project, str(control.directory), str(total_calls))
    traced = await strobe.call("debug_trace", sessionId=sid, add=["hot_add", "cold_marker"])
    assert traced["hookedFunctions"] == 2
    (control.directory / "go").touch()
    await strobe.wait_for_status(sid, "exited", timeout=90)
    page = await strobe.call("debug_query", sessionId=sid, function={"equals": "hot_add"}, limit=1)
    recorded = page["totalCount"]
    assert 0 < recorded < 2 * total_calls // 2  # most calls were sampled away
    assert any("Partial data" in w and "trace.samplePercent" in w for w in page["warnings"])
    sampled = await strobe.call(
        "debug_query", sessionId=sid, function={"equals": "hot_add"}, verbose=True, offset=recorded - 2
    )
    assert all(e["sampled"] is True for e in sampled["events"])
    cold = await calls(strobe, sid, function={"equals": "cold_marker"})
    assert [(e["eventType"], "sampled" in e) for e in cold] == [("function_enter", False), ("function_exit", False)]
    sessions = await strobe.call("debug_list_sessions")
    assert sessions["sessions"][0]["status"] == "exited"
    # Nothing lost silently: recorded + sampled out + dropped = every enter and exit.
    listed = page["warnings"]
    skipped = int(next(w for w in listed if "Partial data" in w).split()[2].replace(",", ""))
    dropped = next((int(w.split()[0].replace(",", "")) for w in listed if "were lost" in w), 0)
    assert recorded + skipped + dropped == 2 * total_calls


async def test_trace_errors(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control, tmp_path: Path
) -> None:
    sid = await launch_ready(strobe, c_target("traced"), project, str(control.directory))
    for pattern, fragment in [("", "empty"), ("@foo", "unknown directive"), ("a::", "'::'"), ("***", "ambiguous"),
                              ("@file:", "name a file"), (" add", "whitespace")]:
        error = await strobe.error("debug_trace", sessionId=sid, add=["multiply", pattern])
        assert error.code == "INVALID_PATTERN" and fragment in error.message, (pattern, error)
    # An invalid pattern changes nothing, even next to valid ones.
    assert (await strobe.call("debug_trace", sessionId=sid))["hookedFunctions"] == 0
    nothing = await strobe.call("debug_trace", sessionId=sid, add=["no_such_function"])
    assert nothing["hookedFunctions"] == 0 and "matched no function" in nothing["warnings"][0]
    assert "No functions are hooked" in nothing["status"]
    assert (await strobe.error("debug_trace", sessionId="nope", add=["add"])).code == "SESSION_NOT_FOUND"
    assert (await strobe.error("debug_trace", sessionId=sid, add="add")).code == "VALIDATION_ERROR"
    (control.directory / "quit").touch()
    await strobe.wait_for_status(sid, "exited")
    exited = await strobe.error("debug_trace", sessionId=sid, add=["add"])
    assert exited.code == "PROCESS_EXITED" and "debug_query" in exited.message

    plain = tmp_path / "plain"
    import subprocess

    subprocess.run(["gcc", "-O0", "-o", str(plain), str(Path(__file__).parents[1] / "targets" / "sleeper.c")],
                   check=True)
    bare = (await strobe.call("debug_launch", command=str(plain), projectRoot=str(project)))["sessionId"]
    error = await strobe.error("debug_trace", sessionId=bare, add=["main"])
    assert error.code == "NO_DEBUG_SYMBOLS" and "-g" in error.message
    await strobe.call("debug_stop", sessionId=bare)


async def test_a_pattern_matching_too_many_functions_is_refused(
    strobe: StrobeClient, project: Path, tmp_path: Path
) -> None:
    import subprocess

    source = tmp_path / "many.c"
    body = "".join(f"__attribute__((noinline)) int f{i}(int x) {{ return x + {i}; }}\n" for i in range(10_050))
    source.write_text(body + "#include <unistd.h>\nint main(void) { for (;;) pause(); }\n")
    binary = tmp_path / "many"
    subprocess.run(["gcc", "-g", "-O0", "-o", str(binary), str(source)], check=True)
    sid = (await strobe.call("debug_launch", command=str(binary), projectRoot=str(project)))["sessionId"]
    refused = await strobe.call("debug_trace", sessionId=sid, add=["f*", "f1"])
    assert refused["activePatterns"] == ["f1"] and refused["hookedFunctions"] == 1
    assert any("matches 10,0" in w and "not added" in w for w in refused["warnings"])
    await strobe.call("debug_stop", sessionId=sid)


async def test_many_threads_nothing_lost_or_misattributed(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, c_target("threads"), project, str(control.directory))
    assert (await strobe.call("debug_trace", sessionId=sid, add=["tagged"]))["hookedFunctions"] == 1
    (control.directory / "go").touch()

    async def finished() -> bool | None:
        page = await strobe.call("debug_query", sessionId=sid, eventType="stdout")
        return True if any(e["text"] == "threads done\n" for e in page["events"]) else None

    await poll(finished, 30, "the threads to finish")
    enters = await calls(strobe, sid, eventType="function_enter")
    exits = await calls(strobe, sid, eventType="function_exit")
    assert len(enters) == len(exits) == 4 * 3000
    for enter in enters:
        thread, _ = enter["arguments"]
        assert enter["threadName"] == f"t-{thread}", enter
    by_thread: dict[str, list[int]] = {}
    for enter in enters:
        by_thread.setdefault(enter["threadName"], []).append(enter["arguments"][1])
    assert by_thread == {f"t-{t}": list(range(3000)) for t in range(4)}
    for exit_event in exits:
        thread = int(exit_event["threadName"][2:])
        assert exit_event["returnValue"] // 100000 == thread
    assert "warnings" not in await strobe.call("debug_query", sessionId=sid, limit=1)
    await strobe.call("debug_stop", sessionId=sid)


async def test_usercode_and_file_patterns(
    strobe: StrobeClient, c_target: Callable[[str], Path], control: Control
) -> None:
    sources = Path(__file__).parents[1] / "targets"  # traced.c lives here: it is the project
    binary = c_target("traced")
    sid = (await strobe.call("debug_launch", command=str(binary), args=[str(control.directory)],
                             projectRoot=str(sources)))["sessionId"]
    defined_in_traced_c = {
        "early_setup", "init_config", "add", "multiply", "helper_static", "validate", "slow_function",
        "process_command", "worker", "before_main", "main",
    }
    in_the_project = defined_in_traced_c | {"exists"}  # exists() comes from control.h, beside traced.c
    usercode = await strobe.call("debug_trace", sessionId=sid, add=["@usercode"])
    assert usercode["hookedFunctions"] == len(in_the_project), usercode
    await control.round(strobe, sid)
    traced = {e["function"] for e in await calls(strobe, sid, eventType="function_enter")}
    assert traced <= in_the_project and {"add", "worker", "exists", "process_command"} <= traced
    await strobe.call("debug_trace", sessionId=sid, remove=["@usercode"])
    by_file = await strobe.call("debug_trace", sessionId=sid, add=["@file:targets/traced.c"])
    assert by_file["hookedFunctions"] == len(defined_in_traced_c)
    assert (await strobe.call("debug_trace", sessionId=sid, add=["@file:no_such_file.c"]))["warnings"]
    await strobe.call("debug_stop", sessionId=sid)


async def test_function_in_a_shared_library(
    strobe: StrobeClient, project: Path, control: Control, tmp_path: Path
) -> None:
    import subprocess

    targets = Path(__file__).parents[1] / "targets"
    lib = tmp_path / "libmathlib.so"
    subprocess.run(["gcc", "-g", "-O0", "-shared", "-fPIC", "-o", str(lib), str(targets / "mathlib.c")], check=True)
    binary = tmp_path / "uses_lib"
    subprocess.run(
        ["gcc", "-g", "-O0", "-o", str(binary), str(targets / "uses_lib.c"), f"-L{tmp_path}", "-lmathlib",
         f"-Wl,-rpath,{tmp_path}"],
        check=True,
    )
    sid = await launch_ready(strobe, binary, project, str(control.directory))
    traced = await strobe.call("debug_trace", sessionId=sid, add=["lib_scale"])
    assert traced["hookedFunctions"] == 1
    await control.round(strobe, sid)
    await control.round(strobe, sid)
    exits = await calls(strobe, sid, eventType="function_exit")
    assert [(e["function"], e["returnValue"]) for e in exits] == [("lib_scale", 10), ("lib_scale", 20)]
    assert exits[0]["sourceFile"].endswith("targets/mathlib.c")
    enters = await calls(strobe, sid, eventType="function_enter")
    assert [e["arguments"] for e in enters] == [[1, 10], [2, 10]]
    await strobe.call("debug_stop", sessionId=sid)


async def test_staged_patterns_belong_to_the_connection_that_staged_them(
    strobe_home: Path, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    """Two agents on one daemon: what one stages is its own next launch's, never the other's."""
    async with connect(strobe_home) as first, connect(strobe_home) as second:
        staged = await first.call("debug_trace", add=["early_setup", "init_config"], projectRoot=str(project))
        assert staged["activePatterns"] == ["early_setup", "init_config"]
        assert (await second.call("debug_trace"))["activePatterns"] == []  # pending mode: its own, empty
        other = await second.call("debug_launch", command=str(c_target("traced")), args=[str(control.directory)],
                                  projectRoot=str(project))
        assert "pendingPatternsApplied" not in other
        assert (await second.call("debug_trace", sessionId=other["sessionId"]))["hookedFunctions"] == 0
        await second.call("debug_stop", sessionId=other["sessionId"])
        own = await first.call("debug_launch", command=str(c_target("traced")), args=[str(control.directory)],
                               projectRoot=str(project))
        assert own["pendingPatternsApplied"] == 2
        assert (await first.call("debug_trace", sessionId=own["sessionId"]))["hookedFunctions"] == 2
        await first.call("debug_stop", sessionId=own["sessionId"])


async def test_a_hot_trace_never_pushes_the_programs_output_out(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    write_settings(project / ".strobe", {"events.maxPerSession": 1000, "trace.samplePercent": 100,
                                         "trace.hotCallsPerSecond": 100_000_000})
    sid = await launch_ready(strobe, c_target("hot"), project, str(control.directory), "100000")
    await strobe.call("debug_trace", sessionId=sid, add=["hot_add"])
    (control.directory / "go").touch()
    await strobe.wait_for_status(sid, "exited", timeout=90)
    output = await strobe.all_events(sid, eventType="stdout")
    assert [e["text"] for e in output] == ["ready\n", "hot done 4999950000\n"]  # not evicted by 200k trace events
    page = await strobe.call("debug_query", sessionId=sid, function={"equals": "hot_add"}, limit=1)
    assert page["totalCount"] == 1000
    assert any("oldest events were dropped by the per-session limit" in w for w in page["warnings"])
    await strobe.call("debug_stop", sessionId=sid)
