"""The daemon's socket serves only its own user (SO_PEERCRED), and only the process holding a home's daemon lock
counts as that home's daemon."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

from strobe.daemon.server import DaemonLock, is_daemon, peer_allowed, peer_credentials, verified_daemon_pid
from strobe.paths import StrobePaths


def test_only_the_daemons_own_uid_is_allowed() -> None:
    assert peer_allowed(1000, 1000)
    assert not peer_allowed(1001, 1000)
    assert not peer_allowed(0, 1000)  # root is not this user either
    assert not peer_allowed(1000, 0)


def test_peer_credentials_are_the_connecting_process() -> None:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        assert peer_credentials(left) == (os.getpid(), os.geteuid(), os.getegid())


def test_the_lock_holder_is_the_daemon_and_nothing_else_is(tmp_path: Path) -> None:
    paths = StrobePaths(tmp_path)
    other = StrobePaths(tmp_path / "other")
    other.ensure_home()
    bystander = subprocess.Popen(["sleep", "60"])
    lock = DaemonLock(paths)
    other_lock = DaemonLock(other)
    try:
        paths.pid_file.write_text(f"{os.getpid()}\n")
        assert verified_daemon_pid(paths) is None  # no lock held: nobody is the daemon
        assert lock.acquire() and other_lock.acquire()
        assert verified_daemon_pid(paths) == os.getpid()
        assert not is_daemon(paths, bystander.pid)  # alive, but not holding the lock
        paths.pid_file.write_text(f"{bystander.pid}\n")
        assert verified_daemon_pid(paths) is None
        lock.release()
        paths.pid_file.write_text(f"{os.getpid()}\n")
        assert verified_daemon_pid(paths) is None  # holds another home's lock only
        for junk in ("", "abc", "-1", "0"):
            paths.pid_file.write_text(junk)
            assert verified_daemon_pid(paths) is None
    finally:
        lock.release()
        other_lock.release()
        bystander.kill()
        bystander.wait()
