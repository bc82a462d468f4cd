"""debug_test / debug_test_status through a real MCP client: detection, the async run, structured failures,
baselines, hung tests diagnosed and killed, and the errors a caller can get."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import StrobeClient, ToolError, poll, write_settings
from tests.testing.adapters.harness import copy_project

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
PROJECTS = Path(__file__).parents[1] / "targets" / "testprojects"


async def finished(strobe: StrobeClient, run_id: str, timeout: float = 180) -> dict[str, Any]:
    """Call debug_test_status until the run is no longer running (each call blocks up to 15 s)."""

    async def check() -> dict[str, Any] | None:
        status = await strobe.call("debug_test_status", testRunId=run_id)
        return None if status["status"] == "running" else status

    return await poll(check, timeout, f"test run {run_id} to finish")


async def test_a_pytest_project_runs_to_structured_results(strobe: StrobeClient, tmp_path: Path) -> None:
    project = copy_project("pytest_basic", tmp_path, sys.executable)
    started = await strobe.call("debug_test", projectRoot=str(project))
    assert started["status"] == "running" and started["framework"] == "pytest"
    status = await finished(strobe, started["testRunId"])
    assert status["status"] == "completed", status
    result = status["result"]
    assert result["framework"] == "pytest"
    assert {k: result["summary"][k] for k in ("passed", "failed", "skipped")} == {"passed": 5, "failed": 2,
                                                                                  "skipped": 2}
    negative = next(f for f in result["failures"] if "test_add_negative" in f["name"])
    assert Path(negative["file"]).name == "test_ops.py" and negative["line"] == 14
    assert "sum of negatives" in negative["message"] and negative["suggestedTraces"][0] == "calc.ops.*"
    assert "pytest" in negative["rerunCommand"] and "test_add_negative" in negative["rerunCommand"]
    details = Path(result["details"]).read_text()
    assert "test_add_negative" in details and "sum of negatives" in details

    # One test by name: only it runs; its duration now has a baseline from the first run.
    single = await strobe.call("debug_test", projectRoot=str(project), test="test_add_negative")
    result = (await finished(strobe, single["testRunId"]))["result"]
    assert result["summary"]["failed"] == 1 and result["summary"]["passed"] == 0


async def test_a_deadlocked_test_is_diagnosed_with_stacks_and_killed(strobe: StrobeClient, tmp_path: Path) -> None:
    binary = tmp_path / "deadlock"
    subprocess.run(["gcc", "-g", "-O0", "-pthread", "-o", str(binary), str(PROJECTS / "stuck" / "deadlock.c")],
                   check=True)
    started = await strobe.call("debug_test", projectRoot=str(tmp_path), framework="generic", command=str(binary))
    assert started["framework"] == "Generic"
    # A client that asks for progress gets notifications while debug_test_status waits (every ~2 s).
    notes: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append((progress, message))

    await strobe.session.call_tool("debug_test_status", {"testRunId": started["testRunId"]},
                                   progress_callback=on_progress)
    assert notes and all(message and "passed" in message for _, message in notes)
    status = await finished(strobe, started["testRunId"], timeout=90)
    assert status["status"] == "completed", status
    (stuck,) = status["result"]["stuck"]
    assert stuck["diagnosis"].startswith("Deadlock")
    frames = [frame for thread in stuck["threads"] for frame in thread["stack"]]
    assert any("transfer_funds" in frame for frame in frames) and any("audit_ledger" in frame for frame in frames)
    assert "transfer_funds" in " ".join(stuck["suggestedTraces"])
    assert subprocess.run(["pgrep", "-f", str(binary)], capture_output=True).returncode == 1  # killed


async def test_errors_say_what_to_do(strobe: StrobeClient, tmp_path: Path) -> None:
    with pytest.raises(ToolError) as unknown:
        await strobe.call("debug_test_status", testRunId="no-such-run")
    assert unknown.value.code == "TEST_RUN_NOT_FOUND"
    with pytest.raises(ToolError) as framework:
        await strobe.call("debug_test", projectRoot=str(tmp_path), framework="nunit")
    assert framework.value.code == "VALIDATION_ERROR" and "pytest" in framework.value.message
    with pytest.raises(ToolError) as generic:
        await strobe.call("debug_test", projectRoot=str(tmp_path))  # nothing detected: generic needs a command
    assert generic.value.code == "VALIDATION_ERROR" and "command" in generic.value.message
    with pytest.raises(ToolError) as pattern:
        await strobe.call("debug_test", projectRoot=str(tmp_path), framework="generic", command="/bin/true",
                          tracePatterns=["@nonsense"])
    assert pattern.value.code == "INVALID_PATTERN"


TRACED_TEST = r"""
#include <stdio.h>
__attribute__((noinline)) int add(int a, int b) { return a + b - (a < 0); }  /* wrong for negatives */
int g_checks;
__attribute__((noinline)) int check_sum(int a, int b, int expected) {
    g_checks++;
    int got = add(a, b);
    if (got != expected) printf("FAIL add(%d, %d) = %d, expected %d\n", a, b, got, expected);
    return got == expected;
}
int main(void) { return check_sum(2, 3, 5) && check_sum(-2, -3, -5) ? 0 : 1; }
"""


async def test_a_traced_run_records_function_events_under_its_session(strobe: StrobeClient, tmp_path: Path) -> None:
    source = tmp_path / "sum_test.c"
    source.write_text(TRACED_TEST)
    binary = tmp_path / "sum_test"
    subprocess.run(["gcc", "-g", "-O0", "-o", str(binary), str(source)], check=True)
    started = await strobe.call("debug_test", projectRoot=str(tmp_path), framework="generic", command=str(binary),
                                tracePatterns=["check_sum", "add"], watches={"add": [{"variable": "g_checks"}]})
    sid = started["sessionId"]
    status = await finished(strobe, started["testRunId"])
    assert status["status"] == "completed" and status["sessionId"] == sid
    assert status["result"]["summary"]["failed"] == 1
    exits = await strobe.all_events(sid, eventType="function_exit", verbose=True)
    # The calls of the test program, hooked after the gate exec()ed it: the failing one is there with its values.
    assert [(e["function"], e["returnValue"]) for e in exits if e["function"] == "check_sum"] == [
        ("check_sum", 1), ("check_sum", 0)]
    assert [e["returnValue"] for e in exits if e["function"] == "add"] == [5, -6]
    # The watch, set in the test program once it was hooked, is read at each traced call.
    assert [e["watchValues"]["g_checks"] for e in exits if e["function"] == "check_sum"] == [1, 2]
    assert {e["pid"] for e in exits} == {next(s for s in (await strobe.call("debug_list_sessions"))["sessions"]
                                              if s["sessionId"] == sid)["pid"]}


CHECK_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
/* Logs how it was run (STROBE_TEST_FILTER, arguments) to ran.log in its working directory, then checks. */
__attribute__((noinline)) int verify(int value) { return value == 42; }
int main(int argc, char **argv) {
    FILE *log = fopen("ran.log", "a");
    const char *filter = getenv("STROBE_TEST_FILTER");
    fprintf(log, "filter=%s", filter ? filter : "(unset)");
    for (int i = 1; i < argc; i++) fprintf(log, " [%s]", argv[i]);
    fputc('\n', log);
    fclose(log);
    if (argc > 1 && strcmp(argv[1], "chatty") == 0)
        for (;;) { printf("still checking\n"); fflush(stdout); usleep(100000); }  /* never silent, never done */
    if (!verify(41)) { printf("FAIL verify(41)\n"); return 1; }
    return 0;
}
"""


