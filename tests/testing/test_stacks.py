"""Stack capture from outside a process: the tools' output formats, the choice of tool (eu-stack, gdb when it is
missing, py-spy for Python when installed), and the process tree of a test run, on real deadlocked programs."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from strobe.testing import stacks
from strobe.testing.adapters.base import StackKind
from strobe.testing.stacks import (
    Frame,
    ThreadStack,
    capture_stacks,
    capture_tree,
    parse_eu_stack,
    parse_gdb,
    parse_py_spy,
    pipe_holders,
    process_tree,
)

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"

EU_STACK = f"""PID 4242 - process
TID 4242:
#0  0x00007f00000012ab __GI___libc_read - {LIBC}
    ../sysdeps/unix/sysv/linux/read.c:26:10
#1  0x00005600000011aa wait_for_reply - /home/me/app/client
    /home/me/app/client.c:8:18
#2  0x0000560000001202 main - /home/me/app/client
    /home/me/app/client.c:19:5
TID 4243:
#0  0x00007f0000002000 - /usr/bin/dash
#1  0x0000560000001300 net::poll_socket::h0123456789abcdef - /home/me/app/client
"""

GDB = """[New LWP 4243]
futex_wait (private=0, expected=2, futex_word=0x5600 <b>) at ../sysdeps/nptl/futex-internal.h:146

Thread 2 (Thread 0x7f0000000640 (LWP 4243) "audit"):
#0  futex_wait (private=0, expected=2, futex_word=0x5600 <a>) at ../sysdeps/nptl/futex-internal.h:146
#1  0x00007f0000003482 in ___pthread_mutex_lock (mutex=0x5600 <a>) at ./nptl/pthread_mutex_lock.c:93
#2  0x000056000000119d in audit_ledger (arg=0x0) at deadlock.c:22
#3  0x00007f00000041f5 in start_thread (arg=<optimized out>) from /lib/x86_64-linux-gnu/libc.so.6

Thread 1 (Thread 0x7f0000000740 (LWP 4242) "deadlock"):
#0  0x00007f0000005000 in __pthread_clockjoin_ex () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00005600000011f0 in main () at deadlock.c:35
[Inferior 1 (process 4242) detached]
"""

PY_SPY = """Process 4242: python -m pytest tests
Python v3.11.7 (/usr/bin/python3.11)

Thread 4242 (idle): "MainThread"
    wait (threading.py:320)
    wait_for_server (tests/test_client.py:14)
    test_handshake (tests/test_client.py:30)
Thread 0x7F0011 (active): "worker"
    serve (app/server.py:88)
