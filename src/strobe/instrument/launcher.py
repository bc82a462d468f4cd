"""Spawn programs under Frida with stdio piped, load the agent before they run, and route what
Frida reports (output, exit code, detach) to the owner of each pid.

Every process the launcher instruments is tied to the daemon's life before it runs: the launcher holds both ends
of a pipe (the lifeline) for as long as it is open, and the agent has the kernel SIGKILL the process (its process
group when it leads one) once that pipe's last writer is gone — the daemon closing it, exiting, or killed with -9
(agent/src/common/forks.ts). `ProcessHandle.release()` unties a process before letting go of it. Before its agent
has tied it (from its spawn, or from Frida reporting a child or an exec(), to the agent's answer), a process is in
the care of the reaper: a small helper process that SIGKILLs whatever it still holds when the daemon is gone.

Every method here blocks: call it through the FridaWorker. Frida's callbacks run on Frida's own
threads and only hand their data on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

import frida
from pydantic import ValidationError as PydanticValidationError

from strobe.errors import FridaAttachFailed
from strobe.instrument.protocol import (
    CRASH_ACK,
    EXIT_ACK,
    PROTOCOL_VERSION,
    AgentLoaded,
    AgentLog,
    CrashReport,
    Flushed,
    FollowUpdated,
    HooksUpdated,
    LifelineRequest,
    LifelineState,
    ModuleInfo,
    PollComplete,
    ProcessExit,
    PyBatch,
    PyCommandRequest,
    PySetupDone,
    PySetupRequest,
    PyState,
    ReadResponse,
    ReleaseRequest,
    SamplingStateChange,
    TraceBatch,
    VariableSnapshot,
    WatchesUpdated,
    agent_message_adapter,
    hooks_request,
    read_memory_request,
)
from strobe.instrument.records import RECORD_SIZE

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 60.0
CHILD_RESUME_DEADLINE_S = 30.0  # a gated child the daemon has not resumed by then is resumed anyway
FRIDA_ERRORS: tuple[type[Exception], ...] = tuple(
    getattr(frida, name) for name in dir(frida) if name.endswith("Error") and isinstance(getattr(frida, name), type)
)


class ProcessObserver(Protocol):
    """What a launched process reports. Called on Frida's threads: enqueue, don't block."""

    def on_output(self, pid: int, fd: int, data: bytes) -> None: ...

    def on_exit_code(self, pid: int, code: int) -> None: ...

    def on_detached(self, handle: ProcessHandle, reason: str) -> None:
        """Frida let go of the process: it ended ("process-terminated"), or exec()ed ("process-replaced": its new
        image arrives through on_child, same pid, new handle)."""

    def on_trace_batch(self, pid: int, batch: TraceBatch, data: bytes) -> None: ...

    def on_sampling_change(self, pid: int, change: SamplingStateChange) -> None: ...

    def on_snapshot(self, pid: int, snapshot: VariableSnapshot, data: bytes) -> None: ...

    def on_poll_complete(self, pid: int, done: PollComplete) -> None: ...

    def on_crash(self, pid: int, report: CrashReport, stack: bytes) -> None:
        """A fatal signal; the crashing thread waits until ProcessHandle.ack_crash()."""

    def on_py_batch(self, pid: int, data: bytes) -> None:
        """A batch of the Python tracer (JSON bytes)."""

    def on_py_state(self, pid: int, state: PyState) -> None:
        """The Python tracer was installed at Py_RunMain, or could not be."""

    def on_child(self, handle: ProcessHandle, origin: str, parent_pid: int, path: str) -> None:
        """A followed process forked (origin "fork"; vfork too), posix_spawn()ed or exec()ed ("exec": same pid,
        new image at `path`). The agent is loaded in it and it is still suspended: give it its hooks, then
        Launcher.resume(handle.pid). It is resumed anyway after CHILD_RESUME_DEADLINE_S."""


@dataclass
class ProcessHandle:
    pid: int
    session: Any  # frida.core.Session
    script: Any  # frida.core.Script
    observer: ProcessObserver
    loaded: threading.Event = field(default_factory=threading.Event)
    handshake_error: str | None = None
    modules: list[ModuleInfo] = field(default_factory=list)
    runtime_state: Any = None  # owned by the process's runtime (daemon/runtimes): the Python tracer's state
    lifeline: LifelineState | None = None  # what ends with the daemon (tie_lifeline); scope "none": nothing
    _replies: dict[int, tuple[threading.Event, list[Any]]] = field(default_factory=dict)
    _reply_data: dict[int, bytes] = field(default_factory=dict)
    _next_request: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _gone: bool = False  # detached: a request made now would wait for a reply that cannot come

    def _request(self, build: Any, timeout: float, doing: str) -> Any:
        """Post `build(request_id)` to the agent and wait for the reply carrying that request id."""
        with self._lock:
            if self._gone:
                raise ProcessGone(f"The process {self.pid} has exited (its agent detached); nothing was sent.")
            self._next_request += 1
            request_id = self._next_request
            waiter: tuple[threading.Event, list[Any]] = (threading.Event(), [])
            self._replies[request_id] = waiter
        try:
            self.script.post(build(request_id))
        except FRIDA_ERRORS as exc:
            with self._lock:
                self._replies.pop(request_id, None)
            raise ProcessGone(f"The process {self.pid} is gone ({exc}).") from exc
        if not waiter[0].wait(timeout):
            with self._lock:
                self._replies.pop(request_id, None)
            raise AgentTimeout(
                f"The agent in pid {self.pid} did not answer within {timeout:.0f}s while {doing}; the process may "
                "be stopped (e.g. under another debugger) or exiting."
            )
        if not waiter[1]:
            raise ProcessGone(f"The process {self.pid} exited while {doing}.")
        return waiter[1][0]

    def update_hooks(
        self, action: Any, functions: list[tuple[int, int]], hot_calls_per_second: int, sample_every: int
    ) -> HooksUpdated:
        """Ask the agent to add or remove hooks ((function id, runtime address) pairs) and wait for it."""
        reply: HooksUpdated = self._request(
            lambda rid: hooks_request(rid, action, functions, hot_calls_per_second, sample_every),
            REQUEST_TIMEOUT_S, "its hooks were being changed",
        )
        return reply

    def read_memory(
        self, recipes: list[dict[str, object]], timeout: float, poll: tuple[int, int, int] | None = None
    ) -> tuple[ReadResponse, bytes]:
        """Have the agent follow and copy each recipe (see agent/src/common/memory.ts); returns its answer and the
        bytes its results point into. With `poll` the agent answers at once and streams snapshots."""
        reply: ReadResponse = self._request(
            lambda rid: read_memory_request(rid, recipes, poll), timeout, "reading memory"
        )
        with self._lock:
            data = self._reply_data.pop(reply.requestId, b"")
        return reply, data

    def set_watches(self, watches: dict[str, object]) -> WatchesUpdated:
        """Replace the agent's watches (see daemon.watches.agent_watches); it sends what it recorded under the
        old ones first."""
        reply: WatchesUpdated = self._request(
            lambda rid: {"type": "watches", "requestId": rid, **watches}, REQUEST_TIMEOUT_S,
            "its watches were being set",
        )
        return reply

    def set_follow(self, funcs: list[dict[str, object]]) -> None:
        """Add or replace the pointer-following plans of some functions (see daemon.follow); the agent sends
        what it recorded under the old ones first."""
        self._request(lambda rid: {"type": "follow", "requestId": rid, "funcs": funcs}, REQUEST_TIMEOUT_S,
                      "its argument plans were being set")

    def tie_lifeline(self, daemon_pid: int, fd: int) -> LifelineState:
        """Have the agent tie the process's life to the pipe whose read end is `fd` in `daemon_pid`: the kernel kills
        the process (its process group when it leads one) once the pipe's last writer closes."""
        reply: LifelineState = self._request(
            lambda rid: LifelineRequest(type="lifeline", requestId=rid, pid=daemon_pid, fd=fd), HANDSHAKE_TIMEOUT_S,
            "its lifeline was being tied",
        )
        self.lifeline = reply
        return reply

    def release(self) -> None:
        """Let go of the process and leave it running: untie its lifeline, then detach (Frida unloads the agent and
        reports the detach as "application-requested")."""
        reply: LifelineState = self._request(
            lambda rid: ReleaseRequest(type="release", requestId=rid), REQUEST_TIMEOUT_S, "it was being released"
        )
        self.lifeline = reply
        with contextlib.suppress(*FRIDA_ERRORS):  # gone already: nothing left to let go of
            self.session.detach()

    def ack_crash(self) -> None:
        """Let the crashing thread go on to the signal's handler (the crash report is stored)."""
        with contextlib.suppress(*FRIDA_ERRORS):  # the process may be gone already
            self.script.post(CRASH_ACK)

    def py_setup(self, bootstrap: str) -> PySetupDone:
        """Give the agent the Python tracer's bootstrap: it runs it now (a running interpreter) or at Py_RunMain."""
        reply: PySetupDone = self._request(
            lambda rid: PySetupRequest(type="py_setup", requestId=rid, bootstrap=bootstrap), REQUEST_TIMEOUT_S,
            "the Python tracer was being installed",
        )
        return reply

    def py_command(self, command: str) -> None:
        """One JSON command line for the Python tracer (queued by the agent until the tracer is installed)."""
        try:
            self.script.post(PyCommandRequest(type="py_command", command=command))
        except FRIDA_ERRORS as exc:
            raise ProcessGone(f"The process {self.pid} is gone ({exc}).") from exc

    def flush(self, timeout: float) -> None:
        """Have the agent send every event recorded so far; returns once they have been delivered."""
        self._request(lambda rid: {"type": "flush", "requestId": rid}, timeout, "flushing its events")

    def deliver_reply(
        self,
        reply: HooksUpdated | Flushed | ReadResponse | WatchesUpdated | FollowUpdated | PySetupDone | LifelineState,
        data: bytes | None = None,
    ) -> None:
        with self._lock:
            waiter = self._replies.pop(reply.requestId, None)
            if waiter is not None and data:
                self._reply_data[reply.requestId] = data
        if waiter is not None:
            waiter[1].append(reply)
            waiter[0].set()

    def fail_pending(self) -> None:
        """The process is gone: wake every request still waiting (they will see no reply); later ones fail at once."""
        with self._lock:
            self._gone = True
            waiters = list(self._replies.values())
            self._replies.clear()
        for event, _ in waiters:
            event.set()


