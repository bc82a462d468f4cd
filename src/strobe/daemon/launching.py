"""Starting a session: spawn the program suspended (or attach to a gated one), record the session, index its
image, hook the staged patterns before its first instruction, resume. A failure after the spawn kills the
process: nothing is left running that no session owns. A launch whose caller goes away mid-way (its MCP client
disconnected, so its request is cancelled) is finished all the same: the process is never left spawned and
suspended, and its session can be listed and stopped like any other."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Coroutine
from datetime import datetime
from pathlib import Path
from typing import Any

from strobe.daemon.argtypes import ArgumentTypes
from strobe.daemon.images import missing_debug_file, use_debug_files
from strobe.daemon.ingest import SlotTable
from strobe.daemon.live import LiveSession, SessionEvents
from strobe.daemon.process import ProcessImage, TracedProcess
from strobe.daemon.registry import LiveSessions
from strobe.daemon.runtimes import RuntimeKind, detect_kind, runtime_for
from strobe.daemon.services import Services
from strobe.daemon.session_ids import session_base_id
from strobe.daemon.stdin import StdinFeed, StdinSource
from strobe.daemon.tracing import SessionTrace, parse_patterns
from strobe.errors import FridaAttachFailed, ProcessAlreadyTraced, SessionExists, ValidationError
from strobe.instrument.command import ResolvedCommand
from strobe.instrument.handle import AgentTimeout, ProcessGone
from strobe.settings import Settings
from strobe.store import sessions as store_sessions
from strobe.store.sessions import SessionRecord, SessionStatus

log = logging.getLogger(__name__)

# Hooks the staged patterns in a just-spawned session; returns warnings (daemon/sessions.py)
ApplyPending = Callable[[LiveSession], Awaitable[list[str]]]


def _now_ms() -> int:
    return int(time.time() * 1000)


def _orphan_launched(work: asyncio.Task[tuple[LiveSession, list[str]]]) -> None:
    """How a launch whose caller went away ended (nobody else will read it)."""
    if work.cancelled():
        return
    failure = work.exception()
    if failure is not None:
        log.info("the launch nobody waits for failed (its process is killed): %s", failure)
    else:
        live, _ = work.result()
        log.info("session %s: launched for a caller that went away; it runs until stopped", live.record.id)


async def _no_debug_file(live: LiveSession, warnings: list[str]) -> list[str]:
    """When the staged patterns found no debug info in the program: where its separate debug file was looked for and
    how to provide one (nothing when no pattern was staged, or the program has debug info)."""
    if not live.trace.patterns:
        return []
    symbols = await live.image.symbols  # already loaded: the patterns were planned against it
    if symbols.traceable:
        return []
    hint = await asyncio.to_thread(missing_debug_file, live.image.binary)
    return [hint] if hint is not None and hint not in warnings else []


def attachable_program(pid: int, own_pids: set[int]) -> str:
    """The executable of the running process `pid`, which debug_launch {pid} may attach to; a coded error saying what
    to do for a process that does not exist (or has ended) or is one of the daemon's own (`own_pids`)."""
    if pid in own_pids:
        raise ValidationError(f"pid {pid} is Strobe's own daemon (or one of its helpers): it cannot debug itself. "
                              "Pass the pid of the program to debug (e.g. from `pgrep -f NAME`).")
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        state = None
    if state is None or state in ("Z", "X"):
        gone = "No process with pid" if state is None else "The process with pid"
        raise ValidationError(f"{gone} {pid} is running{' (it has exited)' if state else ''}. Check the pid (`ps -p "
                              f"{pid}`, `pgrep -f NAME`), or start the program under Strobe with debug_launch "
                              "{command} instead.")
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError as exc:
        raise FridaAttachFailed(f"The executable of pid {pid} cannot be read ({exc.strerror}): the daemon may attach "
                                "only to processes of its own user (or any as root). Run the program as the daemon's "
                                "user, or launch it with debug_launch {command}.") from exc


