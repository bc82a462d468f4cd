"""How processes ended, from the kernel: the process connector (netlink, CN_PROC) reports every task's exit
with its wait status, whatever way it ended. The agent reports exit codes itself (agent/src/common/exit.ts:
exit(), _exit(), the syscall() wrapper, the sanitizers' exit), but nothing in the process sees an inline
`syscall` instruction calling exit_group: that code comes from here.

    statuses = ExitStatuses.shared()     # one subscription per daemon process, started at once (not waiting)
    status = statuses.wait(pid, 1.0)     # after Frida said the process is gone: ExitStatus, or None
    status.code if status.exited else status.signal

Who may listen: kernels with the change "connector/cn_proc: Allow non-root users access" (2023) let any user
listen (measured on this machine's 6.18: root, root without CAP_NET_ADMIN and uid 65534 all receive exit events);
older ones need CAP_NET_ADMIN (root). The kernel answers the subscription: refused (EPERM when binding or in its
answer), or never answered (a daemon in a user or pid namespace other than the initial ones: the kernel ignores
it), `available` is False and `reason` says why; every lookup then answers None at once, and an exit code the
agent did not report stays unknown, never guessed.

What is kept: per thread group (pid), its last exit event and whether its leader (the thread whose tid is the
pid) has exited, for a bounded time and number of processes. A fork or exec of that pid forgets what came
before (a reused pid, a new program). A group's status is its last event's: exit_group and a fatal signal give
every thread the group's status; a leader that ended early through pthread_exit() shows the later threads'.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import logging
import os
import random
import select
import socket
import struct
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

log = logging.getLogger(__name__)

NETLINK_CONNECTOR = 11
CN_IDX_PROC = 1
CN_VAL_PROC = 1
PROC_CN_MCAST_LISTEN = 1
PROC_CN_MCAST_IGNORE = 2
PROC_EVENT_NONE = 0x00000000  # the answer to a subscription: its error (0: listening)
PROC_EVENT_FORK = 0x00000001
PROC_EVENT_EXEC = 0x00000002
PROC_EVENT_EXIT = 0x80000000
NLMSG_DONE = 3

_NLMSG = struct.Struct("=IHHII")  # length, type, flags, sequence, port
_CN_MSG = struct.Struct("=IIIIHH")  # idx, val, seq, ack, len, flags
_EVENT = struct.Struct("=IIQ")  # what, cpu, timestamp
_FORK = struct.Struct("=IIII")  # parent pid, parent tgid, child pid, child tgid
_EXEC = struct.Struct("=II")  # pid, tgid
_EXIT = struct.Struct("=IIII")  # pid, tgid, exit code (a wait status), exit signal
_EVENT_AT = _NLMSG.size + _CN_MSG.size
_DATA_AT = _EVENT_AT + _EVENT.size

ANSWER_TIMEOUT_S = 2.0  # the kernel answers a subscription at once, or never
KEEP_S = 120.0  # how long an exit is remembered
KEEP_MAX = 8192  # and for how many processes at most


@dataclass(frozen=True)
class ExitStatus:
    """A wait status: exited with `code`, or killed by `signal`."""

    status: int

    @property
    def exited(self) -> bool:
        return self.status & 0x7F == 0

    @property
    def code(self) -> int:
        return (self.status >> 8) & 0xFF

    @property
    def signal(self) -> int:
        return self.status & 0x7F


@dataclass
class _Group:
    status: int
    leader_gone: bool
    at: float


class ExitStatuses:
    """Exit statuses of recently ended processes, read from the process connector on a thread of its own."""

    _shared: ExitStatuses | None = None
    _shared_lock = threading.Lock()

    def __init__(self) -> None:
        self.available = False  # subscribed and not refused; accepted once `answered` is set too
        self.reason: str | None = None
        self.answered = threading.Event()  # the kernel accepted or refused, or did not answer in time
        self._groups: OrderedDict[int, _Group] = OrderedDict()
        self._changed = threading.Condition()
        self._sock: socket.socket | None = None
        self._wake_r, self._wake_w = -1, -1
        self._thread: threading.Thread | None = None
        self._closed = False
        # The kernel answers a subscription to every listener with its `ack` + 1 (its sequence number is the
        # kernel's own): this tells the answer to this subscription from other listeners'.
        self._ack = random.getrandbits(31)

    @classmethod
    def shared(cls) -> ExitStatuses:
        """The daemon's one subscription (the kernel sends every exit to each listener), started on first use and
        ended when the daemon exits."""
        with cls._shared_lock:
            if cls._shared is None:
                cls._shared = cls()
                cls._shared.start()
                atexit.register(cls._shared.close)
            return cls._shared

    @staticmethod
    def permitted() -> bool:
        """Whether this process is served: subscribes, waits for the kernel's answer, and lets go."""
        statuses = ExitStatuses()
        try:
            statuses.start()
            statuses.answered.wait(ANSWER_TIMEOUT_S + 1)
            return statuses.available
        finally:
            statuses.close()

    def start(self) -> None:
        """Subscribe; the kernel's answer comes on the reader thread (it does not hold up the daemon's start)."""
        try:
            self._sock = _subscribe(self._ack)
        except OSError as exc:
            self._refused(f"{exc.strerror or exc} when subscribing")
            return
        self._wake_r, self._wake_w = os.pipe()
        self.available = True
        self._thread = threading.Thread(target=self._read, name="strobe-exits", daemon=True)
        self._thread.start()

    def _refused(self, why: str) -> None:
        with self._changed:
            self.available = False
            self.reason = (f"the kernel's process connector does not serve this daemon ({why}; older kernels "
                           "serve only root): the exit code of a program that ends through an inline exit_group system "
                           "call is unknown")
            self._changed.notify_all()
        self.answered.set()
        log.warning("%s", self.reason)

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        if self._thread is not None:
            os.write(self._wake_w, b"x")
            self._thread.join(timeout=5)
            self._thread = None
        if self._sock is not None:
            _unsubscribe(self._sock, self._ack)
            self._sock = None
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                os.close(fd)
        self._wake_r = self._wake_w = -1
        self.available = False

    def wait(self, pid: int, timeout: float) -> ExitStatus | None:
        """How the process `pid` ended, once its leader's exit has been seen (at most `timeout` seconds); None when
        the connector does not serve this daemon or said nothing in time."""
        deadline = time.monotonic() + timeout
        if not self.answered.wait(timeout):
            return None
        with self._changed:
            while True:
                if not self.available or self._closed:  # refused, or never answered: events may not be ours
                    return None
                group = self._groups.get(pid)
                if group is not None and group.leader_gone:
                    return ExitStatus(group.status)
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._changed.wait(left)

    # ---- the reader thread -----------------------------------------------------------------------------------

    def _read(self) -> None:
        sock = self._sock
        assert sock is not None
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        no_answer_after = time.monotonic() + ANSWER_TIMEOUT_S
        while not self._closed:
            waiting = not self.answered.is_set()
            try:
                ready = poller.poll(max(0, int((no_answer_after - time.monotonic()) * 1000)) if waiting else None)
                if any(fd == self._wake_r for fd, _ in ready):
                    return
                if not ready:
                    self._refused("no answer: the daemon runs in a user or pid namespace the kernel does not serve")
                    return
                data = sock.recv(65536)
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:  # the kernel dropped events: a busy machine; carry on
                    log.warning("process connector: the kernel dropped events (receive buffer full)")
                    continue
                if not self._closed:
                    log.exception("process connector: reading stopped")
                    self._refused(f"reading failed: {exc}")
                return
            self._take(data)

    def _take(self, data: bytes) -> None:
        at = 0
        while at + _DATA_AT <= len(data):
            length = _NLMSG.unpack_from(data, at)[0]
            if length < _DATA_AT or at + length > len(data):
                return
            self._event(data, at)
            at += (length + 3) & ~3

    def _event(self, data: bytes, at: int) -> None:
        what = _EVENT.unpack_from(data, at + _EVENT_AT)[0]
        body = at + _DATA_AT
        now = time.monotonic()
        if what == PROC_EVENT_NONE:
            if _CN_MSG.unpack_from(data, at + _NLMSG.size)[3] == self._ack + 1 and not self.answered.is_set():
                error = struct.unpack_from("=I", data, body)[0]
                if error:
                    self._refused(f"{os.strerror(error)} in its answer")
                else:
                    log.info("process connector: listening for exit statuses")
                self.answered.set()
            return
        with self._changed:
            if what == PROC_EVENT_EXIT:
                pid, tgid, status, _signal = _EXIT.unpack_from(data, body)
                group = self._groups.pop(tgid, None)
                leader_gone = pid == tgid or (group is not None and group.leader_gone)
                self._groups[tgid] = _Group(status, leader_gone, now)
                self._changed.notify_all()
            elif what == PROC_EVENT_FORK:
                _, _, child_pid, child_tgid = _FORK.unpack_from(data, body)
                if child_pid == child_tgid:  # a new process, not a thread: a pid used again
                    self._groups.pop(child_tgid, None)
            elif what == PROC_EVENT_EXEC:
                self._groups.pop(_EXEC.unpack_from(data, body)[1], None)
            else:
                return
            while self._groups:
                oldest = next(iter(self._groups.values()))
                if len(self._groups) <= KEEP_MAX and now - oldest.at <= KEEP_S:
                    break
                self._groups.popitem(last=False)


def _subscribe(ack: int) -> socket.socket:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, NETLINK_CONNECTOR)
    try:
        with contextlib.suppress(OSError):  # a larger buffer where permitted: fewer events dropped on busy machines
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        sock.bind((0, CN_IDX_PROC))
        sock.send(_control(PROC_CN_MCAST_LISTEN, ack))
    except OSError:
        sock.close()
        raise
    return sock


def _unsubscribe(sock: socket.socket, ack: int) -> None:
    with contextlib.suppress(OSError):
        sock.send(_control(PROC_CN_MCAST_IGNORE, ack))
    sock.close()


def _control(op: int, ack: int) -> bytes:
    payload = struct.pack("=I", op)
    message = _CN_MSG.pack(CN_IDX_PROC, CN_VAL_PROC, 0, ack, len(payload), 0) + payload
    return _NLMSG.pack(_NLMSG.size + len(message), NLMSG_DONE, 0, 0, 0) + message
