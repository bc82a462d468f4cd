"""The plain-subprocess test runner: real commands (small Python scripts, the stuck C programs) under a fake
adapter defined here, which reads a JSON report the scripts write and counts START/PASS/FAIL/SKIP lines for
live progress. Checks the debug_test_status shapes, the details file, the stuck and timeout kills, and that no
process of a run outlives it, nor the daemon: a stand-in daemon killed with -9 takes its run's process group with it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from strobe.errors import TestRunNotFound as RunNotFound
from strobe.errors import ValidationError
from strobe.instrument.reaper import Reaper
from strobe.testing import runner as runner_module
from strobe.testing.adapters.base import FinishedRun, TestAdapter, tail
from strobe.testing.model import LiveProgress, Outcome, ParsedRun
from strobe.testing.model import TestCase as Case  # aliases: pytest would try to collect Test* classes
from strobe.testing.model import TestCommand as Command
from strobe.testing.model import TestLevel as Level
from strobe.testing.runner import TestRunner as Runner
from strobe.testing.stacks import all_processes, read_stat

pytestmark = pytest.mark.anyio
PROGRAMS = Path(__file__).parents[1] / "targets" / "testprojects" / "stuck"


class FakeAdapter(TestAdapter):
    """A framework whose report is a JSON list of cases at command.report."""

    name, display_name, language = "fake", "Fake", "rust"

    def detect(self, project_root: Path, command: str | None) -> int:
        return 0

    def suite_command(self, project_root: Path, level: Level | None, command: str | None,
                      report_dir: Path) -> Command:
        raise NotImplementedError

    def single_test_command(self, project_root: Path, test: str, command: str | None,
                            report_dir: Path) -> Command:
        raise NotImplementedError

    def rerun_command(self, project_root: Path, test: str, command: str | None) -> str:
        return f"fake {test}"

    def on_line(self, line: str, stream: str, progress: LiveProgress, now_ns: int) -> None:
        word, _, name = line.partition(" ")
        if word == "START":
            progress.start(name, now_ns)
        elif word in ("PASS", "FAIL", "SKIP"):
            progress.finish({"PASS": Outcome.PASSED, "FAIL": Outcome.FAILED, "SKIP": Outcome.SKIPPED}[word])

    def parse(self, run: FinishedRun) -> ParsedRun:
        if run.command.report is None or not run.command.report.exists():
            return ParsedRun([], error=f"The suite wrote no report (exit status {run.exit_code}).\n"
                                       f"{tail(run.stdout + run.stderr)}")
        return ParsedRun([Case(**{**c, "outcome": Outcome(c["outcome"])})
                          for c in json.loads(run.command.report.read_text())])


def python(tmp_path: Path, body: str, name: str = "suite") -> Command:
    """A Python script as a test command; `REPORT` in it is the report's path."""
    report = tmp_path / f"{name}.json"
    script = tmp_path / f"{name}.py"
    script.write_text(f"import json, os, subprocess, sys, time\nREPORT = {str(report)!r}\n" + textwrap.dedent(body))
    return Command([sys.executable, str(script)], tmp_path, report=report)


def alive(pid: int) -> bool:
    stat = read_stat(pid)
    return stat is not None and stat.state not in ("Z", "X")


def kill_survivors(pids: list[int]) -> None:
    """Cleanup when an assertion failed: this test's processes must not outlive it either way."""
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


