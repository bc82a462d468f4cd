"""`strobe daemon`: one per user, on $STROBE_HOME/strobe.sock, serving one MCP session per connection.

Start-up is exclusive through an flock on strobe.lock held for the daemon's whole life, so any number
of proxies may try to start it at once and a daemon killed with -9 leaves nothing that blocks the
next one (its stale socket and pid file are replaced). The daemon exits once no tool call has run
for `daemon.idleTimeoutMs` (default 30 minutes), killing the programs it launched.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from strobe.paths import StrobePaths
from strobe.settings import SettingsSource

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
ConnectionHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Any]


class DaemonLock:
    """The exclusive right to be the daemon for one STROBE_HOME."""

    def __init__(self, paths: StrobePaths) -> None:
        self._path = paths.lock_file
        self._fd: int | None = None

    def acquire(self) -> bool:
        fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def held_elsewhere(self) -> bool:
        """True while some daemon (running or starting) holds the lock; does not keep it."""
        if self.acquire():
            self.release()
            return False
        return True

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class IdleClock:
    """Counts tool calls in flight and remembers when the last one ended."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.last_activity = time.monotonic()

    def activity(self, delta: int) -> None:
        self.in_flight += delta
        self.last_activity = time.monotonic()

    def idle_for(self) -> float:
        return 0.0 if self.in_flight else time.monotonic() - self.last_activity


class DaemonServer:
    def __init__(self, paths: StrobePaths, idle: IdleClock, handle_connection: ConnectionHandler) -> None:
        self.paths = paths
        self.idle = idle
        self._handle_connection = handle_connection
        self._connections: set[asyncio.Task[Any]] = set()
        self._stop = asyncio.Event()

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        log.info("client connected (%d open)", len(self._connections))
        try:
            await self._handle_connection(reader, writer)
        except Exception:
            log.exception("connection failed")
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            log.info("client disconnected (%d open)", len(self._connections))

    async def serve(self) -> None:
        """Listen until idle for too long or told to stop (SIGTERM/SIGINT)."""
        socket_path = self.paths.socket
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()  # stale: we hold the lock, so no live daemon owns it
        old_umask = os.umask(0o177)
        try:
            server = await asyncio.start_unix_server(
                self._on_connection, path=str(socket_path), limit=MAX_MESSAGE_BYTES
            )
        finally:
            os.umask(old_umask)
        os.chmod(socket_path, 0o600)
        self.paths.pid_file.write_text(f"{os.getpid()}\n", encoding="utf-8")
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
        log.info("daemon %d listening on %s", os.getpid(), socket_path)
        socket_inode = socket_path.stat().st_ino
        try:
            await self._wait_until_idle(socket_inode)
        finally:
            server.close()
            for task in list(self._connections):
                task.cancel()
            if self._connections:
                await asyncio.wait(list(self._connections), timeout=5)
            if _inode(socket_path) == socket_inode:
                socket_path.unlink()
            with contextlib.suppress(FileNotFoundError, ValueError):
                if int(self.paths.pid_file.read_text()) == os.getpid():
                    self.paths.pid_file.unlink()

    async def _wait_until_idle(self, socket_inode: int) -> None:
        while not self._stop.is_set():
            try:
                still_ours = self.paths.socket.stat().st_ino == socket_inode
            except FileNotFoundError:
                still_ours = False
            if not still_ours:
                log.warning("%s was removed or replaced: nobody can reach this daemon; shutting down",
                            self.paths.socket)
                return
            timeout_s = SettingsSource(self.paths).for_project().idle_timeout_ms / 1000
            idle = self.idle.idle_for()
            if idle >= timeout_s:
                log.info("idle for %.1fs (limit %.1fs): shutting down", idle, timeout_s)
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), min(1.0, max(0.05, timeout_s - idle)))
        log.info("stop requested: shutting down")


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None