def check_project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "check.c").write_text(CHECK_PROGRAM)
    subprocess.run(["gcc", "-g", "-O0", "-o", str(project / "check"), str(project / "check.c")], check=True)
    return project


async def test_a_traced_generic_run_is_named_after_its_command_and_reruns_it(strobe: StrobeClient,
                                                                             tmp_path: Path) -> None:
    project = check_project(tmp_path)
    command = './check one "two words"'
    started = await strobe.call("debug_test", projectRoot=str(project), framework="generic", command=command,
                                tracePatterns=["verify"])
    status = await finished(strobe, started["testRunId"])
    assert status["status"] == "completed", status
    result = status["result"]
    (failure,) = result["failures"]  # named after the command, not the gate it was started behind
    assert failure["name"] == "./check one 'two words'" and "FAIL verify(41)" in failure["message"]
    header = Path(result["details"]).read_text().split("\n\n")[0]
    assert "# command: ./check one 'two words'" in header and "strobe-gate" not in header
    exits = await strobe.all_events(status["sessionId"], eventType="function_exit", verbose=True)
    assert [(e["function"], e["returnValue"]) for e in exits] == [("verify", 0)]  # traced all the same
    # Its rerunCommand, typed in a shell in the project, runs the same thing again.
    ran = (project / "ran.log").read_text().splitlines()
    assert ran == ["filter=(unset) [one] [two words]"]
    subprocess.run(failure["rerunCommand"], shell=True, cwd=project, timeout=60, capture_output=True)
    assert (project / "ran.log").read_text().splitlines() == ran * 2

    # A traced run past its timeoutMs: its stuck entry names the command too, and its stacks are the program's.
    started = await strobe.call("debug_test", projectRoot=str(project), framework="generic",
                                command="./check chatty", tracePatterns=["verify"], timeoutMs=5000)
    status = await finished(strobe, started["testRunId"])
    (stuck,) = status["result"]["stuck"]
    assert stuck["kind"] == "timeout" and stuck["name"] == "(whole run of ./check chatty)"
    assert any("main" in frame for thread in stuck["threads"] for frame in thread["stack"])
    assert subprocess.run(["pgrep", "-f", "check chatty"], capture_output=True).returncode == 1  # killed


