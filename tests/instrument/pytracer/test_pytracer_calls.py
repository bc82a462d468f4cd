"""The in-target Python tracer records calls, returns, unwinds, generator and coroutine segments and threads, under
every CPython 3.11-3.13 found here (programs/calls.py run by harness.py, with the source the host injects)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.instrument.pytracer.runner import (
    ENTER,
    PROGRAMS,
    RETURN,
    UNWIND,
    Event,
    Run,
    assert_clean,
    interpreters,
    run_program,
    targets,
    version_of,
)

CALLS = PROGRAMS / "calls.py"
NAMES = ["add", "outer", "inner", "fails", "catches", "countdown", "fetch", "gather", "ticks", "consume", "in_thread"]
FID = {name: i for i, name in enumerate(NAMES, 1)}


@pytest.fixture(scope="module", params=interpreters())
def python(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def run(python: str, tmp_path_factory: pytest.TempPathFactory) -> Run:
    result = run_program(python, CALLS, tmp_path_factory.mktemp("calls"),
                         {"targets": targets(CALLS, *NAMES), "count_callbacks": True})
    assert_clean(result)
    return result


def line_of(text: str, program: Path = CALLS) -> int:
    return next(i for i, line in enumerate(program.read_text().splitlines(), 1) if text in line)


def segments(run: Run, name: str) -> list[Event]:
    return run.of(FID[name])


def test_enter_and_return_carry_args_by_name_and_the_value(run: Run) -> None:
    enter, leave = segments(run, "add")[:2]
    assert enter[0] == ENTER and enter[5] == -1
    assert enter[6] == {"args": [["a", 1], ["b", 2], ["scale", 2], ["rest", [3, 4]], ["options", {"mode": "x"}]]}
    assert leave[0] == RETURN and leave[5] == -1
    assert leave[6]["return"] == 20 and leave[6]["enter"] == enter[4]
    assert leave[6]["duration"] == leave[2] - enter[2] >= 0


def test_nested_calls_name_their_parent(run: Run) -> None:
    outer_enter = segments(run, "outer")[0]
    inner_enters = run.of(FID["inner"], ENTER)
    assert [e[5] for e in inner_enters] == [outer_enter[4]] * 2
    add_under_inner = [e for e in run.of(FID["add"], ENTER) if e[5] in {i[4] for i in inner_enters}]
    assert [e[6]["args"][:2] for e in add_under_inner] == [[["a", 5], ["b", 1]], [["a", 6], ["b", 1]]]
    inner_returns = run.of(FID["inner"], RETURN)
    assert [(r[5], r[6]["return"]) for r in inner_returns] == [(outer_enter[4], 6), (outer_enter[4], 7)]
    assert run.of(FID["outer"], RETURN)[0][6]["return"] == 13


def test_an_exception_leaving_a_function_is_an_unwind_with_type_message_and_line(run: Run) -> None:
    enters, unwinds = run.of(FID["fails"], ENTER), run.of(FID["fails"], UNWIND)
    assert [e[6]["args"] for e in enters] == [[["depth", 1]], [["depth", 0]]]
    assert enters[1][5] == enters[0][4]
    innermost, outermost = unwinds
    assert innermost[6]["exception"] == {"type": "__main__.LookupFailed", "message": "missing at depth 0",
                                         "line": line_of("raise LookupFailed")}
    assert outermost[6]["exception"]["line"] == line_of("return fails(depth - 1)")
    assert (innermost[6]["enter"], outermost[6]["enter"]) == (enters[1][4], enters[0][4])
    assert innermost[5] == enters[0][4] and outermost[5] == run.of(FID["catches"], ENTER)[0][4]
    assert run.of(FID["catches"], RETURN)[0][6]["return"] == "caught"


def test_untargeted_code_records_nothing_and_is_disabled_after_one_callback(run: Run, python: str) -> None:
    assert {e[1] for e in run.events()} == set(FID.values())
    stats: dict[str, Any] = run.report["stats"]
    if version_of(python) >= (3, 12):
        assert stats["backend"] == "sys.monitoring"
        assert stats["callbacks"]["hot"] == 1  # 100,000 calls, one PY_START callback, then DISABLE
        assert stats["callbacks"]["main"] == 1
    else:
        assert stats["backend"] == "sys.settrace"


def test_each_generator_resumption_and_suspension_is_a_segment(run: Run) -> None:
    payloads = [(e[0], e[6]) for e in segments(run, "countdown")]
    assert [(kind, {k: v for k, v in p.items() if k not in ("duration", "enter")}) for kind, p in payloads] == [
        (ENTER, {"args": [["n", 2]]}), (RETURN, {"yielded": 2}),
        (ENTER, {"resumed": True}), (RETURN, {"yielded": 1}),
        (ENTER, {"resumed": True}), (RETURN, {"return": "done"}),
    ]
    events = segments(run, "countdown")
    for enter, leave in zip(events[::2], events[1::2], strict=True):
        assert leave[6]["enter"] == enter[4] and leave[6]["duration"] == leave[2] - enter[2]


def test_coroutine_segments_nest_under_the_awaiting_coroutine_segment(run: Run) -> None:
    gather, fetch = segments(run, "gather"), segments(run, "fetch")
    first_fetch = fetch[:4]
    assert [e[0] for e in first_fetch] == [ENTER, RETURN, ENTER, RETURN]
    assert first_fetch[0][6] == {"args": [["x", 1]]}
    assert first_fetch[1][6]["yielded"] is None  # suspended at asyncio.sleep(0)
    assert first_fetch[2][6] == {"resumed": True}
    assert first_fetch[3][6]["return"] == 2
    assert first_fetch[0][5] == gather[0][4]  # called by gather's first segment
    resumed_gather = next(e for e in gather if e[0] == ENTER and e[6].get("resumed"))
    assert first_fetch[2][5] == resumed_gather[4]  # resumed inside gather's resumed segment
    assert gather[-1][6]["return"] == [2, 4]


def test_async_generator_yields_show_the_yielded_value(run: Run) -> None:
    leaves = [e[6] for e in run.of(FID["ticks"], RETURN)]
    assert [p.get("yielded", p.get("return")) for p in leaves] == [0, None, 10, None, None]
    assert "return" in leaves[-1]
    assert run.of(FID["consume"], RETURN)[-1][6]["return"] == [0, 10]


def test_threads_are_named_once_and_keep_their_own_parents(run: Run) -> None:
    threads = run.threads()
    main_tid = segments(run, "add")[0][3]
    (worker_enter,) = run.of(FID["in_thread"], ENTER)
    assert threads[main_tid] == "MainThread" and threads[worker_enter[3]] == "worker-1"
    assert worker_enter[3] != main_tid and worker_enter[5] == -1
    add_in_worker = [e for e in run.of(FID["add"], ENTER) if e[3] == worker_enter[3]]
    assert [e[5] for e in add_in_worker] == [worker_enter[4]]
    announced = [tid for b in run.batches() for tid, _ in b["threads"]]
    assert len(announced) == len(set(announced))


def test_seq_is_process_wide_and_time_is_monotonic_per_thread(run: Run) -> None:
    events = run.events()
    seqs = [e[4] for e in events]
    assert len(seqs) == len(set(seqs))
    by_thread: dict[int, list[Event]] = {}
    for event in sorted(events, key=lambda e: e[4]):
        by_thread.setdefault(event[3], []).append(event)
    for thread_events in by_thread.values():
        stamps = [e[2] for e in thread_events]
        assert stamps == sorted(stamps)


def test_the_helper_is_a_daemon_named_strobe_tracer_and_only_stdlib_modules_are_added(run: Run) -> None:
    assert ("strobe-tracer", True) in run.report["threads"]
    stdlib = set(run.report["stdlib"])
    added = run.report["added_modules"]
    assert "_strobe_tracer" in added
    assert [m for m in added if m != "_strobe_tracer" and m.split(".")[0] not in stdlib] == []
    assert "json" not in added and "re" not in added  # the C codec (_json) is used directly