def command_line(pid: int) -> list[str]:
    """The running process's argv, from /proc/PID/cmdline (empty when unreadable)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            raw = file.read()
    except OSError:
        return []
    return [arg.decode(errors="replace") for arg in raw.rstrip(b"\0").split(b"\0")] if raw.strip(b"\0") else []


class Launching:
    def __init__(self, services: Services, sessions: LiveSessions, events: SessionEvents) -> None:
        self._services, self._sessions, self._events = services, sessions, events
        self._lock = asyncio.Lock()
        self._unfinished: set[asyncio.Task[tuple[LiveSession, list[str]]]] = set()

    def _session(self, program: str, project_root: str, pid: int, settings: Settings, owns_output: bool
                 ) -> LiveSession:
        placeholder = SessionRecord(0, "", program, project_root, pid, 0, None, SessionStatus.RUNNING, None, False, 0)
        return LiveSession(placeholder, self._services.writer, self._services.ingest, asyncio.get_running_loop(),
                           self._events, settings, owns_output=owns_output)

    async def _unabandoned(self, work: Coroutine[Any, Any, tuple[LiveSession, list[str]]], what: str
                           ) -> tuple[LiveSession, list[str]]:
        """Run a launch or an attach in a task of its own that the caller's cancellation does not reach: a caller
        that goes away leaves a session that runs until stopped (_orphan_launched logs it), never a process
        suspended under Frida or an agent nobody owns."""
        task = asyncio.get_running_loop().create_task(work)
        self._unfinished.add(task)
        task.add_done_callback(self._unfinished.discard)
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if not task.done():
                log.info("%s goes on without its caller (its request was cancelled)", what)
                task.add_done_callback(_orphan_launched)
            raise

    async def launch(self, command: ResolvedCommand, project_root: str, env: dict[str, str], settings: Settings,
                     apply_pending: ApplyPending, stdin: StdinSource | None = None) -> tuple[LiveSession, list[str]]:
        """Spawn, record, install the staged patterns, resume. Returns the session and warnings.

        The work runs in a task of its own that the caller's cancellation does not reach: cancelled between the
        spawn and the resume (anyio cancels again at every await), it would leave the process suspended under
        Frida with nobody to resume or kill it."""
        return await self._unabandoned(self._launch(command, project_root, env, settings, apply_pending, stdin),
                                       f"the launch of {command.binary_path}")

    async def _launch(self, command: ResolvedCommand, project_root: str, env: dict[str, str], settings: Settings,
                      apply_pending: ApplyPending, stdin: StdinSource | None) -> tuple[LiveSession, list[str]]:
        services = self._services
        async with self._lock:
            running = self._sessions.running(command.binary_path)
            if running is not None:
                raise SessionExists(running.record.id, command.binary_path)
            agent_js = await services.worker.run(services.agent.get)
            use_debug_files(command.binary_path, settings.debug_directories)  # before its index starts loading
            live = self._session(command.binary_path, project_root, 0, settings, owns_output=True)
            if stdin is not None:  # its stdin: a pipe of the daemon's (daemon/stdin.py), dropped when it ends
                live.stdin = StdinFeed(asyncio.get_running_loop(), stdin)
                live.closers.append(live.stdin.discard)
            preloaded = services.images.preload(command.binary_path)  # the index loads while the process spawns
            runtime = runtime_for(detect_kind(command.argv[0], []))  # a #! script: its interpreter
            env, runtime_dir = runtime.launch_env(services.paths.home, env, command.argv)
            if runtime_dir is not None:  # what the runtime's tracer in the program writes there reaches the session
                live.closers.append(runtime.watch(runtime_dir, live.on_py_batch))
            try:
                handle = await services.worker.run(
                    lambda: services.launcher.spawn(command.argv, command.cwd, env, agent_js, live))
            except BaseException:
                preloaded.add_done_callback(lambda f: f.exception())  # built in vain; nothing to report
                for close in live.closers:
                    close()
                raise
            try:
                await self._record(live, handle, command.binary_path, project_root,
                                   services.images.load(command.binary_path, handle.modules, project_root, preloaded))
                warnings = await apply_pending(live)
                warnings += await _no_debug_file(live, warnings)
                warnings += await live.image.runtime.prepare(services.worker.run, handle, live.serialization_depth)
                lifeline = getattr(handle, "lifeline", None)  # instrument.handle.ProcessHandle's
                if lifeline is not None and lifeline.scope == "none":
                    warnings.append(f"This program is not tied to the daemon's life ({lifeline.error}): should the "
                                    "daemon die, it would keep running. debug_stop still ends it.")
                if live.stdin is not None:
                    await self._connect_stdin(live.stdin, handle)
                await services.worker.run(lambda: services.launcher.resume(handle.pid))
            except BaseException:
                await services.kill(handle.pid)
                raise
            return live, warnings

    async def _connect_stdin(self, feed: StdinFeed, handle: Any) -> None:
        """The program's descriptor 0 becomes the feed's pipe before its first instruction; then the feed writes."""
        state = await self._services.worker.run(lambda: handle.redirect_stdin(os.getpid(), feed.read_end))
        if state.error is not None:
            raise FridaAttachFailed(f"The program's stdin could not be connected ({state.error}). Launch it again; "
                                    "without stdin, stdinFile and keepStdinOpen it keeps Frida's pipe.")
        feed.connected()

    async def attach_gated(self, pid: int, program: str, project_root: str, patterns: list[str],
                           settings: Settings, tracer_dir: Path | None = None) -> LiveSession:
        """A session on a process that waits to exec() its real program (a traced test run, see daemon/testruns.py):
        attached with child gating, the patterns are hooked in the program it execs and in its children.
        `tracer_dir`: where the JavaScript tracer of the run's node processes writes (the Node runtime's
        launch_env made it), read into this session."""
        parse_patterns(patterns, project_root)
        services = self._services
        use_debug_files(program, settings.debug_directories)
        agent_js = await services.worker.run(services.agent.get)
        live = self._session(program, project_root, pid, settings, owns_output=False)
        if tracer_dir is not None:
            live.closers.append(runtime_for(RuntimeKind.NODE).watch(tracer_dir, live.on_py_batch))
        handle = await services.worker.run(lambda: services.launcher.attach(pid, agent_js, live))
        try:
            image = services.images.load(os.readlink(f"/proc/{pid}/exe"), handle.modules, project_root)
            await self._record(live, handle, program, project_root, image)
        except BaseException:
            await services.kill(pid)
            raise
        live.trace.patterns = list(dict.fromkeys(patterns))  # hooked once it execs its program
        return live

    async def attach_running(self, pid: int, project_root: str, settings: Settings, apply_pending: ApplyPending,
                             own_pids: set[int]) -> tuple[LiveSession, list[str]]:
        """A session on a process Strobe did not start (debug_launch {pid}): attached, its output captured from now
        on, the staged patterns hooked; it is never tied to the daemon's life (Lifecycle.detach lets go of it).
        `own_pids`: the daemon's own processes, which cannot be attached to. Like a launch, it runs in a task of its
        own: a caller that goes away leaves a session, never an agent nobody owns."""
        return await self._unabandoned(
            self._attach_running(pid, project_root, settings, apply_pending, own_pids), f"the attach to {pid}")

    async def _attach_running(self, pid: int, project_root: str, settings: Settings, apply_pending: ApplyPending,
                              own_pids: set[int]) -> tuple[LiveSession, list[str]]:
        services = self._services
        async with self._lock:
            program = attachable_program(pid, own_pids)
            holder = next((live for live in self._sessions.all()
                           if (process := live.processes.get(pid)) is not None and not process.ended), None)
            if holder is not None:
                raise ProcessAlreadyTraced(holder.record.id, pid)
            agent_js = await services.worker.run(services.agent.get)
            use_debug_files(program, settings.debug_directories)
            live = self._session(program, project_root, pid, settings, owns_output=False)
            live.attached = True
            handle = await services.worker.run(lambda: services.launcher.attach_running(pid, agent_js, live))
            try:
                image = services.images.load(program, handle.modules, project_root, native=True)
                await self._record(live, handle, program, project_root, image)
                warnings = await apply_pending(live)
                warnings += await _no_debug_file(live, warnings)
            except BaseException:
                live.stopping = True  # let go of it, as debug_stop would: it keeps running
                with contextlib.suppress(FridaAttachFailed):
                    await services.worker.run(lambda: services.launcher.detach(handle))
                raise
        kind = detect_kind(program, handle.modules)
        if kind is not RuntimeKind.NATIVE:
            warnings.append(f"pid {pid} runs {kind.value} code: attached, only its native functions (with debug "
                            f"info), output and crashes are traced. To trace its {kind.value} functions, launch it "
                            "with debug_launch {command}.")
        return live, warnings

    async def _record(self, live: LiveSession, handle: Any, program: str, project_root: str,
                      image: ProcessImage) -> None:
        """The session's row, its root process and its trace state; then it is live."""
        services = self._services
        base_id = session_base_id(program, datetime.now())
        pid = handle.pid
        live.record = await services.write(
            lambda c: store_sessions.insert_session(c, base_id, program, project_root, pid, _now_ms(), live.attached))
        services.writer.set_limit(live.record.key, live.settings.max_events_per_session,
                                  live.settings.max_output_per_session)
        live.start_ns = time.monotonic_ns()
        live.trace = SessionTrace(SlotTable())
        ingest = image.runtime.ingest(services.writer, live.record.key, pid, live.start_ns, live.trace.table, {})
        live.processes[pid] = TracedProcess(pid, None, handle, image, ingest)
        live.types = self._argument_types(live)
        self._sessions.add(live)
        log.info("session %s: pid %d runs %s (%s)", live.record.id, pid, image.binary, image.kind.value)

    def _argument_types(self, live: LiveSession) -> ArgumentTypes:
        services = self._services

        async def send_follow(funcs: list[dict[str, Any]]) -> None:
            """To every process: plans are by function slot, which only means something where it is hooked."""
            for process in [live.root, *[p for p in live.live_processes() if not p.is_root]]:
                try:
                    await services.worker.run(functools.partial(process.handle.set_follow, funcs))
                except (ProcessGone, AgentTimeout, FridaAttachFailed) as exc:  # pointers just stay addresses
                    log.info("session %s: argument plans not sent to pid %d (%s)", live.record.id, process.pid, exc)

        return ArgumentTypes(live.root.ingest, services.write, services.ingest.submit, send_follow, services.spawn)
