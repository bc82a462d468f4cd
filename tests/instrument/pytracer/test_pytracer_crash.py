"""An uncaught exception (in a thread, then in the main thread) becomes a crash event with the traceback and each
frame's bounded locals, sent before the process exits; the program's original hooks still run."""

from __future__ import annotations

import pytest
from tests.instrument.pytracer.runner import CRASH, PROGRAMS, UNWIND, Run, interpreters, run_program, targets

PROGRAM = PROGRAMS / "crash.py"


@pytest.fixture(scope="module", params=interpreters())
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_program(str(request.param), PROGRAM, tmp_path_factory.mktemp("crash"),
                       {"targets": targets(PROGRAM, "check")})


def test_a_thread_and_then_the_main_thread_crash_with_tracebacks_and_locals(run: Run) -> None:
    assert run.returncode == 1
    crashes = [e for e in run.events() if e[0] == CRASH]
    assert [c[6]["thread"] for c in crashes] == ["crasher", "MainThread"]
    for crash in crashes:
        assert crash[1] == -1 and crash[5] == -1
        assert crash[6]["type"] == "__main__.BadState"
        assert run.threads()[crash[3]] == crash[6]["thread"]
    in_thread, in_main = (c[6] for c in crashes)
    assert in_thread["message"] == "3 items over a limit of 1"
    assert [f["function"] for f in in_thread["traceback"]][-2:] == ["worker", "check"]  # innermost last
    check_frame, worker_frame = in_thread["traceback"][-1], in_thread["traceback"][-2]
    assert check_frame["file"] == str(PROGRAM)
    assert check_frame["locals"] == {"order": [1, 2, 3], "limit": 1, "remaining": -2}
    assert worker_frame["locals"] == {"secret": {"token": "t-1"}}
    assert [f["function"] for f in in_main["traceback"]][-3:] == ["<module>", "handle", "check"]
    assert in_main["traceback"][-2]["locals"] == {"request_id": 42, "order": ["apple", "pear"]}
    module_locals = in_main["traceback"][-3]["locals"]
    assert len(module_locals) <= 31 and not any(k.startswith("__") for k in module_locals)


def test_the_unwind_comes_first_and_the_original_hooks_still_print(run: Run) -> None:
    kinds = [e[0] for e in run.events() if e[0] in (UNWIND, CRASH)]
    assert kinds == [UNWIND, CRASH, UNWIND, CRASH]
    assert run.stderr.count("BadState: ") == 2  # threading's and sys's own hooks ran after ours
    assert 'Exception in thread crasher' in run.stderr
