"""The end of a test run: its result as debug_test_status shows it (summary, failures with suggested traces and
rerun commands, what got stuck, a hint when no test ran) and the report appended to its details file."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from strobe.testing.model import Outcome, ParsedRun, TestCase
from strobe.testing.run_state import TestRun

log = logging.getLogger(__name__)


def run_result(run: TestRun, cases: list[TestCase], duration_ms: int) -> dict[str, Any]:
    """debug_test_status's `result` of a run that completed (or was killed as stuck or over its time limit)."""
    counts = {o: sum(1 for c in cases if c.outcome is o) for o in Outcome}
    if not cases and run.verdict:  # killed before any report: the live counts are all there is
        counts = {Outcome.PASSED: run.progress.passed, Outcome.FAILED: run.progress.failed,
                  Outcome.SKIPPED: run.progress.skipped}
    summary: dict[str, Any] = {"passed": counts[Outcome.PASSED], "failed": counts[Outcome.FAILED],
                               "skipped": counts[Outcome.SKIPPED], "durationMs": duration_ms}
    result: dict[str, Any] = {"framework": run.adapter.display_name, "summary": summary,
                              "failures": [_failure(run, c) for c in cases
                                           if c.outcome is Outcome.FAILED],
                              "stuck": [], "details": str(run.details)}
    if run.verdict:
        summary["stuck"] = 1
        current = run.progress.current_started_ns
        elapsed = (time.monotonic_ns() - current) // 1_000_000 if current else duration_ms
        whole = run.user_command or Path(run.command.argv[0]).name
        name = run.progress.current_test or run.test_name or f"(whole run of {whole})"
        result["stuck"].append({"name": name, "kind": run.verdict.kind.value, "elapsedMs": elapsed,
                                "diagnosis": run.verdict.diagnosis,
                                "threads": run.verdict.threads(), "suggestedTraces": run.verdict.suggested_traces})
    elif not cases:
        info = run.adapter.project_info(run.project_root)
        result["noTests"] = True
        result["project"] = {"language": info.language, "buildSystem": info.build_system,
                             "testFiles": info.test_files}
        result["hint"] = _no_tests_hint(run)
    return result


def _failure(run: TestRun, case: TestCase) -> dict[str, Any]:
    adapter = run.adapter
    try:
        traces = adapter.suggest_traces(case)
    except Exception:
        log.exception("%s.suggest_traces failed", adapter.name)
        traces = []
    failure: dict[str, Any] = {"name": case.name, "message": case.message or "Failed (no message in the report)",
                               "suggestedTraces": traces}
    try:
        failure["rerunCommand"] = adapter.rerun_command(run.project_root, case.name, run.user_command)
    except Exception:  # a hint only
        log.exception("%s.rerun_command failed", adapter.name)
    if case.file:
        failure["file"] = case.file
    if case.line is not None:
        failure["line"] = case.line
    return failure


def write_results(run: TestRun, parsed: ParsedRun, code: int) -> None:
    """Append the report's cases (and the stuck verdict) to the run's details file."""
    if run.log_file is None:
        return
    out = run.log_file
    out.write(f"\n# ---- exit status {code}; {len(parsed.cases)} test(s) in the report ----\n")
    if parsed.error:
        out.write(f"# report error: {parsed.error}\n")
    for case in parsed.cases:
        where = f" ({case.file}:{case.line})" if case.file else ""
        took = f" [{case.duration_ms:.0f} ms]" if case.duration_ms is not None else ""
        out.write(f"\n{case.outcome.value.upper()} {case.name}{where}{took}\n")
        for label, text in (("message", case.message), ("output", case.output)):
            if text:
                out.write(f"  {label}:\n" + "".join(f"    {line}\n" for line in text.splitlines()))
        if case.stack:
            out.write("  stack:\n" + "".join(f"    {frame}\n" for frame in case.stack))
    if run.verdict:
        out.write(f"\nSTUCK: {run.verdict.diagnosis}\n")
        for thread in run.verdict.threads():
            out.write(f"  thread {thread['name']}:\n")
            out.write("".join(f"    {frame}\n" for frame in thread["stack"]))


def _no_tests_hint(run: TestRun) -> str:
    name = run.adapter.display_name
    if run.test_name:
        return (f"No test matched '{run.test_name}'. The name is matched as a substring where {name} allows: check "
                "the spelling, or run without `test` to see every test's name.")
    level = f" at level '{run.level.value}' (omit `level` to run them all)" if run.level else ""
    return (f"{name} ran but reported no tests{level}. Check that the test files follow {name}'s naming "
            f"conventions, or pass `framework` if {name} is the wrong framework for this project.")
