"""Spawn programs under Frida with stdio piped, load the agent before they run, and route what
Frida reports (output, exit code, detach) to the owner of each pid.

Every process the launcher instruments is tied to the daemon's life before it runs: the launcher holds both ends
of a pipe (the lifeline) for as long as it is open, and the agent has the kernel SIGKILL the process (its process
group when it leads one) once that pipe's last writer is gone — the daemon closing it, exiting, or killed with -9
(agent/src/common/forks.ts). `ProcessHandle.release()` unties a process before letting go of it. The exception: a
process Strobe attached to (`attach_running`, debug_launch {pid}) and its followed children are never tied nor
reaped, and their output is captured by the agent's write/writev hooks (agent/src/common/output.ts). Before its agent
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
import threading
from typing import Any

import frida
from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from pydantic import ValidationError as PydanticValidationError

from strobe.errors import FridaAttachFailed
from strobe.instrument.handle import (
    FRIDA_ERRORS,
    HANDSHAKE_TIMEOUT_S,
    ProcessHandle,
    ProcessObserver,
)
from strobe.instrument.protocol import (
    PROTOCOL_VERSION,
    AgentLoaded,
    AgentLog,
    BreakpointsUpdated,
    CrashReport,
    Flushed,
    FollowUpdated,
    HooksUpdated,
    LifelineState,
    LogpointBatch,
    MemoryWritten,
    OutputCapture,
    OutputChunk,
    PauseReport,
    PollComplete,
    ProcessExit,
    PyBatch,
    PySetupDone,
    PyState,
    ReadResponse,
    SamplingStateChange,
    StdinState,
    TraceBatch,
    VariableSnapshot,
    WatchesUpdated,
    agent_message_adapter,
)
from strobe.instrument.reaper import Reaper
from strobe.instrument.records import RECORD_SIZE
from strobe.instrument.requests import EXIT_ACK

log = logging.getLogger(__name__)

CHILD_RESUME_DEADLINE_S = 30.0  # a gated child the daemon has not resumed by then is resumed anyway
def static_executable_refusal(path: str) -> str | None:
    """Why the ELF executable at `path` cannot be launched under Frida when it is statically linked (no PT_INTERP: no
    dynamic loader, no libc to load the agent with; Frida's injector then fails with "loader crashed with signal
    11"), None for anything else (a dynamic executable, a script, a file that is not ELF)."""
    try:
        with open(path, "rb") as file:
            elf = ELFFile(file)
            if elf["e_type"] not in ("ET_EXEC", "ET_DYN") or not any(True for _ in elf.iter_segments("PT_LOAD")):
                return None
            if any(True for _ in elf.iter_segments("PT_INTERP")):
                return None
            go = elf.get_section_by_name(".go.buildinfo") is not None
    except (OSError, ELFError):
        return None
    how = ("build it linked dynamically: `CGO_ENABLED=1 go build -ldflags=-linkmode=external` (Go links statically "
           "when cgo is off or unused)" if go else
           "link it dynamically (without -static; Rust: not the musl target nor +crt-static)")
    return (f"{path} is statically linked (no program interpreter), and Frida can load Strobe's agent only into a "
            "program that has the dynamic loader and libc: its injector crashes in such a process ('loader crashed "
            f"with signal 11'). To debug it with Strobe, {how}, then launch it again; or run it without Strobe.")


YAMA_PTRACE_SCOPE = "/proc/sys/kernel/yama/ptrace_scope"


def ptrace_refusal(pid: int, reason: object, scope_file: str = YAMA_PTRACE_SCOPE) -> str:
    """What to tell the caller when the kernel refused Frida attaching to `pid` (ptrace): the Yama setting and the
    sysctl that allows it, or the ownership rule."""
    try:
        with open(scope_file) as file:
            scope: int | None = int(file.read().strip())
    except (OSError, ValueError):
        scope = None
    if scope in (1, 2):
        why = ("only a process's parent may attach to it" if scope == 1 else
               "only a process with CAP_SYS_PTRACE (root) may attach")
        return (f"Attaching to pid {pid} was refused ({reason}): the kernel's Yama ptrace_scope is {scope}, so {why}. "
                "Allow it with `sudo sysctl -w kernel.yama.ptrace_scope=0` (until reboot; make it lasting in "
                "/etc/sysctl.d/), or launch the program under Strobe with debug_launch {command} instead.")
    if scope == 3:
        return (f"Attaching to pid {pid} was refused ({reason}): the kernel's Yama ptrace_scope is 3, which forbids "
                "attaching to any process until reboot (`sysctl kernel.yama.ptrace_scope` cannot lower it). Launch "
                "the program under Strobe with debug_launch {command} instead.")
    return (f"Attaching to pid {pid} was refused ({reason}): the daemon may attach only to processes of its own user "
            "(or any as root), and the kernel's ptrace rules must allow it: check `sysctl kernel.yama.ptrace_scope` "
            "(`sudo sysctl -w kernel.yama.ptrace_scope=0` allows it) and who owns the process.")


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


def _program_path(pid: int, reported: str) -> str:
    """The absolute path of the program a gated child runs. Frida reports an exec()'s path as the program gave it:
    `./family` means the child's working directory, not the daemon's."""
    if os.path.isabs(reported):
        return reported
    if reported:
        try:
            return os.path.normpath(os.path.join(os.readlink(f"/proc/{pid}/cwd"), reported))
        except OSError:
            pass
    return _exe_of(pid) or reported


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
        self._untied: set[int] = set()  # processes Strobe attached to (and their children): never tied nor reaped
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
        refusal = static_executable_refusal(argv[0])
        if refusal is not None:
            raise FridaAttachFailed(refusal)
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

    def attach_running(self, pid: int, agent_js: str, observer: ProcessObserver) -> ProcessHandle:
        """Instrument a process Strobe did not start and must leave running: it is never tied to the daemon's life
        (nor its followed children), and what it writes to fds 1 and 2 is captured by the agent from now on. Let
        go of it with ProcessHandle.release()."""
        with self._lock:
            self._untied.add(pid)
        try:
            return self.attach(pid, agent_js, observer)
        except BaseException:
            with self._lock:
                self._untied.discard(pid)
            raise

    def _instrument(self, device: Any, pid: int, agent_js: str, observer: ProcessObserver) -> ProcessHandle:
        try:
            session = device.attach(pid)
        except frida.ProcessNotFoundError as exc:
            raise FridaAttachFailed(f"The process {pid} vanished before Frida could attach: {exc}.") from exc
        except frida.PermissionDeniedError as exc:
            raise FridaAttachFailed(ptrace_refusal(pid, exc)) from exc
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
        with self._lock:
            untied = pid in self._untied
        if untied:  # attached to: it outlives the daemon; its stdio is its own, seen through the agent's hooks
            captured = handle.capture_output()
            if captured.error is not None:
                log.warning("pid %d: its output is not captured: %s", pid, captured.error)
            return handle
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

    def detach(self, handle: ProcessHandle) -> None:
        """Let go of a process and leave it running (one Strobe attached to): untied if it was, then Frida unloads
        the agent, every hook with it, and reports the detach ("application-requested")."""
        handle.release()

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
            self._untied.discard(pid)

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
        path = _program_path(pid, str(child.path or ""))
        with self._lock:  # a child of a process Strobe attached to is left running like its parent
            untied = parent in self._untied or pid in self._untied
            if untied:
                self._untied.add(pid)
        if not untied:
            self._reaper.hold(pid)
        try:
            handle = self._instrument(self._get_device(), pid, agent_js, observer)
        except FridaAttachFailed as exc:
            log.warning("child %d (%s of %d, %s) not followed: %s", pid, origin, parent, path, exc)
            self.resume_quietly(pid)
            return
        finally:
            if not untied:
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
                        | LifelineState | BreakpointsUpdated | MemoryWritten | StdinState | OutputCapture):
            handle.deliver_reply(payload, data)
        elif isinstance(payload, OutputChunk):
            if data:
                handle.observer.on_output(handle.pid, payload.fd, data)
        elif isinstance(payload, PauseReport):
            handle.observer.on_paused(handle.pid, payload, data or b"")
        elif isinstance(payload, LogpointBatch):
            handle.observer.on_logpoints(handle.pid, payload)
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
