"""The reaper: a small helper process that SIGKILLs what it holds once the daemon is gone, however it went.

What the lifeline (instrument/launcher.py) cannot tie yet, or ever, is held here: a process between its spawn and
its agent tying it, and a test run's process group (no agent at all).
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import threading

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 10.0  # how long close() waits for the helper to kill what it holds and exit

REAPER_SOURCE = """
import errno, os, signal, sys
GROUP = 4  # PIDFD_SIGNAL_PROCESS_GROUP (Linux 6.9): the group whose id is the pidfd's pid, even once it is reaped

def kill(key, fd):
    if key[0] != "g":
        if fd is not None:
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        return
    if fd is not None:
        try:
            signal.pidfd_send_signal(fd, signal.SIGKILL, None, GROUP)
            return
        except OSError as exc:
            if exc.errno != errno.EINVAL:  # ESRCH: the group is empty (EINVAL: a kernel without the flag)
                return
    os.killpg(int(key[1:]), signal.SIGKILL)

held = {}  # "123": the process 123; "g123": the process group 123 leads. A pidfd of 123, None if it was gone
for line in sys.stdin:
    key = line[1:].strip()
    if line[0] == "+":
        try:
            held[key] = os.pidfd_open(int(key.lstrip("g")))
        except OSError:
            held[key] = None
    elif key in held and (fd := held.pop(key)) is not None:
        os.close(fd)
for key, fd in held.items():
    try:
        kill(key, fd)
    except OSError:
        pass
"""


class Reaper:
    """What must not outlive the daemon and nothing else ties to it, held by a helper process (started on first use)
    that SIGKILLs it once its stdin, whose only writer is the daemon, reads end-of-file: the daemon is gone, however
    it went (kill -9 included). Two kinds of things are held:

    - a process not tied to the lifeline yet (spawned, or a child Frida stopped, until its agent answers). The helper
      pins it with a pidfd, so a pid reused after its process ended is never signalled.
    - a whole process group, by its leader (a test run's command, started in a session of its own: it has no agent,
      so no lifeline). The helper pins the leader with a pidfd and at the end signals the group through it
      (PIDFD_SIGNAL_PROCESS_GROUP): every member, grandchildren and processes a fork is creating included, as the
      kernel delivers a group signal atomically against fork; and only that group, even if the leader was reaped and
      its pid reused. On a kernel before 6.9 (or a leader already reaped when the helper got to it) it falls back to
      killpg by number, which could only hit another group if this one had entirely ended and its id had been
      reused in between.

        reaper.hold(pid)           # spawned, or a child Frida stopped
        reaper.let_go(pid)         # its lifeline is tied (or it is dead, or it runs untraced)
        reaper.hold_group(leader)  # a test command just started with start_new_session=True
        reaper.let_go_group(leader)  # the run is over: its group killed, its leader reaped
    """

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._broken = False

    def hold(self, pid: int) -> None:
        self._tell(f"+{pid}\n")

    def let_go(self, pid: int) -> None:
        self._tell(f"-{pid}\n")

    def hold_group(self, leader: int) -> None:
        self._tell(f"+g{leader}\n")

    def let_go_group(self, leader: int) -> None:
        self._tell(f"-g{leader}\n")

    @property
    def pid(self) -> int | None:
        """The helper's pid; None before its first use or after close()."""
        process = self._process
        return process.pid if process is not None else None

    def _tell(self, line: str) -> None:
        with self._lock:
            if self._broken:
                return
            try:
                if self._process is None:  # a session of its own: a signal to the daemon's group spares it
                    self._process = subprocess.Popen(
                        [sys.executable, "-I", "-S", "-c", REAPER_SOURCE], stdin=subprocess.PIPE,
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                    )
                assert self._process.stdin is not None
                self._process.stdin.write(line.encode())
                self._process.stdin.flush()
            except OSError as exc:
                self._broken = True
                log.warning("the reaper is gone (%s): a process, or a test run's process group, that nothing else "
                            "ties to the daemon may outlive it", exc)

    def close(self) -> None:
        """The daemon is closing: whatever the reaper still holds is killed, and it exits."""
        with self._lock:
            process, self._process = self._process, None
        if process is not None:
            assert process.stdin is not None
            with contextlib.suppress(OSError):
                process.stdin.close()
            try:
                process.wait(CLOSE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
