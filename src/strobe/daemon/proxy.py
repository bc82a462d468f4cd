"""`strobe mcp`: a byte pipe between the MCP client's stdio and the daemon's socket.

It starts the daemon when none answers. If the daemon goes away (it exits when idle, or dies), the proxy
starts a new one and replays the client's initialize handshake (with its own id, swallowing the reply), so
the client keeps its session. Only protocol bytes reach stdout; diagnostics go to stderr.

A call is never repeated blindly. A request the old daemon never got (writing it failed) is sent to the new
one. A request it got but never answered may or may not have run, so it is resent only when repeating it is
harmless: `initialize`, `ping`, the `*/list` methods, and the read-only tools `debug_query`,
`debug_list_sessions`, `debug_test_status` and `debug_read` without a `poll` (`SAFE_METHODS`, `SAFE_TOOLS`).
Anything else — debug_launch, debug_test, debug_stop, debug_delete_session, debug_trace, a polling
debug_read, any method not listed — is answered by the proxy with a JSON-RPC error (`DAEMON_RESTARTED`)
saying the daemon restarted while the call was in flight, that it may or may not have run, and how to check.

Patterns and watches staged with debug_trace without a sessionId live in the daemon, for this connection: the
proxy keeps each staging call that succeeded and, after the handshake, makes them again on a new daemon (their
replies swallowed), so the client's next debug_launch still applies them.

A request line longer than `MAX_REQUEST_BYTES` (16 MiB, well under the 64 MiB the daemon's socket reads)
is never read whole nor sent: the proxy answers it with an invalid-request error (with the request's id when
the start of the line names it, else null), skips the rest of the line and goes on with the next one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any, BinaryIO

from strobe.daemon.server import DaemonLock, is_daemon, peer_credentials, read_pid_file
from strobe.paths import StrobePaths, private_opener

CONNECT_DEADLINE_S = 20.0
RESPAWN_EVERY_S = 1.0
REPLAY_ID_PREFIX = "strobe-proxy-replay-"
RESTAGE_TIMEOUT_S = 10.0  # how long a reconnect waits for the new daemon to have staged the patterns again

MAX_REQUEST_BYTES = 16 * 1024 * 1024  # a line longer than this is refused; the daemon reads up to 64 MiB
ID_SCAN_BYTES = 64 * 1024  # how much of a refused line is looked at for its id
DRAIN_CHUNK = 1 << 20
MAX_ECHOED_ID = 256
INVALID_REQUEST = -32600
DAEMON_RESTARTED = -32001  # in JSON-RPC's range for server errors

# Safe to send again to a new daemon after the old one died without answering: they change nothing.
SAFE_METHODS = frozenset({
    "initialize", "ping", "tools/list", "resources/list", "resources/templates/list", "prompts/list",
})
SAFE_TOOLS = frozenset({"debug_query", "debug_list_sessions", "debug_test_status"})

_CHECK_HINTS = {
    "debug_launch": "Call debug_list_sessions: if it launched, its session is listed (stopped by the restart, "
                    "its events kept); launch again only if it is not there.",
    "debug_test": "Call debug_list_sessions (and debug_test_status with the testRunId if you have one): a run "
                  "that started was stopped by the restart; call debug_test again to run the tests.",
    "debug_stop": "Call debug_list_sessions to see the session's status (the restart stopped every live "
                  "session anyway).",
    "debug_delete_session": "Call debug_list_sessions: if the session is still listed, delete it again.",
    "debug_trace": "The restart stopped every live session (patterns staged before this call were staged again); "
                   "call debug_list_sessions, then debug_trace again where it is still needed.",
}
_DEFAULT_HINT = "Call debug_list_sessions to see what state the new daemon has before repeating it."
_WHITESPACE = re.compile(r"[ \t\n\r]*")


@dataclass
class _Pending:
    """A request sent on (or waiting for) the daemon connection, until its answer comes back."""

    request_id: Any
    line: bytes
    name: str  # the tool for tools/call, else the method
    safe: bool  # repeating it cannot have an effect twice
    sent: bool = False  # written whole to the current connection: the daemon may have run it
    stages: bool = False  # debug_trace without a sessionId: patterns for the next launch, kept by the daemon


def _stages(message: dict[str, Any]) -> bool:
    """A debug_trace call without a sessionId (it stages patterns for this connection's next launch)."""
    params = message.get("params")
    if message.get("method") != "tools/call" or not isinstance(params, dict) or params.get("name") != "debug_trace":
        return False
    arguments = params.get("arguments")
    return not isinstance(arguments, dict) or arguments.get("sessionId") is None


def _succeeded(reply: dict[str, Any]) -> bool:
    result = reply.get("result")
    return isinstance(result, dict) and not result.get("isError")


def _classify(message: dict[str, Any]) -> tuple[str, bool]:
    """(what the request is called, whether it is safe to send again). A method or tool name that is not a string
    (a list, an object: the daemon refuses it) is never safe."""
    method = message.get("method")
    if method != "tools/call":
        return str(method)[:MAX_ECHOED_ID], isinstance(method, str) and method in SAFE_METHODS
    params = message.get("params")
    params = params if isinstance(params, dict) else {}
    name = params.get("name")
    arguments = params.get("arguments")
    arguments = arguments if isinstance(arguments, dict) else {}
    if name == "debug_read":
        return "debug_read", arguments.get("poll") is None
    return str(name)[:MAX_ECHOED_ID], isinstance(name, str) and name in SAFE_TOOLS


def _answerable_id(value: Any) -> bool:
    """An id MCP allows (a string or an integer): the daemon answers under it. Any other it answers with id null,
    so the proxy does not wait for it."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _usable_id(value: Any) -> bool:
    return (isinstance(value, str) and len(value) <= MAX_ECHOED_ID) or (
        isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63)


def leading_id(head: bytes) -> Any:
    """The top-level "id" of the JSON object `head` starts, when it comes before anything that does not fit in
    `head` (clients write jsonrpc, id and method before params); else None. Bounded by len(head)."""
    text = head.decode("utf-8", errors="ignore")
    decoder = json.JSONDecoder()
    pos = _WHITESPACE.match(text, 0).end()  # type: ignore[union-attr]
    if text[pos:pos + 1] != "{":
        return None
    pos += 1
    try:
        while True:
            pos = _WHITESPACE.match(text, pos).end()  # type: ignore[union-attr]
            key, pos = decoder.raw_decode(text, pos)
            pos = _WHITESPACE.match(text, pos).end()  # type: ignore[union-attr]
            if not isinstance(key, str) or text[pos:pos + 1] != ":":
                return None
            pos = _WHITESPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
            value, pos = decoder.raw_decode(text, pos)
            pos = _WHITESPACE.match(text, pos).end()  # type: ignore[union-attr]
            following = text[pos:pos + 1]
            if following not in (",", "}"):  # cut short by the end of `head` (a number could be truncated)
                return None
            if key == "id":
                return value if _usable_id(value) else None
            if following == "}":
                return None
            pos += 1
    except ValueError:
        return None


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
        except OSError as exc:
            sock.close()
            last_error = exc
        else:
            _, uid, _ = peer_credentials(sock)
            if uid == os.getuid():
                return sock
            sock.close()
            raise ConnectionError(
                f"strobe: {paths.socket} is served by a process of user {uid}, not by your daemon; nothing was sent "
                f"to it. Remove the socket (and find out who made it), or use another STROBE_HOME.")
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


def _error(request_id: Any, code: int, message: str) -> bytes:
    reply = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return json.dumps(reply).encode() + b"\n"


def restarted_error(request_id: Any, name: str) -> bytes:
    return _error(request_id, DAEMON_RESTARTED, (
        f"strobe: the daemon restarted while {name} was in flight, so it may or may not have run; it was not "
        f"sent again, so that it cannot run twice. {_CHECK_HINTS.get(name, _DEFAULT_HINT)}"))


def too_large_error(request_id: Any, size: int) -> bytes:
    return _error(request_id, INVALID_REQUEST, (
        f"Request too large: the message is {size} bytes and strobe mcp accepts at most {MAX_REQUEST_BYTES} "
        f"({MAX_REQUEST_BYTES // (1024 * 1024)} MiB) per JSON-RPC line; it was not sent to the daemon. Send "
        "shorter arguments."))


class Proxy:
    def __init__(self, paths: StrobePaths, stdin: BinaryIO, stdout: BinaryIO) -> None:
        self.paths = paths
        self.stdin = stdin
        self.stdout = stdout
        # Writing to the daemon holds _send_lock (taken first); the state below holds _lock only briefly, so
        # delivering an answer never waits for a long write to a slow daemon.
        self._send_lock = threading.Lock()  # the connection: one writer at a time, none while reconnecting
        self._lock = threading.Lock()  # the handshake, pending requests, swallowed replies
        self._out_lock = threading.Lock()  # whole lines on stdout: replies and the proxy's own errors
        self._sock: socket.socket | None = None
        self._handshake: list[bytes] = []
        self._pending: dict[str, _Pending] = {}
        self._stdin_closed = False
        self._replays = 0
        self._swallow: set[str] = set()
        self._staged: list[bytes] = []  # staging calls that succeeded, in order: made again on a new daemon

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
        while line := self.stdin.readline(MAX_REQUEST_BYTES + 1):
            if len(line) > MAX_REQUEST_BYTES:  # no newline within the limit
                self._refuse_too_large(line)
                continue
            message = _peek(line)
            with self._send_lock:
                pending = None
                if message is not None:
                    method = message.get("method")
                    with self._lock:
                        if method in ("initialize", "notifications/initialized"):
                            self._handshake.append(line)
                        if "id" in message and method is not None and _answerable_id(message["id"]):
                            name, safe = _classify(message)
                            pending = _Pending(message["id"], line, name, safe, stages=_stages(message))
                            self._pending[json.dumps(message["id"])] = pending
                sent = self._send(line)
                if pending is not None:
                    with self._lock:
                        pending.sent = sent
        with self._send_lock, self._lock:
            self._stdin_closed = True
            if self._sock is not None:
                with contextlib.suppress(OSError):
                    self._sock.shutdown(socket.SHUT_WR)

    def _refuse_too_large(self, head: bytes) -> None:
        """Answer a line over the limit and skip the rest of it, reading it in bounded chunks."""
        request_id = leading_id(head[:ID_SCAN_BYTES])
        size = len(head)
        chunk = head
        while not chunk.endswith(b"\n"):
            chunk = self.stdin.readline(DRAIN_CHUNK)
            if not chunk:
                break
            size += len(chunk)
        if chunk.endswith(b"\n"):
            size -= 1
        print(f"strobe: refused a {size}-byte request (over {MAX_REQUEST_BYTES} bytes)", file=sys.stderr)
        self._write(too_large_error(request_id, size))

    def _send(self, data: bytes) -> bool:
        """Write one line to the daemon; False when it could not be written (the socket pump reconnects)."""
        if self._sock is None:
            return False
        try:
            self._sock.sendall(data if data.endswith(b"\n") else data + b"\n")
        except OSError:
            return False
        return True

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
                leftover = self._reconnect()
                if leftover is None:
                    return 1
                buffer = leftover
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
                pending = self._pending.pop(key, None)
                if pending is not None and pending.stages and _succeeded(message):
                    self._staged.append(pending.line)
        self._write(line)

    def _write(self, line: bytes) -> None:
        with self._out_lock:
            self.stdout.write(line)
            self.stdout.flush()

    def _reconnect(self) -> bytes | None:
        """Connect to a (new) daemon: the handshake again, the staged patterns again (their replies awaited, so a
        launch sent next finds them staged: the daemon runs the calls of a connection concurrently), then what
        may be sent again. Returns what was read past those replies; None if no daemon came up."""
        print("strobe: daemon connection lost; reconnecting", file=sys.stderr)
        try:
            sock = connect(self.paths)
        except ConnectionError as exc:
            print(exc, file=sys.stderr)
            return None
        with self._send_lock:
            with self._lock:
                if self._sock is not None:
                    self._sock.close()
                self._sock = sock
                resent: set[str] = set()
                for line in self._handshake:
                    message = _peek(line)
                    if message is not None and message.get("method") == "initialize":
                        key = json.dumps(message.get("id"))
                        if key in self._pending:  # the client still waits for this answer: send it as it came
                            resent.add(key)
                            self._pending[key].sent = self._send(line)
                            continue
                        _, line = self._as_replay(message)
                    self._send(line)
                restaged = [self._as_replay(message) for message in map(_peek, self._staged) if message is not None]
                for _, line in restaged:
                    self._send(line)
            leftover = self._await_replays(sock, [key for key, _ in restaged])
            with self._lock:
                for key, pending in list(self._pending.items()):
                    if key in resent:
                        continue
                    if pending.sent and not pending.safe:  # the old daemon may have run it: never twice
                        del self._pending[key]
                        print(f"strobe: {pending.name} was in flight when the daemon went away; not repeated",
                              file=sys.stderr)
                        self._write(restarted_error(pending.request_id, pending.name))
                    else:
                        pending.sent = self._send(pending.line)
                if self._stdin_closed:
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_WR)
        return leftover

    def _as_replay(self, message: dict[str, Any]) -> tuple[str, bytes]:
        """The request under an id of the proxy's own, whose reply is swallowed: (that id's key, the line). Call with
        _lock held."""
        self._replays += 1
        message["id"] = f"{REPLAY_ID_PREFIX}{self._replays}"
        key = json.dumps(message["id"])
        self._swallow.add(key)
        return key, json.dumps(message).encode() + b"\n"

    def _await_replays(self, sock: socket.socket, keys: list[str]) -> bytes:
        """Read (and deliver) what the daemon sends until it has answered the replays `keys`, for at most
        RESTAGE_TIMEOUT_S; returns the bytes read past the last whole line."""
        buffer = b""
        deadline = time.monotonic() + RESTAGE_TIMEOUT_S
        while True:
            with self._lock:
                if not any(key in self._swallow for key in keys):
                    return buffer
            left = deadline - time.monotonic()
            if left <= 0:
                return buffer
            readable, _, _ = select.select([sock], [], [], left)
            try:
                chunk = sock.recv(1 << 16) if readable else b""
            except OSError:
                chunk = b""
            if not chunk:  # gone again (the socket pump sees it too), or too slow
                return buffer
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                self._deliver(line + b"\n")


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