async def until(check: Callable[[], Any], timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := check():
            return result
        await asyncio.sleep(0.05)
    raise AssertionError(f"condition not met within {timeout}s")


@pytest.fixture
async def runner(tmp_path: Path) -> AsyncIterator[Runner]:
    test_runner = Runner(tmp_path / "details")
    yield test_runner
    await test_runner.close()


SUITE = """
print("compiling...", flush=True)
print("START math::adds", flush=True)
print("PASS math::adds", flush=True)
print("START bank::ledger_balances", flush=True)
print("warning: ledger is slow", file=sys.stderr, flush=True)
print("FAIL bank::ledger_balances", flush=True)
print("SKIP net::flaky", flush=True)
json.dump([
    {"name": "math::adds", "outcome": "passed", "duration_ms": 12},
    {"name": "bank::ledger_balances", "outcome": "failed", "duration_ms": 30, "file": "src/ledger.rs", "line": 42,
     "message": "assertion `left == right` failed: left: 90, right: 100", "output": "balance before: 100",
     "stack": ["bank::ledger::post", "bank::tests::ledger_balances", "core::ops::function::FnOnce::call_once"]},
    {"name": "net::flaky", "outcome": "skipped", "duration_ms": 0, "message": "ignored"},
], open(REPORT, "w"))
sys.exit(101)
"""


async def test_completed_run_reports_outcomes_failures_progress_and_details(tmp_path: Path) -> None:
    recorded: list[tuple[str, list[tuple[str, float]]]] = []
    runner = Runner(tmp_path / "details", record_durations=lambda fw, cases: recorded.append((fw, cases)))
    run_id = await runner.start(FakeAdapter(), python(tmp_path, SUITE))
    status = await runner.status(run_id, wait_s=30)
    assert status["status"] == "completed" and status["testRunId"] == run_id
    result = status["result"]
    assert result["framework"] == "Fake" and result["stuck"] == []
    summary = result["summary"]
    assert (summary["passed"], summary["failed"], summary["skipped"]) == (1, 1, 1) and "stuck" not in summary
    assert summary["durationMs"] > 0
    assert result["failures"] == [{
        "name": "bank::ledger_balances", "file": "src/ledger.rs", "line": 42,
        "message": "assertion `left == right` failed: left: 90, right: 100",
        "suggestedTraces": ["bank::ledger::*", "bank::tests::*", "@file:ledger.rs"],
        "rerunCommand": "fake bank::ledger_balances"}]
    progress = runner.get(run_id).progress  # the adapter saw every line as it came
    assert (progress.passed, progress.failed, progress.skipped) == (1, 1, 1)
    details = Path(result["details"]).read_text()
    assert details.index("compiling...") < details.index("[stderr] warning: ledger is slow")
    assert "FAILED bank::ledger_balances (src/ledger.rs:42) [30 ms]" in details
    assert "balance before: 100" in details and "SKIPPED net::flaky" in details and "exit status 101" in details
    assert recorded == [("fake", [("math::adds", 12.0), ("bank::ledger_balances", 30.0)])]  # skipped: no duration
    await runner.close()


async def test_status_shows_live_progress_then_blocks_until_the_run_ends(tmp_path: Path) -> None:
    runner = Runner(tmp_path / "details", baselines=lambda fw, name: 250.4 if (fw, name) == ("fake", "slow::one")
                        else None)
    go = tmp_path / "go"
    run_id = await runner.start(FakeAdapter(), python(tmp_path, f"""
        print("START quick::one", flush=True)
        print("PASS quick::one", flush=True)
        print("START slow::one", flush=True)
        while not os.path.exists({str(go)!r}):
            time.sleep(0.02)
        print("PASS slow::one", flush=True)
        json.dump([{{"name": "quick::one", "outcome": "passed"}}, {{"name": "slow::one", "outcome": "passed"}}],
                  open(REPORT, "w"))
    """))
    await until(lambda: runner.get(run_id).progress.current_test == "slow::one")
    waited = time.monotonic()
    status = await runner.status(run_id, wait_s=0.3)
    assert time.monotonic() - waited >= 0.3  # it waited for completion before answering
    assert status["status"] == "running"
    progress = status["progress"]
    assert progress["passed"] == 1 and progress["failed"] == progress["skipped"] == 0
    assert progress["currentTest"] == "slow::one" and progress["currentTestElapsedMs"] >= 0
    assert progress["currentTestBaselineMs"] == 250 and progress["phase"] == "running"
    assert progress["warnings"] == [] and progress["elapsedMs"] > 0
    go.touch()
    waited = time.monotonic()
    status = await runner.status(run_id, wait_s=60)
    assert status["status"] == "completed" and time.monotonic() - waited < 30  # answered at completion
    assert status["result"]["summary"]["passed"] == 2
    await runner.close()


async def test_unknown_run_id_is_a_teaching_error(runner: Runner) -> None:
    with pytest.raises(RunNotFound, match=r"No test run with ID 'nope'.*debug_test"):
        await runner.status("nope")
    with pytest.raises(RunNotFound):
        await runner.cancel("nope")


async def test_commands_that_cannot_start_fail_with_what_to_do(runner: Runner, tmp_path: Path) -> None:
    missing = await runner.start(FakeAdapter(), Command(["no-such-test-tool-4711", "--all"], tmp_path))
    status = await runner.status(missing, wait_s=0)
    assert status["status"] == "failed"
    assert "`no-such-test-tool-4711` was not found" in status["error"] and "`framework`" in status["error"]
    nowhere = await runner.start(FakeAdapter(), Command(["true"], tmp_path / "gone"))
    assert "does not exist" in (await runner.status(nowhere, wait_s=0))["error"]
    with pytest.raises(ValidationError, match="empty"):
        await runner.start(FakeAdapter(), Command([], tmp_path))


async def test_a_suite_that_did_not_run_fails_with_the_adapters_error(runner: Runner, tmp_path: Path) -> None:
    run_id = await runner.start(FakeAdapter(), python(tmp_path, """
        print("error[E0425]: cannot find value `balanse` in this scope", file=sys.stderr)
        sys.exit(101)
    """))
    status = await runner.status(run_id, wait_s=30)
    assert status["status"] == "failed"
    assert status["error"].startswith("The suite wrote no report (exit status 101)")
    assert "cannot find value `balanse`" in status["error"] and str(runner.get(run_id).details) in status["error"]


async def test_no_tests_reports_the_project_and_a_hint(runner: Runner, tmp_path: Path) -> None:
    run_id = await runner.start(FakeAdapter(), python(tmp_path, "json.dump([], open(REPORT, 'w'))"), "ledgr")
    result = (await runner.status(run_id, wait_s=30))["result"]
    assert result["noTests"] is True
    assert result["project"] == {"language": "rust", "buildSystem": "fake", "testFiles": []}
    assert "No test matched 'ledgr'" in result["hint"]


async def test_cancel_kills_the_whole_tree_even_processes_that_left_it(runner: Runner, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    run_id = await runner.start(FakeAdapter(), python(tmp_path, f"""
        child = subprocess.Popen(["sleep", "300"])
        escaped = subprocess.Popen(["sleep", "301"], start_new_session=True)  # own session, same stdout
        # double fork: reparented away from the tree at once, found only by the output pipe it holds
        subprocess.run(["sh", "-c", "setsid sleep 302 & echo $! > {pids}.daemon"])
        open({str(pids)!r}, "w").write(f"{{os.getpid()}} {{child.pid}} {{escaped.pid}}")
        print("START forever", flush=True)
        time.sleep(600)
    """))
    await until(lambda: runner.get(run_id).progress.current_test)
    victims = [int(p) for p in pids.read_text().split()] + [int(Path(f"{pids}.daemon").read_text())]
    try:
        assert all(alive(pid) for pid in victims)
        await runner.cancel(run_id)
        status = await runner.status(run_id, wait_s=0)
        assert status["status"] == "failed" and "cancelled" in status["error"]
        assert not [pid for pid in victims if alive(pid)]
    finally:
        kill_survivors(victims)


async def test_what_a_suite_leaves_running_is_killed_when_it_ends(runner: Runner, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    run_id = await runner.start(FakeAdapter(), python(tmp_path, f"""
        server = subprocess.Popen(["sleep", "303"], stdout=subprocess.DEVNULL)  # a forgotten test server
        subprocess.run(["sh", "-c", "setsid sleep 304 & echo $! > {pids}.daemon"])  # holds the output pipe
        open({str(pids)!r}, "w").write(str(server.pid))
        json.dump([{{"name": "starts_server", "outcome": "passed"}}], open(REPORT, "w"))
    """))
    started = time.monotonic()
    status = await runner.status(run_id, wait_s=60)
    assert status["status"] == "completed" and status["result"]["summary"]["passed"] == 1
    assert time.monotonic() - started < runner_module.DRAIN_AFTER_EXIT_S  # not waiting on the pipe holder
    leftovers = [int(pids.read_text()), int(Path(f"{pids}.daemon").read_text())]
    try:
        assert not [pid for pid in leftovers if alive(pid)]
    finally:
        kill_survivors(leftovers)


async def test_hard_timeout_kills_a_busy_suite_and_keeps_its_stacks(tmp_path: Path) -> None:
    runner = Runner(tmp_path / "details", timeouts={Level.UNIT: 1.5})
    run_id = await runner.start(FakeAdapter(), python(tmp_path, """
        print("START chatty::forever", flush=True)
        while True:  # never silent, so never "stuck": only the time limit ends it
            print("still working", flush=True)
            time.sleep(0.1)
    """), level=Level.UNIT)
    process = await until(lambda: runner.get(run_id).process)
    status = await runner.status(run_id, wait_s=30)
    result = status["result"]
    assert status["status"] == "completed" and result["summary"]["stuck"] == 1
    stuck = result["stuck"][0]
    assert stuck["name"] == "chatty::forever" and stuck["elapsedMs"] >= 1000
    assert stuck["diagnosis"] == "Timed out: still running after 1.5 s, the limit for unit tests"
    assert stuck["threads"] and all(thread["stack"] for thread in stuck["threads"])
    assert not alive(process.pid)
    await runner.close()


async def test_a_runs_own_time_limit_stops_it_with_stacks_and_the_results_so_far(tmp_path: Path) -> None:
    runner = Runner(tmp_path / "details")  # the default limits: minutes; the run's own: 1 s
    run_id = await runner.start(FakeAdapter(), python(tmp_path, """
        json.dump([{"name": "math::adds", "outcome": "passed"},
                   {"name": "bank::posts", "outcome": "failed", "message": "left: 90, right: 100"}], open(REPORT, "w"))
        print("START net::waits", flush=True)
        while True:  # never silent, so never "stuck": only the run's time limit ends it
            print("still working", flush=True)
            time.sleep(0.1)
    """), timeout_s=1.0)
    process = await until(lambda: runner.get(run_id).process)
    status = await runner.status(run_id, wait_s=30)
    assert status["status"] == "completed", status
    result = status["result"]
    summary = result["summary"]
    assert (summary["passed"], summary["failed"], summary["stuck"]) == (1, 1, 1)  # the report so far, parsed
    assert summary["durationMs"] < 20_000
    assert [f["name"] for f in result["failures"]] == ["bank::posts"]
    (stuck,) = result["stuck"]
    assert stuck["name"] == "net::waits" and stuck["kind"] == "timeout" and stuck["elapsedMs"] >= 1000
    assert stuck["diagnosis"] == "Timed out: still running after 1 s, the limit for this run (its timeoutMs)"
    assert stuck["threads"] and all(thread["stack"] for thread in stuck["threads"])
    assert "# time limit: 1 s" in Path(result["details"]).read_text()
    assert not alive(process.pid)
    for outside in (0.5, 24 * 3600 + 1):
        with pytest.raises(ValidationError, match=r"from 1 s to 24 h"):
            await runner.start(FakeAdapter(), python(tmp_path, "pass", name="never"), timeout_s=outside)
    await runner.close()


async def test_a_launcher_runs_in_front_of_a_command_which_still_names_the_run(runner: Runner,
                                                                               tmp_path: Path) -> None:
    parsed: list[list[str]] = []

    class Recording(FakeAdapter):
        def parse(self, run: FinishedRun) -> ParsedRun:
            parsed.append(run.command.argv)
            return super().parse(run)

    command = python(tmp_path, "json.dump([{'name': 'a', 'outcome': 'passed'}], open(REPORT, 'w'))")
    launched = tmp_path / "launched"
    run_id = await runner.start(Recording(), command, launcher=["/bin/sh", "-c", 'echo "$@" > "$0"; exec "$@"',
                                                                str(launched)], user_command="./suite")
    status = await runner.status(run_id, wait_s=30)
    assert status["result"]["summary"]["passed"] == 1
    assert launched.read_text().split() == command.argv  # the launcher ran, then exec()ed the command
    assert parsed == [command.argv]  # the adapter reads the command's run, not the launcher's
    header = Path(status["result"]["details"]).read_text().split("\n\n")[0]
    assert f"# command: {command.argv[0]}" in header and str(launched) not in header
    assert runner.get(run_id).user_command == "./suite"


async def test_overlapping_runs_and_a_bounded_history(runner: Runner, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner_module, "MAX_KEPT_RUNS", 2)
    commands = [python(tmp_path, f"json.dump([{{'name': 't{i}', 'outcome': 'passed'}}] * {i + 1}, open(REPORT, 'w'))",
                       name=f"suite{i}") for i in range(3)]
    ids = [await runner.start(FakeAdapter(), command) for command in commands]  # all three at once
    results = [(await runner.status(run_id, wait_s=30))["result"] for run_id in ids]
    assert [r["summary"]["passed"] for r in results] == [1, 2, 3] and len(set(ids)) == 3
    fourth = await runner.start(FakeAdapter(), commands[0])
    with pytest.raises(RunNotFound):
        await runner.status(ids[0], wait_s=0)  # the oldest finished run is forgotten, its details file deleted
    assert not Path(results[0]["details"]).exists() and Path(results[2]["details"]).exists()
    assert (await runner.status(fourth, wait_s=30))["status"] == "completed"


def test_the_kept_history_holds_across_restarts_and_goes_with_a_traced_runs_session(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner_module, "MAX_KEPT_RUNS", 3)
    details = tmp_path / "details"
    details.mkdir()
    for i in range(5):  # what earlier daemons kept: run-0 is the oldest
        (details / f"run-{i}.log").write_text("output")
        os.utime(details / f"run-{i}.log", (1_000 + i, 1_000 + i))
    restarted = Runner(details)
    restarted.prune_files()
    assert sorted(p.name for p in details.iterdir()) == ["run-2.log", "run-3.log", "run-4.log"]
    restarted.note_session("run-3", "app-2026-11-24-10h00")
    assert (details / "run-3.session").stat().st_mode & 0o777 == 0o600
    restarted.forget_session_files("another-session")
    restarted.forget_session_files("app-2026-11-24-10h00")
    assert sorted(p.name for p in details.iterdir()) == ["run-2.log", "run-4.log"]


async def test_a_command_the_os_refuses_to_start_fails_the_run_instead_of_wedging_it(tmp_path: Path) -> None:
    runner = Runner(tmp_path / "details")
    run_id = await runner.start(FakeAdapter(), Command(["/bin/echo", "a\x00b"], tmp_path))
    status = await runner.status(run_id, wait_s=5)
    assert status["status"] == "failed" and "Could not start the tests" in status["error"], status
    await asyncio.wait_for(runner.close(), 10)  # nothing left waiting on a run that never started


async def test_close_kills_every_running_test(tmp_path: Path) -> None:
    runner = Runner(tmp_path / "details")
    body = "print('START waits', flush=True)\ntime.sleep(600)\n"
    ids = [await runner.start(FakeAdapter(), python(tmp_path, body, name=f"s{i}")) for i in range(2)]
    runs = [runner.get(i) for i in ids]
    await until(lambda: all(run.progress.current_test for run in runs))
    pids = [run.process.pid for run in runs if run.process]
    assert len(pids) == 2 and all(alive(pid) for pid in pids)
    await runner.close()
    assert [(await runner.status(i, wait_s=0))["status"] for i in ids] == ["failed", "failed"]
    assert not [pid for pid in pids if alive(pid)]


# ---- the stuck programs, end to end with the real thresholds ----

def stuck_runs(tmp_path: Path) -> dict[str, tuple[dict[str, Any], float, list[int]]]:
    """Build the programs and run them concurrently: deadlock (under an `sh` wrapper), spin, blocked_read, and
    steady printing for 12 s. Returns each one's final status, seconds to completion and every pid seen."""
    for source in PROGRAMS.glob("*.c"):
        subprocess.run(["gcc", "-g", "-O0", "-pthread", "-o", str(tmp_path / source.stem), str(source)], check=True)
    report = tmp_path / "steady.json"
    commands = {
        "deadlock": Command(["sh", "-c", f"{tmp_path / 'deadlock'}; echo finished"], tmp_path),
        "spin": Command([str(tmp_path / "spin")], tmp_path),
        "blocked_read": Command([str(tmp_path / "blocked_read")], tmp_path),
        "steady": Command(["sh", "-c", f"{tmp_path / 'steady'} 48 && echo '[{{\"name\": \"steady\", "
                                           f"\"outcome\": \"passed\"}}]' > {report}"], tmp_path, report=report),
    }

    async def main() -> dict[str, tuple[dict[str, Any], float, list[int]]]:
        runner = Runner(tmp_path / "details")
        started = time.monotonic()
        ids = {name: await runner.start(FakeAdapter(), command) for name, command in commands.items()}
        out = {}
        for name, run_id in ids.items():
            status = await runner.status(run_id, wait_s=60)
            detector = runner.get(run_id).detector
            out[name] = (status, time.monotonic() - started, list(detector.seen) if detector else [])
        await runner.close()
        return out

    return asyncio.run(main())


@pytest.fixture(scope="module")
def stuck(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, Any], float, list[int]]]:
    return stuck_runs(tmp_path_factory.mktemp("stuck-e2e"))


def stuck_entry(status: dict[str, Any]) -> dict[str, Any]:
    assert status["status"] == "completed", status
    result = status["result"]
    assert result["summary"]["stuck"] == 1 and len(result["stuck"]) == 1
    entry: dict[str, Any] = result["stuck"][0]
    return entry


@pytest.mark.parametrize("program", ["deadlock", "spin", "blocked_read"])
def test_stuck_programs_are_diagnosed_within_about_10s_and_their_tree_is_killed(
        stuck: dict[str, tuple[dict[str, Any], float, list[int]]], program: str) -> None:
    status, seconds, pids = stuck[program]
    entry = stuck_entry(status)
    assert 7.0 < seconds < 13.0, seconds  # silence >= ~8 s, confirmed on the next beat
    assert pids and not [pid for pid in pids if alive(pid)]
    assert entry["elapsedMs"] >= 7000 and entry["threads"]


def test_deadlock_entry_has_every_threads_stack_and_the_lock_takers(
        stuck: dict[str, tuple[dict[str, Any], float, list[int]]]) -> None:
    entry = stuck_entry(stuck["deadlock"][0])
    assert entry["diagnosis"].startswith("Deadlock: 0% CPU, identical stacks")
    assert set(entry["suggestedTraces"]) == {"transfer_funds", "audit_ledger"}
    names = [thread["name"] for thread in entry["threads"]]
    assert len(names) == 4 and names[0].startswith("sh ")  # the wrapper shown too, each with pid and command
    stacks = {thread["name"].split(" (")[0]: thread["stack"] for thread in entry["threads"]}
    assert any(f.startswith("transfer_funds at ") for f in stacks["transfer"])
    assert any(f.startswith("audit_ledger at ") for f in stacks["audit"])
    assert any("mutex_lock" in f for f in stacks["audit"])


def test_spin_entry_names_the_looping_function(stuck: dict[str, tuple[dict[str, Any], float, list[int]]]) -> None:
    entry = stuck_entry(stuck["spin"][0])
    assert entry["diagnosis"].startswith("Infinite loop: ") and "CPU in search_fixed_point" in entry["diagnosis"]
    assert entry["suggestedTraces"] == ["search_fixed_point"]


def test_blocked_read_is_waiting_on_io(stuck: dict[str, tuple[dict[str, Any], float, list[int]]]) -> None:
    entry = stuck_entry(stuck["blocked_read"][0])
    assert entry["diagnosis"].startswith("Waiting on I/O: 0% CPU, identical stacks")
    assert "wait_for_reply" in entry["diagnosis"] and entry["suggestedTraces"] == ["wait_for_reply"]


def test_steady_printer_runs_to_the_end(stuck: dict[str, tuple[dict[str, Any], float, list[int]]]) -> None:
    status, seconds, pids = stuck["steady"]
    assert status["status"] == "completed" and status["result"]["stuck"] == []
    assert status["result"]["summary"]["passed"] == 1 and seconds >= 12.0
    assert not [pid for pid in pids if alive(pid)]



# ---- a run never outlives its daemon ----

HOST = r"""
import asyncio, sys
from pathlib import Path
from strobe.testing.adapters.generic import GenericAdapter
from strobe.testing.model import TestCommand
from strobe.testing.runner import TestRunner

async def main():
    details, *argv = sys.argv[1:]
    runner = TestRunner(Path(details))
    run_id = await runner.start(GenericAdapter(), TestCommand(argv, Path(details).parent))
    print(runner.get(run_id).process.pid, flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""
# A leader with a child and a grandchild, all sleeping (`; true` keeps sh from exec()ing its last command).
FAMILY = ["sh", "-c", "(sleep 600; true) & sleep 600; true"]


def group_of(leader: int) -> dict[int, int]:
    """The live members of the process group `leader` leads: pid -> parent pid."""
    return {p.pid: p.ppid for p in all_processes() if p.pgrp == leader}


def reapers_of(parent: int) -> set[int]:
    """The reaper helpers a (stand-in) daemon started: its children running the reaper's source."""
    found = set()
    for p in all_processes():
        try:
            if p.ppid == parent and b"pidfd_open" in Path(f"/proc/{p.pid}/cmdline").read_bytes():
                found.add(p.pid)
        except OSError:
            continue
    return found


def pidfds_held_by(pid: int) -> list[str]:
    """The pids that the pidfds `pid` has open point at ("-1" for a process reaped since)."""
    held = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == "anon_inode:[pidfd]":
                info = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
                held += [line.split()[1] for line in info.splitlines() if line.startswith("Pid:")]
        except FileNotFoundError:
            continue
    return held


async def test_a_runner_killed_with_minus_9_takes_its_runs_whole_process_group_with_it(tmp_path: Path) -> None:
    """A stand-in daemon (a TestRunner in a process of its own) starts a run whose command forks a child and a
    grandchild, all in its group; killed with -9, it takes all of them with it, and its reaper ends too."""
    host = subprocess.Popen([sys.executable, "-c", HOST, str(tmp_path / "details"), *FAMILY],
                            stdout=subprocess.PIPE, text=True)
    pids: list[int] = []
    try:
        assert host.stdout is not None
        leader = int(host.stdout.readline())
        pids.append(leader)

        def whole_family() -> dict[int, int] | None:
            members = group_of(leader)
            grandchildren = [pid for pid, parent in members.items() if parent not in (leader, host.pid)]
            return members if len(members) == 4 and len(grandchildren) == 1 else None

        pids += [pid for pid in await until(whole_family) if pid != leader]
        reapers = reapers_of(host.pid)  # started by the run's start, before it returned
        pids += reapers
        host.kill()
        host.wait(30)
        started = time.monotonic()
        await until(lambda: not [pid for pid in pids if alive(pid)], timeout=10)
        print(f"the run's group (4 processes) and the reaper gone {time.monotonic() - started:.3f}s after the host")
        assert not group_of(leader) and len(reapers) == 1
    finally:
        host.kill()
        host.wait(30)
        kill_survivors(pids)


async def test_the_reaper_holds_a_runs_group_while_it_runs_only(tmp_path: Path) -> None:
    """Held from the start, let go once the run is over (cancelled, completed, or killed by close()): a daemon dying
    afterwards has nothing of it left to kill. The reaper reads its orders in turn, so once it holds only a later run,
    every earlier one has been let go. The runner's own reaper ends with the runner."""
    shared = Reaper()
    runner = Runner(tmp_path / "details", reaper=shared)
    own = Runner(tmp_path / "own")
    body = "print('START waits', flush=True)\ntime.sleep(600)\n"
    try:
        async def waiting(name: str) -> tuple[str, int]:
            run_id = await runner.start(FakeAdapter(), python(tmp_path, body, name=name))
            process = runner.get(run_id).process
            assert process is not None
            return run_id, process.pid

        cancelled, first = await waiting("first")
        helper = shared.pid
        assert helper is not None
        await until(lambda: pidfds_held_by(helper) == [str(first)])
        await runner.cancel(cancelled)
        quick = await runner.start(FakeAdapter(), python(tmp_path, "json.dump([], open(REPORT, 'w'))", name="quick"))
        assert (await runner.status(quick, wait_s=30))["status"] == "completed"
        _, last = await waiting("last")
        await until(lambda: pidfds_held_by(helper) == [str(last)])
        await runner.close()
        await until(lambda: pidfds_held_by(helper) == [])
        assert shared.pid == helper and alive(helper)  # a reaper passed in is its owner's to close

        before = reapers_of(os.getpid())
        await own.status(await own.start(FakeAdapter(), python(tmp_path, "pass", name="own")), wait_s=30)
        helpers = reapers_of(os.getpid()) - before
        assert len(helpers) == 1
        await own.close()
        assert not alive(helpers.pop())
    finally:
        await runner.close()
        await own.close()
        shared.close()
