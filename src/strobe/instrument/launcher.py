"""Spawn programs under Frida with stdio piped, load the agent before they run, and route what
Frida reports (output, exit code, detach) to the owner of each pid.

Every method here blocks: call it through the FridaWorker. Frida's callbacks run on Frida's own
threads and only hand their data on.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

import frida
from pydantic import ValidationError as PydanticValidationError

from strobe.errors import FridaAttachFailed
from strobe.instrument.protocol import (
    EXIT_ACK,
    PROTOCOL_VERSION,
    AgentLoaded,
    AgentLog,
    ProcessExit,
    agent_message_adapter,
)

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT_S = 10.0
FRIDA_ERRORS: tuple[type[Exception], ...] = tuple(
    getattr(frida, name) for name in dir(frida) if name.endswith("Error") and isinstance(getattr(frida, name), type)
)


class ProcessObserver(Protocol):
    """What a launched process reports. Called on Frida's threads: enqueue, don't block."""

    def on_output(self, pid: int, fd: int, data: bytes) -> None: ...

    def on_exit_code(self, pid: int, code: int) -> None: ...

    def on_detached(self, pid: int, reason: str) -> None: ...


@dataclass
class ProcessHandle:
    pid: int
    session: Any  # frida.core.Session
    script: Any  # frida.core.Script
    observer: ProcessObserver
    loaded: threading.Event = field(default_factory=threading.Event)
    handshake_error: str | None = None


class Launcher:
    def __init__(self) -> None:
        self._device: Any = None
        self._observers: dict[int, ProcessObserver] = {}
        self._lock = threading.Lock()

    def _get_device(self) -> Any:
        if self._device is None:
            self._device = frida.get_local_device()
            self._device.on("output", self._on_output)
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
        with self._lock:
            self._observers[pid] = observer
        try:
            return self._instrument(device, pid, agent_js, observer)
        except BaseException:
            self.kill(pid)
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
        session.on("detached", lambda reason, crash: self._on_detached(pid, reason))
        try:
            script = session.create_script(agent_js, name="strobe-agent")
        except FRIDA_ERRORS as exc:
            raise FridaAttachFailed(f"The Strobe agent could not be created in pid {pid}: {exc}.") from exc
        handle = ProcessHandle(pid=pid, session=session, script=script, observer=observer)
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
        return handle

    def resume(self, pid: int) -> None:
        try:
            self._get_device().resume(pid)
        except FRIDA_ERRORS as exc:
            raise FridaAttachFailed(f"The process {pid} could not be resumed: {exc}. Launch it again.") from exc

    def kill(self, pid: int) -> None:
        with contextlib.suppress(*FRIDA_ERRORS):  # already gone
            self._get_device().kill(pid)

    def forget(self, pid: int) -> None:
        with self._lock:
            self._observers.pop(pid, None)

    # ---- Frida callbacks (Frida's threads) -------------------------------------------------------

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
        if isinstance(payload, ProcessExit):
            handle.observer.on_exit_code(handle.pid, payload.code)
            with contextlib.suppress(*FRIDA_ERRORS):  # the process may already be tearing down
                handle.script.post(EXIT_ACK)
        elif isinstance(payload, AgentLoaded):
            if payload.protocolVersion != PROTOCOL_VERSION:
                handle.handshake_error = (
                    f"The agent speaks protocol {payload.protocolVersion} but this daemon expects "
                    f"{PROTOCOL_VERSION}: the agent cache is stale. Delete $STROBE_HOME/cache and relaunch."
                )
            handle.loaded.set()
        elif isinstance(payload, AgentLog):
            log.log(
                {"info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}[payload.level],
                "agent pid %d: %s", handle.pid, payload.message,
            )

    def _on_detached(self, pid: int, reason: str) -> None:
        observer = self._observer(pid)
        if observer is not None:
            observer.on_detached(pid, str(reason))
