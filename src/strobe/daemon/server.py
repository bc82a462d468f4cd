"""`strobe daemon`: one per user, on $STROBE_HOME/strobe.sock, serving one MCP session per connection.

Start-up is exclusive through an flock on strobe.lock held for the daemon's whole life, so any number
of proxies may try to start it at once and a daemon killed with -9 leaves nothing that blocks the
next one (its stale socket and pid file are replaced). Everything that signals the daemon through
strobe.pid first checks, with `verified_daemon_pid`, that the pid is the process holding that lock;
connections from another user are refused (`peer_allowed`) even though the socket's mode already keeps
them out. The daemon exits once no tool call has run for `daemon.idleTimeoutMs` (default 30 minutes),
killing the programs it launched.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import socket
import struct
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from strobe.paths import StrobePaths, private_opener
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
        fd = private_opener(str(self._path), os.O_RDWR | os.O_CREAT)
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


def verified_daemon_pid(paths: StrobePaths) -> int | None:
    """The pid in strobe.pid if that process is this STROBE_HOME's daemon now, else None.

    A pid file outlives its daemon (kill -9, a crash, a reboot) and its pid may since belong to anything, so
    the pid alone proves nothing. The proof used is the daemon's lock: the daemon holds an exclusive flock on
    strobe.lock for its whole life, and no other process ever keeps it. The pid is this daemon when one of its
    open files (/proc/<pid>/fd/N) is this home's strobe.lock (same device and inode, compared through the
    kernel's link so overlay filesystems agree) and the kernel lists the flock as held through that very file
    (a `lock:` line in /proc/<pid>/fdinfo/N). A name match on the command line would accept another home's
    daemon; an environment match would miss a daemon using the default home. A process that merely has the
    file open for a moment (a proxy probing the lock) does not name itself in strobe.pid.
    """
    pid = read_pid_file(paths)
    return pid if pid is not None and is_daemon(paths, pid) else None


def read_pid_file(paths: StrobePaths) -> int | None:
    """The pid strobe.pid names (unverified: see `verified_daemon_pid`), or None without a readable one."""
    try:
        pid = int(paths.pid_file.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None
    return pid if pid > 0 else None


def is_daemon(paths: StrobePaths, pid: int) -> bool:
    """True when `pid` holds this STROBE_HOME's daemon lock (see `verified_daemon_pid`)."""
    try:
        lock = os.stat(paths.lock_file)
    except OSError:
        return False
    return _holds_lock(pid, (lock.st_dev, lock.st_ino))


def _holds_lock(pid: int, lock_id: tuple[int, int]) -> bool:
    fd_dir = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:  # gone, or not ours to look at (another user's process is never our daemon)
        return False
    for fd in fds:
        try:
            target = os.stat(f"{fd_dir}/{fd}")
            if (target.st_dev, target.st_ino) != lock_id:
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii", errors="replace") as info:
                if any(line.startswith("lock:") and " FLOCK " in line and " WRITE " in line for line in info):
                    return True
        except OSError:
            continue
    return False


def peer_credentials(sock: Any) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a unix socket, as the kernel recorded them at
    connect() (SO_PEERCRED): the peer cannot choose them."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, gid = struct.unpack("3i", creds)
    return int(pid), int(uid), int(gid)


def peer_allowed(peer: int, own: int) -> bool:
    """Only the daemon's own user may talk to it: the socket's mode (0600, in a 0700 home) already keeps others
    out; this is the second line, should a mode ever be loosened. Root gets no exception: it is not this user."""
    return peer == own


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
        if not self._peer_is_allowed(writer):
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            return
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

    def _peer_is_allowed(self, writer: asyncio.StreamWriter) -> bool:
        own = os.geteuid()
        try:
            pid, uid, _gid = peer_credentials(writer.get_extra_info("socket"))
        except (AttributeError, OSError) as exc:
            log.warning("refused a connection: its peer's credentials could not be read (%s)", exc)
            return False
        if peer_allowed(uid, own):
            return True
        log.warning("refused a connection from pid %d, uid %d: this daemon serves uid %d only", pid, uid, own)
        return False

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
        _write_pid_file(self.paths)
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


def _write_pid_file(paths: StrobePaths) -> None:
    """strobe.pid, 0600, replaced whole (a reader never sees it half-written)."""
    staging = paths.pid_file.with_name(f".strobe.pid.{os.getpid()}")
    with open(staging, "w", encoding="ascii", opener=private_opener) as out:
        out.write(f"{os.getpid()}\n")
    os.replace(staging, paths.pid_file)


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None
