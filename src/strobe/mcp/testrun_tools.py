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
                                         (req.tracePatterns or []) if traced else None, watches)
    settings = ctx.settings.for_project(req.projectRoot)
    result["nextSteps"] = (
        f"Call debug_test_status({{testRunId: '{result['testRunId']}'}}): it waits up to 15s for the result, "
        f"then reports progress (call it again; about every {settings.test_status_retry_ms / 1000:.0f}s is "
        "plenty)."
    )
    return result


async def test_status(ctx: ToolContext, req: TestStatusRequest) -> dict[str, Any]:
    return await ctx.manager.tests.status(req.testRunId, STATUS_WAIT_S, ctx.progress)


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
        "stacks are captured.\n"
        'Example: {"projectRoot": "/home/me/calc", "test": "parse_negative"}',
        run_tests,
    ),
    Tool(
        "debug_test_status",
        TestStatusRequest,
        "The state of a debug_test run. Blocks up to 15s waiting for it to finish, so call it right after "
        "debug_test and again after each 'running' answer. Running: {progress: {elapsedMs, passed, failed, skipped, "
        "currentTest, currentTestElapsedMs, currentTestBaselineMs, phase, warnings}}. Completed: {result: "
        "{framework, summary {passed, failed, skipped, stuck?, durationMs}, failures [{name, file, line, message, "
        "suggestedTraces}], stuck [{name, diagnosis, threads, suggestedTraces}], details (a file with every test's "
        "outcome and output), noTests/project/hint when nothing was found}}. Failed: {error} saying what to fix.\n"
        'Example: {"testRunId": "5f0c6c1e-7d0a-4a57-9a53-1f0e1b7f2a10"}',
        test_status,
    ),
)
