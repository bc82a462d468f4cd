"""Test runs as plain subprocesses (no Frida): the debug_test path taken when nothing is to be traced.

A run spawns the adapter's command in its own session (so the whole tree can be killed), streams its output
into the adapter's live progress and a details file, samples the stuck detector every couple of seconds, and
enforces a hard time limit per level (or the run's own `timeout_s`). At the end the adapter parses the framework's
report and the run's result takes the shape of debug_test_status's response (testing/results.py). Runs are
asyncio tasks; several may overlap.

Child exit is watched with a pidfd rather than asyncio's subprocess support, which in Python 3.11 does not
report an exit while a forgotten grandchild still holds the output pipes: here the run ends when the test
process does, and whatever it left behind is killed.

A run never outlives the daemon, however the daemon ends (kill -9 included): from the moment Popen returns until the
run is over, the test command's process group (its own, as the leader of a new session) is held by the reaper
(instrument/launcher.py, `Reaper.hold_group`), a helper process that SIGKILLs the whole group, grandchildren
included, as soon as the daemon is gone. PR_SET_PDEATHSIG would not do: it covers the leader only, not what it forks.
Not covered: the ms inside Popen, from its fork to its exec (a daemon dying then leaves the tests running), and
processes that left the group (setsid, setpgid): the daemon kills those at the run's end (`_kill`), not after its death.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from strobe.errors import TestRunNotFound, ValidationError
from strobe.instrument.reaper import Reaper
from strobe.paths import private_dir, private_opener
from strobe.testing.adapters.base import FinishedRun, TestAdapter
from strobe.testing.model import Outcome, ParsedRun, TestCommand, TestLevel
from strobe.testing.results import run_result, write_results
from strobe.testing.run_state import TestRun
from strobe.testing.stacks import all_processes, pipe_holders
from strobe.testing.stuck import SAMPLE_INTERVAL_S, StuckDetector

log = logging.getLogger(__name__)

HARD_TIMEOUTS_S: dict[TestLevel | None, float] = {
    TestLevel.UNIT: 5 * 60, TestLevel.INTEGRATION: 10 * 60, TestLevel.E2E: 30 * 60, None: 30 * 60}  # None: all
MIN_TIMEOUT_S, MAX_TIMEOUT_S = 1.0, 24 * 3600.0  # bounds of a run's own time limit (debug_test's timeoutMs)
MAX_KEPT_RUNS = 50  # finished runs remembered (and their details files kept, across daemon restarts)
SESSION_SUFFIX = ".session"  # beside a traced run's details file: the id of the session that traced it
DRAIN_AFTER_EXIT_S = 5.0  # output still buffered in the pipes after the test process ended
READ_CHUNK = 65536

Baselines = Callable[[str, str], float | None]  # (framework, test name) -> average duration in ms
RecordDurations = Callable[[str, list[tuple[str, float]]], None]  # (framework, [(test name, ms)])
DetectorFactory = Callable[..., StuckDetector]


class TestRunner:
    """Every plain-subprocess test run of the daemon: start, poll, cancel, close."""

    __test__ = False

    def __init__(self, details_dir: Path, *, baselines: Baselines | None = None,
                 record_durations: RecordDurations | None = None,
                 timeouts: Mapping[TestLevel | None, float] | None = None,
                 sample_interval_s: float = SAMPLE_INTERVAL_S,
                 detector_factory: DetectorFactory = StuckDetector, reaper: Reaper | None = None) -> None:
        """`reaper`: one to share (its owner closes it); by default the runner starts its own on its first run."""
        self.details_dir = details_dir
        self._baselines, self._record = baselines, record_durations
        self._timeouts = {**HARD_TIMEOUTS_S, **(timeouts or {})}
        self._interval, self._new_detector = sample_interval_s, detector_factory
        self._runs: dict[str, TestRun] = {}
        self._reaper, self._own_reaper = reaper or Reaper(), reaper is None

    # ---- public API ----

    async def start(self, adapter: TestAdapter, command: TestCommand, test_name: str | None = None,
                    level: TestLevel | None = None, *, project_root: Path | None = None,
                    run_id: str | None = None, launcher: Sequence[str] = (), user_command: str | None = None,
                    timeout_s: float | None = None) -> str:
        """Spawn the command and return the run's id at once. A command that cannot start still gets an id: its
        status is "failed" with an error saying what to fix.

        `launcher`: argv run in front of the command's own (a traced run's gate, which exec()s the command): the
        run is still shown, parsed and rerun as `command`. `user_command`: debug_test's `command`, for rerun
        commands. `timeout_s`: the run's own time limit (MIN_TIMEOUT_S to MAX_TIMEOUT_S), instead of its level's."""
        if not command.argv:
            raise ValidationError("The test command is empty: the adapter built no argv. Pass `framework` to pick "
                                  "another adapter, or `command` with the test binary.")
        if timeout_s is not None and not MIN_TIMEOUT_S <= timeout_s <= MAX_TIMEOUT_S:
            raise ValidationError(f"A test run's time limit must be from {MIN_TIMEOUT_S:g} s to "
                                  f"{MAX_TIMEOUT_S / 3600:g} h; got {timeout_s:g} s.")
        run_id = run_id or str(uuid.uuid4())
        private_dir(self.details_dir)
        run = TestRun(run_id, adapter, command, test_name, level, project_root or command.cwd,
                      self.details_dir / f"{run_id}.log", user_command=user_command, launcher=list(launcher),
                      timeout_s=timeout_s)
        self._runs[run_id] = run
        self._evict()
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **command.env}  # Python test runners: lines as they happen
        try:
            run.process = subprocess.Popen([*launcher, *command.argv], cwd=command.cwd, env=env,
                                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           start_new_session=True)
        except (OSError, ValueError, TypeError) as exc:  # ValueError: a NUL or a bad name slipped through
            run.fail(_spawn_error(TestCommand([*launcher, *command.argv], command.cwd) if launcher else command, exc))
            run.done.set()
            return run_id
        self._reaper.hold_group(run.process.pid)  # until _supervise lets go: killed with the daemon, however it ends
        run.pipes = {os.fstat(pipe.fileno()).st_ino for pipe in (run.process.stdout, run.process.stderr) if pipe}
        run.detector = self._new_detector(run.process.pid, time.monotonic(), adapter.stack_kind)
        run.task = asyncio.create_task(self._supervise(run), name=f"test-run-{run_id}")
        return run_id

    def known(self, run_id: str) -> bool:
        """Whether the run is still remembered (finished runs beyond MAX_KEPT_RUNS are forgotten)."""
        return run_id in self._runs

    def get(self, run_id: str) -> TestRun:
        run = self._runs.get(run_id)
        if run is None:
            raise TestRunNotFound(
                f"No test run with ID '{run_id}'. Runs live until the daemon restarts (the last {MAX_KEPT_RUNS} "
                "finished ones are kept): check the ID from debug_test's response, or start a new run with debug_test.")
        return run

    async def status(self, run_id: str, wait_s: float = 15.0) -> dict[str, Any]:
        """debug_test_status's response: waits up to `wait_s` for the run to finish, then reports where it is."""
        run = self.get(run_id)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.done.wait(), timeout=wait_s)
        if not run.done.is_set():
            return {"testRunId": run.id, "status": "running", "progress": self._progress(run)}
        if run.status == "failed":
            return {"testRunId": run.id, "status": "failed", "error": run.error}
        return {"testRunId": run.id, "status": "completed", "result": run.result}

    async def cancel(self, run_id: str) -> None:
        """Kill the run's process tree; the run ends as "failed" (cancelled)."""
        run = self.get(run_id)
        if not run.done.is_set():
            run.cancelled = True
            await self._kill(run)
            await run.done.wait()

    async def close(self) -> None:
        """Kill every running test (daemon shutdown)."""
        await asyncio.gather(*(self.cancel(run.id) for run in list(self._runs.values()) if not run.done.is_set()))
        if self._own_reaper:
            await asyncio.to_thread(self._reaper.close)

    # ---- the run ----

    async def _supervise(self, run: TestRun) -> None:
        assert run.process is not None and run.process.stdout is not None and run.process.stderr is not None
        loop = asyncio.get_running_loop()
        closed = {"stdout": asyncio.Event(), "stderr": asyncio.Event()}
        try:
            run.log_file = run.details.open("w", encoding="utf-8", errors="replace", buffering=1)  # tail -f
            run.log_file.write(f"# strobe test run {run.id}\n# command: {shlex.join(run.command.argv)}\n"
                               f"# cwd: {run.command.cwd}\n# framework: {run.adapter.display_name}\n")
            if run.launcher:
                run.log_file.write("# traced: held at a gate until its session was attached\n")
            if run.timeout_s is not None:
                run.log_file.write(f"# time limit: {_duration(run.timeout_s)}\n")
            run.log_file.write("\n")
            for stream, pipe in (("stdout", run.process.stdout), ("stderr", run.process.stderr)):
                os.set_blocking(pipe.fileno(), False)
                loop.add_reader(pipe.fileno(), self._on_readable, run, stream, pipe.fileno(), closed[stream], [])
            await self._watch(run)
            await self._kill(run)  # whatever the test left running
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*(e.wait() for e in closed.values())), DRAIN_AFTER_EXIT_S)
            await self._finish(run)
        except Exception as exc:  # a bug here must still end the run, with the process tree gone
            log.exception("test run %s failed", run.id)
            await self._kill(run)
            run.fail(f"Internal error while running the tests: {exc!r}. The output so far is in {run.details}.")
        finally:
            for stream, pipe in (("stdout", run.process.stdout), ("stderr", run.process.stderr)):
                if not closed[stream].is_set():
                    loop.remove_reader(pipe.fileno())
                pipe.close()
            if run.process.poll() is None:  # this task was cancelled mid-run: the test must not outlive it
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(run.process.pid, signal.SIGKILL)
                run.process.wait()
            self._reaper.let_go_group(run.process.pid)  # nothing of the group is left, the leader is reaped
            if run.log_file:
                run.log_file.close()
            run.done.set()

    def _on_readable(self, run: TestRun, stream: str, fd: int, closed: asyncio.Event, partial: list[bytes]) -> None:
        """Read what the pipe has; complete lines go to the details file and the adapter. `partial` holds the
        chunks of an unfinished line (kept as a list: a huge line without newlines must not cost O(n²))."""
        try:
            data = os.read(fd, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            run.output[stream].append(data)
            if run.detector:
                run.detector.output_seen(time.monotonic())
            if b"\n" not in data:
                partial.append(data)
                return
            *lines, rest = (b"".join(partial) + data).split(b"\n")
            partial[:] = [rest] if rest else []
        else:
            asyncio.get_running_loop().remove_reader(fd)
            closed.set()
            lines = [b"".join(partial)] if partial else []
            partial.clear()
        for raw in lines:
            line = raw.decode(errors="replace").rstrip("\r")
            if run.log_file:
                run.log_file.write(f"[stderr] {line}\n" if stream == "stderr" else f"{line}\n")
            try:
                run.adapter.on_line(line, stream, run.progress, time.monotonic_ns())
            except Exception:  # live progress is best effort; the report decides the result
                log.exception("%s.on_line failed on %r", run.adapter.name, line)

    async def _watch(self, run: TestRun) -> None:
        """Until the test process exits: sample the stuck detector, enforce the hard limit, kill when stuck."""
        assert run.process is not None and run.detector is not None
        exited = asyncio.Event()
        loop = asyncio.get_running_loop()
        pidfd = os.pidfd_open(run.process.pid)
        loop.add_reader(pidfd, exited.set)
        # the run's own limit, else its level's (a single test without a level gets the whole run's limit)
        limit = run.timeout_s if run.timeout_s is not None else self._timeouts[run.level]
        deadline, next_sample = run.started + limit, run.started + self._interval
        try:
            while not exited.is_set():
                wake = min(next_sample, deadline) - time.monotonic() if not run.verdict else 1.0
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(exited.wait(), max(0.0, wake))
                if exited.is_set():
                    break
                if run.verdict:  # killed, yet still there (uninterruptible sleep?): try again each second
                    await self._kill(run)
                    continue
                now = time.monotonic()
                if now >= deadline:
                    if run.timeout_s is not None:
                        what = "this run (its timeoutMs)"
                    else:
                        what = f"{run.level.value} tests" if run.level else "a whole test run"
                    run.verdict = await asyncio.to_thread(run.detector.timeout_verdict, limit, what, now)
                    await self._kill(run)
                elif now >= next_sample:
                    run.verdict = await asyncio.to_thread(run.detector.sample, now)
                    next_sample = max(next_sample + self._interval, time.monotonic())  # on the beat, no drift
                    if run.verdict:
                        await self._kill(run)
        finally:
            loop.remove_reader(pidfd)
            os.close(pidfd)

    async def _kill(self, run: TestRun) -> None:
        """SIGKILL the run's process group, session, every process ever seen in its tree (checked against its
        start time, so a reused pid is spared) and any holding its output pipes, repeating until none is left:
        forks racing the kill are caught on the next pass. The test process itself stays a zombie until reaped."""
        if run.process is None:
            return
        root = run.process.pid
        seen = run.detector.seen if run.detector else {}
        for _ in range(40):
            processes = all_processes()
            victims = {p.pid for p in processes
                       if p.session == root or p.pgrp == root or seen.get(p.pid) == p.start_ticks}
            victims |= pipe_holders(run.pipes) & {p.pid for p in processes}
            grew = True
            while grew:  # and their descendants, wherever they moved to
                more = {p.pid for p in processes if p.ppid in victims} - victims
                victims |= more
                grew = bool(more)
            victims.discard(os.getpid())
            if not victims:
                return
            for pid in victims:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            await asyncio.sleep(0.05)  # let the kernel turn them into zombies before looking again
        log.warning("test run %s: processes survived SIGKILL", run.id)

    # ---- the result ----

    async def _finish(self, run: TestRun) -> None:
        assert run.process is not None
        code = run.process.wait()
        finished = FinishedRun(run.command, b"".join(run.output["stdout"]).decode(errors="replace"),
                               b"".join(run.output["stderr"]).decode(errors="replace"), code)
        try:
            parsed = await asyncio.to_thread(run.adapter.parse, finished)
        except Exception as exc:
            log.exception("%s.parse failed", run.adapter.name)
            parsed = ParsedRun([], error=f"The {run.adapter.display_name} adapter could not read the report: {exc!r}")
        duration_ms = int((time.monotonic() - run.started) * 1000)
        if run.cancelled:
            run.fail(f"The test run was cancelled and its processes killed. Output so far: {run.details}")
        elif parsed.error and not run.verdict:
            run.fail(f"{parsed.error}\n(full output: {run.details})")
        else:
            run.status, run.result = "completed", run_result(run, parsed.cases, duration_ms)
        write_results(run, parsed, code)
        durations = [(c.name, c.duration_ms) for c in parsed.cases if c.duration_ms is not None
                     and c.outcome is not Outcome.SKIPPED]
        if self._record and durations and not run.cancelled:
            try:
                self._record(run.adapter.name, [(name, float(ms)) for name, ms in durations])
            except Exception:
                log.exception("recording test durations failed")

    # ---- progress ----

    def _progress(self, run: TestRun) -> dict[str, Any]:
        now_ns = time.monotonic_ns()
        p = run.progress
        progress: dict[str, Any] = {"elapsedMs": int((time.monotonic() - run.started) * 1000), "passed": p.passed,
                                    "failed": p.failed, "skipped": p.skipped, "phase": p.phase.value, "warnings": []}
        if p.current_test:
            progress["currentTest"] = p.current_test
            if p.current_started_ns is not None:
                progress["currentTestElapsedMs"] = (now_ns - p.current_started_ns) // 1_000_000
            if (baseline := self._baseline(run.adapter.name, p.current_test)) is not None:
                progress["currentTestBaselineMs"] = baseline
        detector = run.detector
        if detector and (warning := detector.warning):
            entry: dict[str, Any] = {"idleMs": int((time.monotonic() - detector.last_output) * 1000),
                                     "diagnosis": warning.diagnosis, "suggestedTraces": warning.suggested_traces}
            if p.current_test:
                entry["testName"] = p.current_test
            progress["warnings"].append(entry)
        return progress

    def _baseline(self, framework: str, test: str) -> int | None:
        if self._baselines is None:
            return None
        try:
            value = self._baselines(framework, test)
        except Exception:
            log.exception("looking up the baseline of %s failed", test)
            return None
        return None if value is None else round(value)

    def _evict(self) -> None:
        finished = [run for run in self._runs.values() if run.done.is_set()]
        for run in finished[: max(0, len(finished) - MAX_KEPT_RUNS)]:
            del self._runs[run.id]
            _remove_run_files(run.details)
        self.prune_files()

    def prune_files(self) -> None:
        """Keep the details files of the MAX_KEPT_RUNS newest finished runs (those of earlier daemons included)
        and of every running one."""
        running = {run.details for run in self._runs.values() if not run.done.is_set()}
        try:
            files = [path for path in self.details_dir.glob("*.log") if path not in running]
            files.sort(key=lambda path: path.stat().st_mtime, reverse=True)
        except OSError:
            return
        for path in files[MAX_KEPT_RUNS:]:
            _remove_run_files(path)

    def note_session(self, run_id: str, session_id: str) -> None:
        """The run is traced by this session: its files go when the session is deleted (across restarts too)."""
        marker = self.details_dir / f"{run_id}{SESSION_SUFFIX}"
        fd = private_opener(str(marker), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(session_id)

    def forget_session_files(self, session_id: str) -> None:
        for marker in self.details_dir.glob(f"*{SESSION_SUFFIX}"):
            try:
                owner = marker.read_text(encoding="utf-8")
            except OSError:
                continue
            if owner == session_id:
                _remove_run_files(marker.with_suffix(".log"))


def _remove_run_files(details: Path) -> None:
    details.unlink(missing_ok=True)
    details.with_suffix(SESSION_SUFFIX).unlink(missing_ok=True)


def _spawn_error(command: TestCommand, exc: Exception) -> str:
    program = command.argv[0]
    if isinstance(exc, FileNotFoundError) and not command.cwd.is_dir():
        return f"The project directory {command.cwd} does not exist: pass the project's root as projectRoot."
    if isinstance(exc, FileNotFoundError):
        return (f"Could not start the tests: `{program}` was not found (on PATH, or relative to {command.cwd}). "
                "Install it, or pass `framework` to use another test framework, or `command` with the test "
                f"binary's path. Command: {shlex.join(command.argv)}")
    if isinstance(exc, PermissionError):
        return f"Could not start the tests: `{program}` is not executable (chmod +x it, or check its path)."
    return f"Could not start the tests ({exc}). Command: {shlex.join(command.argv)} in {command.cwd}"


def _duration(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"
