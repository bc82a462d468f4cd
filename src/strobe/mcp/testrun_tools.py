"""debug_test, debug_test_status."""

from __future__ import annotations

from typing import Any

from strobe.mcp.models import TestRequest, TestStatusRequest
from strobe.mcp.registry import Tool, ToolContext
from strobe.mcp.trace_tools import watch_specs

STATUS_WAIT_S = 15.0


async def run_tests(ctx: ToolContext, req: TestRequest) -> dict[str, Any]:
    watches, _ = watch_specs(req.watches)
    traced = req.tracePatterns is not None or req.watches is not None  # either one: the run is traced
    result = await ctx.manager.tests.run(req.projectRoot, req.framework, req.level, req.test, req.command, req.env,
                                         (req.tracePatterns or []) if traced else None, watches, req.timeoutMs)
    settings = ctx.settings.for_project(req.projectRoot)
    result["nextSteps"] = (
        f"Call debug_test_status({{testRunId: '{result['testRunId']}'}}): it waits up to {STATUS_WAIT_S:g}s for the "
        f"result, then reports progress (call it again; about every {_seconds(settings.test_status_retry_ms)} is "
        "plenty)."
    )
    if settings.warnings:
        result["warnings"] = list(settings.warnings)
    return result


async def test_status(ctx: ToolContext, req: TestStatusRequest) -> dict[str, Any]:
    status = await ctx.manager.tests.status(req.testRunId, STATUS_WAIT_S, ctx.progress)
    if status["status"] == "running":  # the test.statusRetryMs of the run's project (or the global one)
        settings = ctx.settings.for_project(ctx.manager.tests.project_root(req.testRunId))
        status["retryAfterMs"] = settings.test_status_retry_ms
        status["nextSteps"] = (
            f"Still running: wait about {_seconds(settings.test_status_retry_ms)} (retryAfterMs), then call "
            f"debug_test_status({{testRunId: '{req.testRunId}'}}) again; it waits up to {STATUS_WAIT_S:g}s for "
            "the result."
        )
        if settings.warnings:
            status["warnings"] = list(settings.warnings)
    return status


def _seconds(ms: int) -> str:
    return f"{ms / 1000:g}s"


TOOLS = (
    Tool(
        "debug_test",
        TestRequest,
        "Run a project's tests and get structured results: use it instead of running test commands in a shell. "
        "Detects the framework from projectRoot (cargo, go test, pytest, unittest, Catch2, GoogleTest, Jest, "
        "Vitest, Mocha, node --test, Bun, Deno; 'generic' runs any command and reads a JUnit report from "
        "$STROBE_TEST_REPORT if it writes one). Returns {testRunId, status: 'running', framework} at once; then call "
        "debug_test_status. `test` runs only the tests whose name contains it; `level` picks unit, integration or "
        "e2e tests. Hung tests are detected (no output, CPU and stacks sampled) and killed after their threads' "
        "stacks are captured; so is a run past its `timeoutMs` (default: the level's limit).\n"
        'Example: {"projectRoot": "/home/me/calc", "test": "parse_negative"}',
        run_tests,
    ),
    Tool(
        "debug_test_status",
        TestStatusRequest,
        "The state of a debug_test run. Blocks up to 15s waiting for it to finish, so call it right after "
        "debug_test and again after each 'running' answer (after about retryAfterMs). Running: {progress: {elapsedMs, "
        "passed, failed, skipped, currentTest, currentTestElapsedMs, currentTestBaselineMs, phase, warnings}, "
        "retryAfterMs}. Completed: {result: {framework, summary {passed, failed, skipped, stuck?, durationMs}, "
        "failures [{name, file, line, message, suggestedTraces, rerunCommand}], stuck [{name, kind (deadlock, "
        "infinite_loop, waiting_on_io, sleeping, hung, timeout), diagnosis, threads, suggestedTraces}], details (a "
        "file with every test's "
        "outcome and output), noTests/project/hint when nothing was found}}. Failed: {error} saying what to fix.\n"
        'Example: {"testRunId": "5f0c6c1e-7d0a-4a57-9a53-1f0e1b7f2a10"}',
        test_status,
    ),
)
