"""`strobe mcp`: a byte pipe between the MCP client's stdio and the daemon's socket.

It starts the daemon when none answers. If the daemon goes away (it exits when idle), the proxy
starts a new one, replays the client's initialize handshake (swallowing the reply) and resends any
request still waiting for an answer, so the client never notices. Only protocol bytes reach stdout;
diagnostics go to stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, BinaryIO

from strobe.daemon.server import DaemonLock, is_daemon, read_pid_file
from strobe.paths import StrobePaths, private_opener

CONNECT_DEADLINE_S = 20.0
RESPAWN_EVERY_S = 1.0
REPLAY_ID_PREFIX = "strobe-proxy-replay-"


def start_daemon(paths: StrobePaths) -> None:
    """Start `strobe daemon` detached from this process; anything it prints goes to daemon.log."""
    paths.ensure_home()
    with open(paths.log_file, "ab", opener=private_opener) as log:
        subprocess.Popen(
            [sys.executable, "-m", "strobe", "daemon"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )


def connect(paths: StrobePaths, deadline_s: float = CONNECT_DEADLINE_S) -> socket.socket:
    """Connect to the daemon, starting it (again, every second) until it answers or the deadline passes."""
    paths.ensure_home()
    deadline = time.monotonic() + deadline_s
    next_spawn = 0.0
    last_error: OSError | None = None
    while time.monotonic() < deadline:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(paths.socket))
            return sock
        except OSError as exc:
            sock.close()
            last_error = exc
        now = time.monotonic()
        if now >= next_spawn and not DaemonLock(paths).held_elsewhere():
            start_daemon(paths)
            next_spawn = now + RESPAWN_EVERY_S
        time.sleep(0.02)
    raise ConnectionError(
        f"strobe: the daemon did not come up on {paths.socket} within {deadline_s:.0f}s ({last_error}); "
        f"see {paths.log_file}"
    )


def _peek(line: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


class Proxy:
    def __init__(self, paths: StrobePaths, stdin: BinaryIO, stdout: BinaryIO) -> None:
        self.paths = paths
        self.stdin = stdin
        self.stdout = stdout
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._handshake: list[bytes] = []
        self._pending: dict[str, bytes] = {}
        self._stdin_closed = False
        self._replays = 0
        self._swallow: set[str] = set()

    def run(self) -> int:
        try:
            self._sock = connect(self.paths)
        except ConnectionError as exc:
            print(exc, file=sys.stderr)
            return 1
        reader = threading.Thread(target=self._pump_stdin, name="stdin", daemon=True)
        reader.start()
        return self._pump_socket()

    # client -> daemon
    def _pump_stdin(self) -> None:
        for line in iter(self.stdin.readline, b""):
            message = _peek(line)
            with self._lock:
                if message is not None:
                    method = message.get("method")
                    if method in ("initialize", "notifications/initialized"):
                        self._handshake.append(line)
                    elif "id" in message and method is not None:
                        self._pending[json.dumps(message["id"])] = line
                self._send(line)
        with self._lock:
            self._stdin_closed = True
            if self._sock is not None:
                with contextlib.suppress(OSError):
                    self._sock.shutdown(socket.SHUT_WR)

    def _send(self, data: bytes) -> None:
        if self._sock is None:
            return
        # On failure the socket pump notices, reconnects and resends pending requests.
        with contextlib.suppress(OSError):
            self._sock.sendall(data if data.endswith(b"\n") else data + b"\n")

    # daemon -> client
    def _pump_socket(self) -> int:
        buffer = b""
        while True:
            assert self._sock is not None
            try:
                chunk = self._sock.recv(1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                with self._lock:
                    if self._stdin_closed:
                        return 0
                if not self._reconnect():
                    return 1
                buffer = b""
                continue
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                self._deliver(line + b"\n")

    def _deliver(self, line: bytes) -> None:
        message = _peek(line)
        if message is not None and "id" in message and "method" not in message:
            key = json.dumps(message["id"])
            with self._lock:
                if key in self._swallow:
                    self._swallow.discard(key)
                    return
                self._pending.pop(key, None)
        self.stdout.write(line)
        self.stdout.flush()

    def _reconnect(self) -> bool:
        print("strobe: daemon connection lost; reconnecting", file=sys.stderr)
        try:
            sock = connect(self.paths)
        except ConnectionError as exc:
            print(exc, file=sys.stderr)
            return False
        with self._lock:
            if self._sock is not None:
                self._sock.close()
            self._sock = sock
            for line in self._handshake:
                message = _peek(line)
                if message is not None and message.get("method") == "initialize":
                    self._replays += 1
                    replay_id = f"{REPLAY_ID_PREFIX}{self._replays}"
                    message["id"] = replay_id
                    self._swallow.add(json.dumps(replay_id))
                    line = json.dumps(message).encode() + b"\n"
                self._send(line)
            for line in self._pending.values():
                self._send(line)
            if self._stdin_closed:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_WR)
        return True


def run_proxy(paths: StrobePaths) -> int:
    return Proxy(paths, sys.stdin.buffer, sys.stdout.buffer).run()


def stop_daemon(paths: StrobePaths, timeout_s: float = 15.0) -> bool:
    """Ask this STROBE_HOME's daemon to exit (SIGTERM) and wait for it; True when none is left running.

    Only a process proven to be the daemon is signalled (`strobe.daemon.server.verified_daemon_pid`): a stale
    strobe.pid naming some other process leaves that process alone. The process is pinned with a pidfd before
    it is checked, so the pid cannot be reused by another process between the check and the signal."""
    if not os.path.lexists(paths.home):
        return True
    paths.check_home()
    pid = read_pid_file(paths)
    if pid is None:
        return True
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    except OSError:  # no pidfds (kernel < 5.3): the check and the signal are microseconds apart
        pidfd = None
    try:
        if not is_daemon(paths, pid):
            if _alive(pid):
                print(f"strobe: {paths.pid_file} names pid {pid}, which is not this STROBE_HOME's daemon (a stale "
                      f"pid file: its daemon is gone); that process was left alone. No daemon is running here.",
                      file=sys.stderr)
            return True
        try:
            if pidfd is not None:
                signal.pidfd_send_signal(pidfd, signal.SIGTERM)
            else:
                os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            return True
        if pidfd is not None:  # readable once the process has exited (a zombie counts)
            readable, _, _ = select.select([pidfd], [], [], timeout_s)
            return bool(readable)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not _alive(pid):
                return True
            time.sleep(0.05)
        return False
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _alive(pid: int) -> bool:
    """True while `pid` runs; a zombie (exited, not yet reaped by its parent) counts as gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")