SLOW_SUITE = """#!/bin/sh
# Two tests reported, then a third that never ends (but keeps talking, so it never looks stuck).
echo $$ > suite.pid
echo "PASS adds"
printf '<testsuite><testcase name="adds"/><testcase name="divides"><failure message="off by one"/></testcase>'\\
'</testsuite>' > "$STROBE_TEST_REPORT"
echo "START waits"
while :; do echo "still waiting"; sleep 0.1; done
"""


async def test_a_run_past_its_timeout_is_stopped_with_stacks_and_its_results_so_far(strobe: StrobeClient,
                                                                                   tmp_path: Path) -> None:
    suite = tmp_path / "suite.sh"
    suite.write_text(SLOW_SUITE)
    suite.chmod(0o755)
    for outside in (999, 86_400_001):  # 1 s to 24 h
        error = await strobe.error("debug_test", projectRoot=str(tmp_path), framework="generic",
                                   command="./suite.sh", timeoutMs=outside)
        assert error.code == "VALIDATION_ERROR" and "timeoutMs" in error.message
    started = await strobe.call("debug_test", projectRoot=str(tmp_path), framework="generic",
                                command="./suite.sh", timeoutMs=1000)
    status = await finished(strobe, started["testRunId"], timeout=60)
    assert status["status"] == "completed", status
    result = status["result"]
    assert {k: result["summary"][k] for k in ("passed", "failed", "stuck")} == {"passed": 1, "failed": 1, "stuck": 1}
    assert result["summary"]["durationMs"] < 30_000  # not the default limit (30 min for a whole run)
    (failure,) = result["failures"]
    assert failure["name"] == "divides" and failure["rerunCommand"] == "STROBE_TEST_FILTER=divides ./suite.sh"
    (stuck,) = result["stuck"]
    assert stuck["kind"] == "timeout" and stuck["elapsedMs"] >= 1000 and stuck["name"] == "(whole run of ./suite.sh)"
    assert stuck["diagnosis"].startswith("Timed out: still running after 1 s") and "timeoutMs" in stuck["diagnosis"]
    assert stuck["threads"] and all(thread["stack"] for thread in stuck["threads"])
    assert not Path(f"/proc/{(tmp_path / 'suite.pid').read_text().strip()}").exists()  # killed, and reaped


WAITING_SUITE = """#!/bin/sh
while [ ! -e release ]; do echo waiting; sleep 0.2; done
"""


async def test_running_answers_suggest_the_retry_delay_set_for_the_runs_project(
        strobe: StrobeClient, strobe_home: Path, tmp_path: Path) -> None:
    write_settings(strobe_home, {"test.statusRetryMs": 2500})  # global
    projects = [tmp_path / "tuned", tmp_path / "plain"]
    for project in projects:
        project.mkdir()
        (project / "wait.sh").write_text(WAITING_SUITE)
        (project / "wait.sh").chmod(0o755)
    write_settings(projects[0] / ".strobe", {"test.statusRetryMs": 1234})  # the project's own
    runs = [(await strobe.call("debug_test", projectRoot=str(project), framework="generic",
                               command="./wait.sh"))["testRunId"] for project in projects]
    try:
        statuses = await asyncio.gather(*(strobe.call("debug_test_status", testRunId=run) for run in runs))
        assert [status["status"] for status in statuses] == ["running", "running"]
        assert [status["retryAfterMs"] for status in statuses] == [1234, 2500]
        assert "1.234s" in statuses[0]["nextSteps"] and runs[0] in statuses[0]["nextSteps"]
        assert "2.5s" in statuses[1]["nextSteps"]
    finally:
        for project in projects:
            (project / "release").touch()
    for run in runs:
        status = await finished(strobe, run, timeout=60)
        assert status["status"] == "completed" and "retryAfterMs" not in status
        assert status["result"]["summary"]["passed"] == 1