def _parent_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("PPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _exe_of(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


REAPER_SOURCE = """
import errno, os, signal, sys
GROUP = 4  # PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9): the group whose id is the pidfd's pid, even once it is reaped

def kill(key, fd):
    if key[0] != "g":
        if fd is not None:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        return
    if fd is not None:
        try:
            signal.pidfd_send_signal(fd, signal.SIGKILL, None, GROUP)
            return
        except OSError as exc:
            if exc.errno != errno.EINVAL:  # ESRCH: the group is empty (EINVAL: a kernel without the flag)
                return
    os.killpg(int(key[1:]), signal.SIGKILL)

held = {}  # "123": the process 123; "g123": the process group 123 leads. A pidfd of 123, None if it was gone
for line in sys.stdin:
    key = line[1:].strip()
    if line[0] == "+":
        try:
            held[key] = os.pidfd_open(int(key.lstrip("g")))
        except OSError:
            held[key] = None
    elif key in held and (fd := held.pop(key)) is not None:
        os.close(fd)
for key, fd in held.items():
    try:
        kill(key, fd)
    except OSError:
        pass
"""


class Reaper:
    """What must not outlive the daemon and nothing else ties to it, held by a helper process (started on first use)
    that SIGKILLs it once its stdin, whose only writer is the daemon, reads end-of-file: the daemon is gone, however
    it went (kill -9 included). Two kinds of things are held:

    - a process not tied to the lifeline yet (spawned, or a child Frida stopped, until its agent answers). The helper
      pins it with a pidfd, so a pid reused after its process ended is never signalled.
    - a whole process group, by its leader (a test run's command, started in a session of its own: it has no agent,
      so no lifeline). The helper pins the leader with a pidfd and at the end signals the group through it
      (PIDFD_SIGNAL_PROCESS_GROUP): every member, grandchildren and processes a fork is creating included, as the
      kernel delivers a group signal atomically against fork; and only that group, even if the leader was reaped and
      its pid reused. On a kernel before 6.9 (or a leader already reaped when the helper got to it) it falls back to
      killpg by number, which could only hit another group if this one had entirely ended and its id had been
      reused in between.

        reaper.hold(pid)           # spawned, or a child Frida stopped
        reaper.let_go(pid)         # its lifeline is tied (or it is dead, or it runs untraced)
        reaper.hold_group(leader)  # a test command just started with start_new_session=True
        reaper.let_go_group(leader)  # the run is over: its group killed, its leader reaped
    """

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._broken = False

    def hold(self, pid: int) -> None:
        self._tell(f"+{pid}\n")

    def let_go(self, pid: int) -> None:
        self._tell(f"-{pid}\n")

    def hold_group(self, leader: int) -> None:
        self._tell(f"+g{leader}\n")

    def let_go_group(self, leader: int) -> None:
        self._tell(f"-g{leader}\n")

    @property
    def pid(self) -> int | None:
        """The helper's pid; None before its first use or after close()."""
        process = self._process
        return process.pid if process is not None else None

    def _tell(self, line: str) -> None:
        with self._lock:
            if self._broken:
                return
            try:
                if self._process is None:  # a session of its own: a signal to the daemon's group spares it
                    self._process = subprocess.Popen(
                        [sys.executable, "-I", "-S", "-c", REAPER_SOURCE], stdin=subprocess.PIPE,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                    )
                assert self._process.stdin is not None
                self._process.stdin.write(line.encode())
                self._process.stdin.flush()
            except OSError as exc:
                self._broken = True
                log.warning("the reaper is gone (%s): a process, or a test run's process group, that nothing else "
                            "ties to the daemon may outlive it", exc)

    def close(self) -> None:
        """The daemon is closing: whatever the reaper still holds is killed, and it exits."""
        with self._lock:
            process, self._process = self._process, None
        if process is not None:
            assert process.stdin is not None
            with contextlib.suppress(OSError):
                process.stdin.close()
            try:
                process.wait(HANDSHAKE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


class ProcessGone(FridaAttachFailed):
    pass


class AgentTimeout(FridaAttachFailed):
    pass


class Launcher:
    def __init__(self) -> None:
        self._device: Any = None
        self._observers: dict[int, ProcessObserver] = {}
        self._lock = threading.Lock()
        self._agent_js = ""
        self._children: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._child_thread: threading.Thread | None = None
        self._deadlines: dict[int, threading.Timer] = {}
        self._lifeline: tuple[int, int] | None = None  # (read end, write end), opened on first use
        self._reaper = Reaper()

    @property
    def reaper(self) -> Reaper:
        """The reaper of this launcher's processes, for test runs to share (the launcher closes it)."""
        return self._reaper

    def _get_device(self) -> Any:
        if self._device is None:
            self._device = frida.get_local_device()
            self._device.on("output", self._on_output)
            self._device.on("child-added", self._on_child_added)
        return self._device

    def spawn(
        self, argv: list[str], cwd: str, env: dict[str, str], agent_js: str, observer: ProcessObserver
    ) -> ProcessHandle:
        """Spawn suspended, attach, load the agent and wait for its handshake. The caller resumes."""
        device = self._get_device()
        try:
            pid = int(device.spawn(argv, cwd=cwd, env=env or None, stdio="pipe"))
        except frida.ExecutableNotSupportedError as exc:
            raise FridaAttachFailed(
                f"Frida cannot run {argv[0]}: {exc}. Only native executables (ELF) can be launched directly; "
                "for a script, pass its interpreter as command and the script in args."
            ) from exc
        except FRIDA_ERRORS as exc:
            raise FridaAttachFailed(
                f"Frida could not start {argv[0]}: {exc}. Check that it runs from a shell as the same user."
            ) from exc
        self._reaper.hold(pid)
        with self._lock:
            self._observers[pid] = observer
            self._agent_js = agent_js
        try:
            return self._instrument(device, pid, agent_js, observer)
        except BaseException:
            self.kill(pid)
            with self._lock:
                self._observers.pop(pid, None)
            raise
        finally:
            self._reaper.let_go(pid)

    def attach(self, pid: int, agent_js: str, observer: ProcessObserver) -> ProcessHandle:
        """Instrument a process someone else started (a test run's): it keeps running; its output is not ours."""
        device = self._get_device()
        with self._lock:
            self._observers[pid] = observer
            self._agent_js = agent_js
        try:
            return self._instrument(device, pid, agent_js, observer)
        except BaseException:
            with self._lock:
                self._observers.pop(pid, None)
            raise

    def _instrument(self, device: Any, pid: int, agent_js: str, observer: ProcessObserver) -> ProcessHandle:
        try:
            session = device.attach(pid)
        except frida.ProcessNotFoundError as exc:
            raise FridaAttachFailed(f"The process {pid} vanished before Frida could attach: {exc}.") from exc
        except frida.PermissionDeniedError as exc:
            raise FridaAttachFailed(
                f"Frida was denied attaching to pid {pid}: {exc}. Check ptrace permissions "
                "(/proc/sys/kernel/yama/ptrace_scope) or run as the process owner."
            ) from exc
        except FRIDA_ERRORS as exc:
            raise FridaAttachFailed(f"Frida could not attach to pid {pid}: {exc}.") from exc
        try:  # its children (fork, vfork, posix_spawn) and exec()s stop until we have followed them
            session.enable_child_gating()
        except FRIDA_ERRORS as exc:
            raise FridaAttachFailed(f"Frida could not follow the children of pid {pid}: {exc}.") from exc
        try:
            script = session.create_script(agent_js, name="strobe-agent")
        except FRIDA_ERRORS as exc:
            raise FridaAttachFailed(f"The Strobe agent could not be created in pid {pid}: {exc}.") from exc
        handle = ProcessHandle(pid=pid, session=session, script=script, observer=observer)
        session.on("detached", lambda reason, crash: self._on_detached(handle, reason))
        script.on("message", lambda message, data: self._on_message(handle, message, data))
        try:
            script.load()
        except FRIDA_ERRORS as exc:
            raise FridaAttachFailed(f"The Strobe agent failed to load in pid {pid}: {exc}.") from exc
        if not handle.loaded.wait(HANDSHAKE_TIMEOUT_S):
            raise FridaAttachFailed(
                f"The Strobe agent in pid {pid} did not report within {HANDSHAKE_TIMEOUT_S:.0f}s; the target may "
                "be unusually slow to map. Try the launch again."
            )
        if handle.handshake_error is not None:
            raise FridaAttachFailed(handle.handshake_error)
        tied = handle.tie_lifeline(os.getpid(), self._lifeline_end())
        if tied.scope == "none":
            log.warning("pid %d will outlive the daemon if it dies: %s", pid, tied.error)
        return handle

    def resume(self, pid: int) -> None:
        with self._lock:
            deadline = self._deadlines.pop(pid, None)
        if deadline is not None:
            deadline.cancel()
        try:
            self._get_device().resume(pid)
        except FRIDA_ERRORS as exc:
            raise FridaAttachFailed(f"The process {pid} could not be resumed: {exc}. Launch it again.") from exc

    def resume_quietly(self, pid: int) -> None:
        """Resume a gated child whatever happened to it (it may be running or gone already)."""
        with contextlib.suppress(FridaAttachFailed):
            self.resume(pid)

    def kill(self, pid: int) -> None:
        with contextlib.suppress(*FRIDA_ERRORS):  # already gone
            self._get_device().kill(pid)

    def close(self) -> None:
        """Release Frida: its helper processes exit with it (they would otherwise outlive the daemon)."""
        with self._lock:
            deadlines, self._deadlines = list(self._deadlines.values()), {}
        for deadline in deadlines:
            deadline.cancel()
        if self._child_thread is not None:
            self._children.put(None)
            self._child_thread.join(HANDSHAKE_TIMEOUT_S)
            self._child_thread = None
        if self._device is not None:
            with contextlib.suppress(*FRIDA_ERRORS):
                frida.shutdown()
            self._device = None
        with self._lock:
            lifeline, self._lifeline = self._lifeline, None
        if lifeline is not None:  # every process still tied to it is killed
            for fd in lifeline:
                os.close(fd)
        self._reaper.close()

    def _lifeline_end(self) -> int:
        """The read end of the lifeline, opened on first use. Both ends are close-on-exec, so nothing the daemon
        starts keeps the pipe open after it."""
        with self._lock:
            if self._lifeline is None:
                self._lifeline = os.pipe()
            return self._lifeline[0]

    def forget(self, pid: int) -> None:
        with self._lock:
            self._observers.pop(pid, None)

    # ---- children (the child thread) -------------------------------------------------------------

    def _follow_children(self) -> None:
        while True:
            child = self._children.get()
            if child is None:
                return
            try:
                self._adopt(child)
            except Exception:
                log.exception("child %s could not be followed", getattr(child, "pid", "?"))
                self.resume_quietly(int(child.pid))

    def _adopt(self, child: Any) -> None:
        """Attach to a gated child, load the agent, gate its own children, and hand it to its session's
        observer; a child nobody owns, or that cannot be instrumented, is resumed untraced."""
        pid, origin = int(child.pid), str(child.origin)
        with self._lock:
            replaced = self._observers.get(pid) if origin == "exec" else None
            parent = int(child.parent_pid) if origin != "exec" else pid
            if replaced is None and origin == "exec":
                parent = _parent_of(pid)  # posix_spawn: Frida reports it as an exec of the new pid
            observer = replaced or self._observers.get(parent)
            agent_js = self._agent_js
        if observer is None:
            log.info("child %d (%s of %d) belongs to no session; resumed untraced", pid, origin, parent)
            self.resume_quietly(pid)
            return
        path = str(child.path or "") or _exe_of(pid)
        self._reaper.hold(pid)
        try:
            handle = self._instrument(self._get_device(), pid, agent_js, observer)
        except FridaAttachFailed as exc:
            log.warning("child %d (%s of %d, %s) not followed: %s", pid, origin, parent, path, exc)
            self.resume_quietly(pid)
            return
        finally:
            self._reaper.let_go(pid)
        with self._lock:
            self._observers[pid] = observer
            deadline = threading.Timer(CHILD_RESUME_DEADLINE_S, self._overdue, (pid,))
            deadline.daemon = True
            self._deadlines[pid] = deadline
        deadline.start()
        observer.on_child(handle, origin, parent, path)

    def _overdue(self, pid: int) -> None:
        log.warning("child %d was not resumed within %.0fs of being followed; resumed now", pid,
                    CHILD_RESUME_DEADLINE_S)
        self.resume_quietly(pid)

    # ---- Frida callbacks (Frida's threads) -------------------------------------------------------

    def _on_child_added(self, child: Any) -> None:
        """Only queue: any Frida call made from this callback deadlocks Frida's driver."""
        with self._lock:
            if self._child_thread is None:
                self._child_thread = threading.Thread(target=self._follow_children, name="strobe-children",
                                                      daemon=True)
                self._child_thread.start()
        self._children.put(child)

    def _observer(self, pid: int) -> ProcessObserver | None:
        with self._lock:
            return self._observers.get(pid)

    def _on_output(self, pid: int, fd: int, data: bytes) -> None:
        observer = self._observer(pid)
        if observer is not None:
            observer.on_output(pid, fd, data)

    def _on_message(self, handle: ProcessHandle, message: dict[str, Any], data: bytes | None) -> None:
        if message.get("type") == "error":
            log.error("agent error in pid %d: %s", handle.pid, message.get("stack") or message.get("description"))
            return
        try:
            payload = agent_message_adapter.validate_python(message.get("payload"))
        except PydanticValidationError:
            log.warning("pid %d: unrecognised agent message %r", handle.pid, message)
            return
        if isinstance(payload, TraceBatch):
            handle.observer.on_trace_batch(handle.pid, payload, data or b"")
        elif isinstance(payload, HooksUpdated | Flushed | ReadResponse | WatchesUpdated | FollowUpdated | PySetupDone
                        | LifelineState):
            handle.deliver_reply(payload, data)
        elif isinstance(payload, PyBatch):
            handle.observer.on_py_batch(handle.pid, data or b"")
        elif isinstance(payload, PyState):
            handle.observer.on_py_state(handle.pid, payload)
        elif isinstance(payload, VariableSnapshot):
            handle.observer.on_snapshot(handle.pid, payload, data or b"")
        elif isinstance(payload, CrashReport):
            handle.observer.on_crash(handle.pid, payload, data or b"")
        elif isinstance(payload, PollComplete):
            handle.observer.on_poll_complete(handle.pid, payload)
        elif isinstance(payload, SamplingStateChange):
            handle.observer.on_sampling_change(handle.pid, payload)
        elif isinstance(payload, ProcessExit):
            handle.observer.on_exit_code(handle.pid, payload.code)
            with contextlib.suppress(*FRIDA_ERRORS):  # the process may already be tearing down
                handle.script.post(EXIT_ACK)
        elif isinstance(payload, AgentLoaded):
            if payload.protocolVersion != PROTOCOL_VERSION or payload.recordSize != RECORD_SIZE:
                handle.handshake_error = (
                    f"The agent speaks protocol {payload.protocolVersion} (records of {payload.recordSize} bytes) "
                    f"but this daemon expects {PROTOCOL_VERSION} ({RECORD_SIZE} bytes): the agent cache is stale. "
                    "Delete $STROBE_HOME/cache and relaunch."
                )
            handle.modules = payload.modules
            handle.loaded.set()
        elif isinstance(payload, AgentLog):
            log.log(
                {"info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}[payload.level],
                "agent pid %d: %s", handle.pid, payload.message,
            )

    def _on_detached(self, handle: ProcessHandle, reason: str) -> None:
        handle.fail_pending()
        handle.observer.on_detached(handle, str(reason))