"""


@pytest.fixture
def spawn() -> Iterator[Callable[..., subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(*argv: str | Path) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([str(a) for a in argv], stdout=subprocess.DEVNULL, start_new_session=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def wait_for(check: Callable[[], object], timeout: float = 10.0) -> object:
    """Poll `check` until it returns something truthy (a deadline, not a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := check():
            return result
        time.sleep(0.05)
    raise AssertionError(f"condition not met within {timeout}s")


def deadlocked(pid: int, **options: object) -> Callable[[], list[ThreadStack] | None]:
    """A check: the stacks of `pid` once both worker threads wait on their second lock."""
    def check() -> list[ThreadStack] | None:
        threads = capture_stacks(pid, **options)  # type: ignore[arg-type]
        own = {f.function for t in threads for f in t.user_frames}
        return threads if {"transfer_funds", "audit_ledger"} <= own else None
    return check


# ---- formats ----

def test_eu_stack_output_gives_threads_frames_sources_and_modules() -> None:
    threads = parse_eu_stack(EU_STACK, {4242: "client", 4243: "poller"})
    assert [(t.tid, t.name) for t in threads] == [(4242, "client"), (4243, "poller")]
    main = threads[0]
    assert main.functions == ("__GI___libc_read", "wait_for_reply", "main")
    assert main.calls[1] == Frame("wait_for_reply", "/home/me/app/client.c:8", "/home/me/app/client")
    assert main.frames[1] == "wait_for_reply at /home/me/app/client.c:8"
    assert [f.function for f in main.user_frames] == ["wait_for_reply"]  # libc and main are not the program's own
    assert threads[1].calls[0] == Frame("??", None, "/usr/bin/dash")  # a frame without a symbol
    assert threads[1].calls[1].function == "net::poll_socket::h0123456789abcdef"


def test_gdb_output_gives_threads_with_names_and_frames() -> None:
    threads = parse_gdb(GDB)
    assert [(t.tid, t.name) for t in threads] == [(4242, "deadlock"), (4243, "audit")]
    audit = threads[1]
    assert audit.functions == ("futex_wait", "___pthread_mutex_lock", "audit_ledger", "start_thread")
    assert audit.calls[2] == Frame("audit_ledger", "deadlock.c:22", None)
    assert audit.calls[3].module == "/lib/x86_64-linux-gnu/libc.so.6"
    assert [f.function for f in audit.user_frames] == ["audit_ledger"]
    assert threads[0].functions == ("__pthread_clockjoin_ex", "main")


def test_py_spy_output_gives_python_frames() -> None:
    threads = parse_py_spy(PY_SPY)
    assert [(t.tid, t.name) for t in threads] == [(4242, "MainThread"), (0x7F0011, "worker")]
    assert threads[0].frames == ["wait at threading.py:320", "wait_for_server at tests/test_client.py:14",
                                 "test_handshake at tests/test_client.py:30"]


def test_user_frames_exclude_system_libraries_runtimes_and_dependencies() -> None:
    assert Frame("parse_header", "src/parse.c:10", "/home/me/app/bin").is_user
    assert Frame("wait", "/home/me/proj/tests/helpers.py:3").is_user
    assert not Frame("pthread_mutex_lock", None, LIBC).is_user
    assert not Frame("clock_nanosleep", "../sysdeps/unix/sysv/linux/clock_nanosleep.c:48", "/home/me/app/bin").is_user
    assert not Frame("std::thread::park", None, "/home/me/app/bin").is_user
    assert not Frame("wait", "/usr/lib/python3.11/threading.py:320").is_user
    assert not Frame("runtestprotocol", "/home/me/.venv/lib/python3.11/site-packages/_pytest/runner.py:1").is_user
    assert not Frame("main", None, "/home/me/app/bin").is_user


# ---- real captures ----

def test_eu_stack_captures_every_thread_of_a_deadlocked_program(programs: Callable[[str], Path],
                                                                spawn: Callable[..., subprocess.Popen[bytes]]) -> None:
    proc = spawn(programs("deadlock"))
    threads = wait_for(deadlocked(proc.pid))
    assert isinstance(threads, list)
    by_name = {t.name: t for t in threads}
    assert set(by_name) == {"deadlock", "transfer", "audit"}  # thread names come from /proc/<pid>/task/<tid>/comm
    assert by_name["deadlock"].tid == proc.pid
    transfer = by_name["transfer"]
    assert "___pthread_mutex_lock" in transfer.functions or "__pthread_mutex_lock" in transfer.functions
    own = transfer.user_frames[0]
    assert own.function == "transfer_funds" and own.location and own.location.endswith("deadlock.c:14")
    fast = capture_stacks(proc.pid, detail=False)  # what the detector compares: names only, no sources
    assert {t.name for t in fast} == set(by_name)
    assert all(f.location is None for t in fast for f in t.calls)


def test_gdb_reads_the_same_stacks(programs: Callable[[str], Path],
                                   spawn: Callable[..., subprocess.Popen[bytes]]) -> None:
    proc = spawn(programs("deadlock"))
    wait_for(deadlocked(proc.pid))
    threads = capture_stacks(proc.pid, tool="gdb")
    assert {t.name for t in threads} == {"deadlock", "transfer", "audit"}
    audit = next(t for t in threads if t.name == "audit")
    assert audit.user_frames[0].function == "audit_ledger"
    assert (audit.user_frames[0].location or "").endswith("deadlock.c:23")


def test_gdb_is_the_fallback_when_eu_stack_is_missing(programs: Callable[[str], Path],
                                                      spawn: Callable[..., subprocess.Popen[bytes]],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    proc = spawn(programs("deadlock"))
    wait_for(deadlocked(proc.pid))
    real_which, real_run = shutil.which, stacks._run
    tools: list[str] = []

    def run(argv: list[str]) -> tuple[int, str]:
        tools.append(argv[0])
        return real_run(argv)

    monkeypatch.setattr(shutil, "which", lambda name: None if name == "eu-stack" else real_which(name))
    monkeypatch.setattr(stacks, "_run", run)
    threads = capture_stacks(proc.pid)
    assert tools == ["gdb"]
    assert {f.function for t in threads for f in t.user_frames} == {"transfer_funds", "audit_ledger"}


def test_python_capture_tries_py_spy_then_falls_back_to_native(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               spawn: Callable[..., subprocess.Popen[bytes]]) -> None:
    proc = spawn(sys.executable, "-c", "import time; time.sleep(120)")
    wait_for(lambda: capture_stacks(proc.pid, detail=False))
    fake = tmp_path / "py-spy"  # stands in for py-spy (not installed here): prints a dump in its format
    fake.write_text(f"#!/bin/sh\n[ \"$1 $2 $3\" = 'dump --pid {proc.pid}' ] || exit 3\ncat <<'EOF'\n{PY_SPY}EOF\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")

    python = capture_stacks(proc.pid, StackKind.PYTHON)
    assert python[0].functions == ("wait", "wait_for_server", "test_handshake")

    native = capture_stacks(proc.pid, StackKind.NATIVE)  # native kind never asks py-spy
    assert native and "wait_for_server" not in {f for t in native for f in t.functions}

    fake.write_text("#!/bin/sh\necho 'Permission denied' >&2\nexit 1\n")  # py-spy failing: native stacks instead
    fallback = capture_stacks(proc.pid, StackKind.PYTHON)
    assert fallback and fallback[0].tid == proc.pid and "wait_for_server" not in fallback[0].functions


def test_process_tree_lists_the_wrapper_and_its_children(programs: Callable[[str], Path],
                                                         spawn: Callable[..., subprocess.Popen[bytes]]) -> None:
    shell = spawn("sh", "-c", f"{programs('deadlock')} & {programs('blocked_read')} & wait")
    def children_started() -> list[int] | None:  # forked and exec'd: a child still named "sh" has not run yet
        tree = process_tree(shell.pid)
        names = sorted(stacks.command_name(pid) for pid in tree[1:])
        return tree if len(tree) == 3 and names == ["blocked_read", "deadlock"] else None

    tree = wait_for(children_started)
    assert isinstance(tree, list) and tree[0] == shell.pid
    wait_for(deadlocked(next(pid for pid in tree[1:] if stacks.command_name(pid) == "deadlock")))

    captured = capture_tree(shell.pid, detail=False)
    assert sorted(p.command for p in captured) == ["blocked_read", "deadlock", "sh"]
    assert [p.pid for p in captured] == tree
    assert [p.is_wrapper for p in captured if p.command == "sh"] == [True]
    assert not any(p.is_wrapper for p in captured if p.command != "sh")
    assert all(p.threads and p.error is None for p in captured)

    for child in tree[1:]:
        os.kill(child, signal.SIGKILL)
    shell.wait(timeout=10)  # the shell reaped its children, then ended
    assert process_tree(shell.pid) == []
    assert capture_stacks(shell.pid) == [] and capture_tree(shell.pid) == []


def test_pipe_holders_finds_a_process_by_the_output_pipe_it_inherited(
        spawn: Callable[..., subprocess.Popen[bytes]]) -> None:
    read_end, write_end = os.pipe()
    try:
        holder = subprocess.Popen(["sleep", "60"], stdout=write_end, start_new_session=True)
        os.close(write_end)
        inode = os.fstat(read_end).st_ino
        assert pipe_holders({inode}) == {holder.pid}  # the reading end held here does not count
        holder.kill()
        holder.wait()
        assert pipe_holders({inode}) == set()
    finally:
        os.close(read_end)
