"""debug_test's runs as the daemon keeps them: picking the adapter, building its command, running it through
the plain-subprocess runner, and the per-test duration baselines kept in the store."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from strobe.daemon.js_suggestions import keep_selecting
from strobe.daemon.runtimes import RuntimeKind, runtime_for
from strobe.daemon.tracing import SessionTrace, parse_patterns
from strobe.daemon.watches import WatchSpec
from strobe.errors import ValidationError
from strobe.instrument import nodetracer
from strobe.instrument.reaper import Reaper
from strobe.paths import private_dir
from strobe.store import test_durations
from strobe.testing import adapters
from strobe.testing.model import TestCommand, TestLevel
from strobe.testing.run_state import TestRun
from strobe.testing.runner import TestRunner

log = logging.getLogger(__name__)

Submit = Callable[[Callable[[Any], Any]], Any]  # Writer.call: runs on the writer's connection, in the background
Read = Callable[[Callable[[Any], Any]], Awaitable[Any]]
Report = Callable[[float, float | None, str | None], Awaitable[None]]  # (progress, total, message)
Attach = Callable[[int, str, str, list[str], Sequence[WatchSpec], Path | None], Awaitable[tuple[str, SessionTrace]]]
"""(pid, program, project root, patterns, watches, the JavaScript tracer's directory or None) -> the session id and
its trace state (which patterns selected functions in the processes of the run)."""
JAVASCRIPT_FRAMEWORKS = frozenset({"jest", "vitest", "mocha", "nodetest", "bun"})
"""Test runs whose node processes get the JavaScript tracer's preload when traced (`bun test` as its own
`--preload` option: in BUN_OPTIONS it would turn the subcommand into a script name, see runtimes/node.py)."""
# The traced run's first process: blocks reading the FIFO ($0) until the session is attached, then becomes the
# test command: the program $1 (see _program) with the command's arguments ($2, the command's own argv[0], is
# dropped). `read`, `shift` and `exec` are shell builtins: nothing is forked before the exec.
_GATE_SCRIPT = 'read _ < "$0"; program=$1; shift 2; exec "$program" "$@"'


def _open_gate(gate: Path) -> None:
    """Let the gated command go on: O_RDWR never blocks on a FIFO, whether or not the reader is there yet."""
    fd = os.open(gate, os.O_RDWR | os.O_NONBLOCK)
    try:
        os.write(fd, b"go\n")
    finally:
        os.close(fd)


def _program(command: TestCommand) -> str:
    """The program the gate exec()s: a relative path (`./check`) made absolute from the command's cwd (the session
    takes the path an exec() names as the program's, and would look for `./check` from the daemon's); a name on
    PATH as it is."""
    program = command.argv[0]
    return os.path.normpath(os.path.join(command.cwd, program)) if os.sep in program else program


PROGRESS_EVERY_S = 2.0


class TestRuns:
    """Every test run of this daemon (plain subprocesses; see testing/runner.py)."""

    __test__ = False  # not a pytest test class

    def __init__(self, home: Path, submit: Submit, read: Read, attach: Attach, reaper: Reaper | None = None) -> None:
        """`reaper`: the launcher's, so one helper process holds both launched programs and test runs."""
        self._home = home
        self._dir = home / "tests"
        self._submit, self._read, self._attach = submit, read, attach
        self._durations: dict[tuple[str, str], list[float]] = {}
        self._sessions: dict[str, str] = {}  # test run id -> the session tracing it
        self._traces: dict[str, SessionTrace] = {}  # test run id -> its session's trace state (kept past its end)
        self._checked: set[str] = set()  # runs whose failures' suggestions were checked against the project
        self.runner = TestRunner(self._dir, baselines=self._baseline, record_durations=self._record, reaper=reaper)

    async def start(self) -> None:
        self._durations = await self._read(test_durations.load_all)
        self.runner.prune_files()  # the files of runs a previous daemon kept count against the limit too

    def forget_session(self, session_id: str) -> None:
        """A deleted or purged session takes the files of the test run it traced with it."""
        self.runner.forget_session_files(session_id)

    async def close(self) -> None:
        await self.runner.close()

    async def run(
        self, project_root: str, framework: str | None, level: str | None, test: str | None, command: str | None,
        env: dict[str, str], trace_patterns: list[str] | None = None, watches: Sequence[WatchSpec] = (),
        timeout_ms: int | None = None,
    ) -> dict[str, Any]:
        """Start a run; returns debug_test's immediate response. With trace_patterns the run is traced: its
        command waits on a FIFO until a session is attached to it, then exec()s the tests (gated, so the
        patterns are hooked in the test program and every child; `watches` are set in the test program once it is
        hooked) and its sessionId is in every status. `timeout_ms`: the run's own time limit (else its level's)."""
        root = Path(project_root)
        if not root.is_dir():
            raise ValidationError(f"projectRoot '{project_root}' is not a directory. Pass the project's absolute path.")
        if framework is not None:
            adapter = adapters.by_name(framework)
        else:
            adapter, score = adapters.detect(root, command)
            log.info("tests in %s: %s (confidence %d)", project_root, adapter.name, score)
        self._forget_old()
        run_id = str(uuid.uuid4())
        report_dir = self._dir / f"{run_id}-reports"
        private_dir(report_dir)
        private_dir(self._dir)
        test_level = TestLevel(level) if level is not None else None
        if test is not None:
            built = adapter.single_test_command(root, test, command, report_dir)
        else:
            built = adapter.suite_command(root, test_level, command, report_dir)
        built = dataclasses.replace(built, env={**built.env, **env})
        timeout_s = timeout_ms / 1000 if timeout_ms is not None else None
        if trace_patterns is None:
            await self.runner.start(adapter, built, test, test_level, project_root=root, run_id=run_id,
                                    user_command=command, timeout_s=timeout_s)
            return {"testRunId": run_id, "status": "running", "framework": adapter.display_name}
        parse_patterns(trace_patterns, project_root)  # a bad pattern is refused before anything runs
        tracer_dir = None
        if adapter.name in JAVASCRIPT_FRAMEWORKS:  # the preload is in every node process the run starts
            tracer_env, tracer_dir = runtime_for(RuntimeKind.NODE).launch_env(self._home, built.env)
            built = dataclasses.replace(built, env=tracer_env)
            if adapter.name == "bun":
                built = dataclasses.replace(built, argv=nodetracer.bun_test_argv(built.argv))
        gate = report_dir / "strobe-gate"
        os.mkfifo(gate, 0o600)
        # The gate runs in front of the command: the run is still shown, parsed and rerun as the command itself.
        await self.runner.start(adapter, built, test, test_level, project_root=root, run_id=run_id,
                                launcher=["/bin/sh", "-c", _GATE_SCRIPT, str(gate), _program(built)],
                                user_command=command,
                                timeout_s=timeout_s)
        run = self.runner.get(run_id)
        try:
            if run.process is None:  # it could not start: the run's status says why
                return {"testRunId": run_id, "status": "running", "framework": adapter.display_name}
            session_id, trace = await self._attach(run.process.pid, _program(built), project_root, trace_patterns,
                                                   watches, tracer_dir)
        except BaseException:
            await self.runner.cancel(run_id)  # the caller gets the error: no untraced run goes on unseen
            raise
        finally:
            _open_gate(gate)  # never leave the gated command waiting
        self._sessions[run_id] = session_id
        self._traces[run_id] = trace
        self.runner.note_session(run_id, session_id)
        return {"testRunId": run_id, "status": "running", "framework": adapter.display_name, "sessionId": session_id}

    async def status(self, run_id: str, wait_s: float, report: Report | None = None) -> dict[str, Any]:
        """debug_test_status: waits up to wait_s for the run to end; meanwhile `report` gets the counts every
        PROGRESS_EVERY_S (MCP progress notifications, for clients that asked for them)."""
        run = self.runner.get(run_id)
        deadline = time.monotonic() + wait_s
        while not run.done.is_set() and (remaining := deadline - time.monotonic()) > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(run.done.wait(), min(PROGRESS_EVERY_S, remaining))
            if report is not None and not run.done.is_set():
                progress = (await self.runner.status(run_id, 0))["progress"]
                done = progress["passed"] + progress["failed"] + progress["skipped"]
                current = f", running {progress['currentTest']}" if progress.get("currentTest") else ""
                await report(done, None, f"{progress['passed']} passed, {progress['failed']} failed, "
                             f"{progress['skipped']} skipped{current}")
        await self._check_suggestions(run)
        status = await self.runner.status(run_id, 0)
        if run_id in self._sessions:
            status["sessionId"] = self._sessions[run_id]
        if run.done.is_set() and run_id in self._traces:
            trace = self._traces[run_id]
            if unmatched := trace.never_matched() + trace.tracer_notes():
                status["traceWarnings"] = unmatched
        return status

    def project_root(self, run_id: str) -> Path:
        """The project a run tests (its settings apply to it)."""
        return self.runner.get(run_id).project_root

    def _forget_old(self) -> None:
        """What this keeps per run goes with the runs the runner forgets (it keeps the last MAX_KEPT_RUNS)."""
        for run_id in [r for r in {*self._sessions, *self._traces, *self._checked} if not self.runner.known(r)]:
            self._sessions.pop(run_id, None)
            self._traces.pop(run_id, None)
            self._checked.discard(run_id)

    async def _check_suggestions(self, run: TestRun) -> None:
        """Once a JavaScript run is over, its failures suggest only patterns that select a function of the project
        (daemon/js_suggestions.py), as a traced rerun would find them."""
        if (run.status != "completed" or run.result is None or run.adapter.name not in JAVASCRIPT_FRAMEWORKS
                or run.id in self._checked):
            return
        self._checked.add(run.id)
        try:
            await asyncio.to_thread(keep_selecting, run.result.get("failures") or [], run.project_root)
        except Exception:  # the suggestions stay as the adapter made them
            log.exception("checking the trace suggestions of test run %s failed", run.id)

    def _baseline(self, framework: str, test: str) -> float | None:
        kept = self._durations.get((framework, test))
        return sum(kept) / len(kept) if kept else None

    def _record(self, framework: str, durations: list[tuple[str, float]]) -> None:
        for name, ms in durations:
            kept = self._durations.setdefault((framework, name), [])
            kept.insert(0, ms)
            del kept[test_durations.KEPT_PER_TEST:]
        now = int(time.time() * 1000)
        self._submit(lambda c: test_durations.record(c, framework, durations, now))  # lands in the background
