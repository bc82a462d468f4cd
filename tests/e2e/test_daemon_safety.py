"""A daemon that cannot be misused: `strobe shutdown` signals only this home's daemon, an unsafe STROBE_HOME is
refused with a message that says how to fix it, every file is 0600, and a peer of another uid is turned away."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import connect, poll, processes_under, shutdown_daemon
from tests.e2e.test_daemon import alive, daemon_pid

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}


def strobe_cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "strobe", *args], env={**os.environ, "STROBE_HOME": str(home)},
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, check=False,
    )


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


async def _done(condition: bool) -> bool | None:
    return True if condition else None


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated process a stale pid file could name."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def test_shutdown_leaves_a_process_named_by_a_stale_pid_file_alone(
    strobe_home: Path, bystander: subprocess.Popen[bytes]
) -> None:
    (strobe_home / "strobe.pid").write_text(f"{bystander.pid}\n")  # a daemon died; its pid now runs `sleep`
    result = strobe_cli(strobe_home, "shutdown")
    assert result.returncode == 0
    assert bystander.poll() is None, "strobe shutdown signalled a process that is not its daemon"
    assert f"names pid {bystander.pid}, which is not this STROBE_HOME's daemon" in result.stderr


async def test_shutdown_leaves_another_homes_daemon_alone(strobe_home: Path) -> None:
    other = Path(tempfile.mkdtemp(prefix="sh-", dir="/tmp"))
    try:
        async with connect(other) as client:
            await client.call("debug_list_sessions")
            theirs = daemon_pid(other)
            (strobe_home / "strobe.pid").write_text(f"{theirs}\n")  # a strobe daemon, but not this home's
            assert strobe_cli(strobe_home, "shutdown").returncode == 0
            assert (await client.call("debug_list_sessions")) == {"sessions": []}
            assert daemon_pid(other) == theirs  # the same daemon answered: it was not stopped
            # ...while its own home's shutdown does stop it.
            assert strobe_cli(other, "shutdown").returncode == 0
            assert not alive(theirs)
    finally:
        shutdown_daemon(other)  # the one the proxy started again, once the client is gone
        await poll(lambda: _done(not processes_under(other)), 10, f"no process left under {other}")
        shutil.rmtree(other, ignore_errors=True)


@pytest.mark.parametrize("unsafe", ["group-writable", "world-writable", "symlink"])
@pytest.mark.parametrize("command", ["mcp", "daemon", "shutdown"])
def test_an_unsafe_home_is_refused_and_left_unchanged(strobe_home: Path, unsafe: str, command: str) -> None:
    home = strobe_home / "home"
    if unsafe == "symlink":
        real = strobe_home / "real"
        real.mkdir(mode=0o700)
        home.symlink_to(real)
        expected, fix = "is a symlink", f"mkdir -m 700 {home}"
    else:
        home.mkdir()
        os.chmod(home, 0o770 if unsafe == "group-writable" else 0o703)
        expected, fix = "writable by", f"`chmod 700 {home}`"
    before = mode(home)
    result = strobe_cli(home, command)
    try:
        assert result.returncode == 1, result.stderr
        assert expected in result.stderr and fix in result.stderr
        assert result.stdout == ""
        assert mode(home) == before
        assert sorted(p.name for p in home.iterdir()) == []  # no socket, database, log or lock: nothing started
    finally:
        if not home.is_symlink():
            os.chmod(home, 0o700)
        shutdown_daemon(home)  # only does anything if the refusal failed


async def test_every_file_is_0600_whatever_the_umask(strobe_home: Path) -> None:
    for name in ("strobe.db", "daemon.log"):  # left readable by an older version
        (strobe_home / name).touch()
        os.chmod(strobe_home / name, 0o644)
    previous = os.umask(0)  # inherited by the proxy and the daemon it starts
    try:
        async with connect(strobe_home) as client:
            os.umask(previous)
            await client.call("debug_list_sessions")
            files = {p.name: mode(p) for p in strobe_home.iterdir() if not p.is_dir()}
    finally:
        os.umask(previous)
    assert {"strobe.db", "strobe.db-wal", "strobe.db-shm", "daemon.log", "strobe.pid", "strobe.lock",
            "strobe.sock"} <= files.keys()
    assert files == dict.fromkeys(files, 0o600)


def _initialize_over(sock: socket.socket) -> dict[str, object]:
    sock.sendall(json.dumps(INITIALIZE).encode() + b"\n")
    reply = b""
    while not reply.endswith(b"\n"):
        chunk = sock.recv(1 << 16)
        assert chunk, "the daemon closed the connection"
        reply += chunk
    return json.loads(reply)  # type: ignore[no-any-return]


async def test_the_daemon_serves_its_own_uid(strobe_home: Path) -> None:
    async with connect(strobe_home) as client:
        await client.call("debug_list_sessions")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30)
            sock.connect(str(strobe_home / "strobe.sock"))
            assert _initialize_over(sock)["id"] == 1
    assert "refused a connection" not in (strobe_home / "daemon.log").read_text()


OTHER_UID_CLIENT = textwrap.dedent("""
    import json, os, socket, sys
    path, uid = sys.argv[1], int(sys.argv[2])
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    os.setgroups([]); os.setgid(uid); os.setuid(uid)
    sock.settimeout(30)
    sock.connect(path)
    try:  # the daemon may close the connection before the request is even sent
        sock.sendall(sys.argv[3].encode() + b"\\n")
        data = sock.recv(1 << 16)
    except (BrokenPipeError, ConnectionResetError):
        data = b""
    print(json.dumps({"pid": os.getpid(), "reply": data.decode(errors="replace")}))
