"""One traced process: the launched one and every followed child are the same kind of object; the launched
one is only the root of the session's process tree (parent_pid None).

A process runs an image (a program: its binary, its runtime, its function index loading in the background).
A forked child shares its parent's image; exec() and posix_spawn() bring a new one. Each process has its own
agent handle, its own hooks (function slot -> function; slots are session-wide), its own trace ingest, and its
own end: exit code, or the signal a stored crash report said it is dying of.

    root = TracedProcess(pid, None, handle, image, ingest)
    child = TracedProcess(child_pid, root.pid, child_handle, root.image, ingest.sibling(child_pid))
    child.end_status(stopping=False)   # EXITED, CRASHED (a crash report and no exit code) or STOPPED
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from strobe.daemon.ingest import TraceIngest
from strobe.daemon.runtimes import Runtime, RuntimeKind
from strobe.daemon.runtimes.base import AgentHandle
from strobe.daemon.symbols import SessionSymbols, TraceableFunction
from strobe.store.sessions import SessionStatus


@dataclass(eq=False)
class ProcessImage:
    binary: str
    kind: RuntimeKind  # what it was detected to run
    runtime: Runtime  # what traces it (native until kind's runtime is registered)
    symbols: asyncio.Future[SessionSymbols]


@dataclass(eq=False)
class TracedProcess:
    pid: int
    parent_pid: int | None  # None: the launched process
    handle: AgentHandle
    image: ProcessImage
    ingest: TraceIngest
    hooked: dict[int, TraceableFunction] = field(default_factory=dict)  # function slot -> function
    exit_code: int | None = None
    crash_signal: str | None = None  # a crash report was stored: it is dying of this signal
    ended: bool = False
    recorded: SessionStatus | None = None  # how its end was stored, once it is

    @property
    def is_root(self) -> bool:
        return self.parent_pid is None

    def end_status(self, stopping: bool) -> SessionStatus:
        if stopping:
            return SessionStatus.STOPPED
        if self.crash_signal is not None and self.exit_code is None:
            return SessionStatus.CRASHED
        return SessionStatus.EXITED

    def rebind(self, handle: AgentHandle, image: ProcessImage, ingest: TraceIngest) -> None:
        """The process exec()ed: same pid, a new program with a new agent (which numbers its records afresh)
        and nothing hooked yet."""
        self.handle, self.image, self.ingest = handle, image, ingest
        self.hooked = {}
        self.ended, self.recorded = False, None
