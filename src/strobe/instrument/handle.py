"""One instrumented process as the host drives it: its agent's requests and replies (`ProcessHandle`), and what
it reports to its owner (`ProcessObserver`). instrument/launcher.py makes them.

Every method here blocks: call it through the FridaWorker.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

import frida

from strobe.errors import FridaAttachFailed
from strobe.instrument.protocol import (
    BreakpointsUpdated,
    CrashReport,
    Flushed,
    FollowUpdated,
    HooksUpdated,
    LifelineState,
    LogpointBatch,
    MemoryWritten,
    ModuleInfo,
    OutputCapture,
    PauseReport,
    PollComplete,
    PySetupDone,
    PyState,
    ReadResponse,
    SamplingStateChange,
    StdinState,
    TraceBatch,
    VariableSnapshot,
    WatchesUpdated,
)
from strobe.instrument.requests import (
    CRASH_ACK,
    BreakpointSpec,
    BreakpointsRequest,
    CaptureOutputRequest,
    HookOptions,
    LifelineRequest,
    PyCommandRequest,
    PySetupRequest,
    ReleaseRequest,
    ResumeRequest,
    StdinRequest,
    StepPlan,
    WriteMemoryRequest,
    WriteTarget,
    hooks_request,
    read_memory_request,
)

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 60.0
FRIDA_ERRORS: tuple[type[Exception], ...] = tuple(
    getattr(frida, name) for name in dir(frida) if name.endswith("Error") and isinstance(getattr(frida, name), type)
)



class ProcessGone(FridaAttachFailed):
    pass


class AgentTimeout(FridaAttachFailed):
    pass


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

    def on_paused(self, pid: int, report: PauseReport, stack: bytes) -> None:
        """A thread stopped at a breakpoint; it waits until ProcessHandle.resume_thread(tid)."""

    def on_logpoints(self, pid: int, batch: LogpointBatch) -> None:
        """Lines of logpoints (no thread stopped)."""

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

    def update_hooks(self, action: Any, functions: list[tuple[int, int, int]], options: HookOptions) -> HooksUpdated:
        """Ask the agent to add or remove hooks ((function id, runtime address, size) triples) and wait for it."""
        reply: HooksUpdated = self._request(
            lambda rid: hooks_request(rid, action, functions, options),
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

    def redirect_stdin(self, daemon_pid: int, fd: int) -> StdinState:
        """Have the agent make the pipe whose read end is `fd` in `daemon_pid` the program's descriptor 0 (before it
        runs: agent/src/common/stdin.ts); the reply's `error` says why it could not."""
        reply: StdinState = self._request(
            lambda rid: StdinRequest(type="stdin", requestId=rid, pid=daemon_pid, fd=fd), HANDSHAKE_TIMEOUT_S,
            "its stdin was being connected",
        )
        return reply

    def capture_output(self) -> OutputCapture:
        """Have the agent hook libc's write and writev and send what the process writes to fds 1 and 2 from now on
        (a process Strobe attached to: agent/src/common/output.ts); observer.on_output gets it."""
        reply: OutputCapture = self._request(
            lambda rid: CaptureOutputRequest(type="capture_output", requestId=rid), HANDSHAKE_TIMEOUT_S,
            "its output capture was being set up",
        )
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

    def write_memory(self, targets: list[WriteTarget]) -> MemoryWritten:
        """Write bytes where each recipe leads (writable memory only); the answer has the bytes before and after."""
        reply: MemoryWritten = self._request(
            lambda rid: WriteMemoryRequest(type="write_memory", requestId=rid, targets=targets), REQUEST_TIMEOUT_S,
            "writing memory",
        )
        return reply

    def set_breakpoints(self, add: list[BreakpointSpec], remove: list[str]) -> BreakpointsUpdated:
        """Arm and disarm breakpoints (agent/src/native/breakpoints.ts); the answer lists those that failed."""
        reply: BreakpointsUpdated = self._request(
            lambda rid: BreakpointsRequest(type="breakpoints", requestId=rid, add=add, remove=remove),
            REQUEST_TIMEOUT_S, "its breakpoints were being set",
        )
        return reply

    def resume_thread(self, tid: int, plan: StepPlan | None = None) -> None:
        """Let the thread paused at a breakpoint go on, or take a step (`plan`); no answer: its next stop, if any,
        is a new report."""
        message: ResumeRequest = {"type": "resume", "action": "continue"}
        if plan is not None:
            message["action"], message["plan"] = "step", plan
        addressed = {**message, "type": f"resume:{tid}"}  # to that thread's recv
        try:
            self.script.post(addressed)
        except FRIDA_ERRORS as exc:
            raise ProcessGone(f"The process {self.pid} is gone ({exc}).") from exc

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
        reply: HooksUpdated | Flushed | ReadResponse | WatchesUpdated | FollowUpdated | PySetupDone | LifelineState
        | BreakpointsUpdated | MemoryWritten | StdinState | OutputCapture,
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