""")


@pytest.mark.skipif(os.geteuid() != 0, reason="connecting as another uid needs root")
async def test_a_peer_of_another_uid_is_refused_even_when_the_modes_let_it_in(strobe_home: Path) -> None:
    nobody = 65534
    async with connect(strobe_home) as client:
        await client.call("debug_list_sessions")
        sock_path = strobe_home / "strobe.sock"
        os.chmod(strobe_home, 0o711)  # the first line (file modes) opened by hand, to test the second
        os.chmod(sock_path, 0o666)
        try:
            result = subprocess.run(
                [sys.executable, "-c", OTHER_UID_CLIENT, str(sock_path), str(nobody), json.dumps(INITIALIZE)],
                capture_output=True, text=True, timeout=60, check=True,
            )
        finally:
            os.chmod(strobe_home, 0o700)
            os.chmod(sock_path, 0o600)
        outcome = json.loads(result.stdout)
        assert outcome["reply"] == "", "a client of another uid was served"
        expected = f"refused a connection from pid {outcome['pid']}, uid {nobody}: this daemon serves uid 0 only"

        async def logged() -> bool | None:
            return await _done(expected in (strobe_home / "daemon.log").read_text())

        await poll(logged, 10, "the refusal in daemon.log")
        assert (await client.call("debug_list_sessions")) == {"sessions": []}  # the daemon carries on




async def test_every_directory_under_the_home_is_private_whatever_the_umask(
    strobe_home: Path, c_target: Callable[[str], Path], project: Path
) -> None:
    """The caches (symbols, compiled agent) and test-run files live in 0700 directories, so what they hold stays
    the user's even in a home that others may read."""
    os.chmod(strobe_home, 0o755)  # allowed: readable by others, writable by its owner only
    binary = c_target("hello")
    previous = os.umask(0)
    try:
        async with connect(strobe_home) as client:
            os.umask(previous)
            sid = (await client.call("debug_launch", command=str(binary), projectRoot=str(project)))["sessionId"]
            await client.wait_for_status(sid, "exited", 30)
            run = await client.call("debug_test", projectRoot=str(project), framework="generic", command="/bin/true")

            async def finished() -> bool | None:
                status = await client.call("debug_test_status", testRunId=run["testRunId"])
                return True if status["status"] != "running" else None

            await poll(finished, 60, "the test run to finish")
            directories = {str(p.relative_to(strobe_home)): mode(p) for p in strobe_home.rglob("*") if p.is_dir()}
    finally:
        os.umask(previous)
    assert {"cache", "tests"} <= directories.keys(), directories
    assert directories == dict.fromkeys(directories, 0o700)
