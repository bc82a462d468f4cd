"""The processes a session follows besides the one it launched: children from fork/vfork/posix_spawn and
the new images of exec(). Frida gates each one (it stops before its first instruction), the launcher loads
the agent into it, and the session gives it the hooks that match its image before resuming it.

An image is what a process runs: a forked child runs its parent's image (same functions at the same
addresses, so the parent's hooks, watches and argument plans apply as they are); an exec() or posix_spawn()
brings a new image, whose functions are looked up again for the session's patterns (watches, resolved
against the launched program's variables, do not carry over)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from strobe.daemon.symbols import SessionSymbols, TraceableFunction, load_session_symbols, preload_main_index
from strobe.instrument.launcher import ProcessHandle
from strobe.store.sessions import SessionStatus


@dataclass(eq=False)
class ProcessImage:
    binary: str
    symbols: asyncio.Future[SessionSymbols]


@dataclass(eq=False)
class ChildProcess:
    pid: int
    parent_pid: int
    handle: ProcessHandle
    image: ProcessImage
    hooked: dict[int, TraceableFunction] = field(default_factory=dict)  # slot -> function, as in SessionTrace
    exit_code: int | None = None
    crash_signal: str | None = None
    ended: bool = False

    def end_status(self, stopping: bool) -> SessionStatus:
        if stopping:
            return SessionStatus.STOPPED
        if self.crash_signal is not None and self.exit_code is None:
            return SessionStatus.CRASHED
        return SessionStatus.EXITED


def load_image(handle: ProcessHandle, binary: str, cache_dir: Path) -> ProcessImage:
    """Start indexing a new image's functions (in a thread); the process waits, gated, until it is hooked."""

    def load() -> SessionSymbols:
        return load_session_symbols(binary, handle.modules, cache_dir, preload_main_index(binary, cache_dir))

    return ProcessImage(binary, asyncio.ensure_future(asyncio.to_thread(load)))
