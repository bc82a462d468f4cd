"""Thread stops: some threads of a traced process held stopped (a breakpoint's `allThreads`) and let go again.

The threads are stopped with ptrace by a short-lived helper process, never by the daemon itself: the daemon is the
target's real parent, and GLib/Frida in it may waitpid() on the target, which would take the helper's stop
notifications. The helper (`python -m strobe.instrument.thread_stops [--timeout S] PID TID...`) PTRACE_SEIZEs each
thread (no signal, unlike PTRACE_ATTACH) and PTRACE_INTERRUPTs it, prints one JSON line once every thread is stopped
(or gone, or failed), then waits for a line `release` or the end of its stdin, detaches every thread, prints
`released` and exits 0.

Whatever happens, the threads run again: on `release`, on the end of its stdin (the daemon is gone, however it
went), or on the helper's own death (the kernel detaches a dead tracer's tracees and restarts them). A system call
the stop interrupted (a nanosleep, a read) is restarted by the kernel and never shows as EINTR to the program; a
signal that arrived while a thread was being stopped is handed back to it at detach, and one sent while it is held
stays pending and is delivered once it runs. Only the threads named are stopped: Frida's agent threads, and the
thread paused at the breakpoint, are the caller's to leave out.

    hold = ThreadHold.start(pid, other_tids)   # blocking: call it from a worker thread, not the event loop
    hold.result.held                           # the tids stopped; .gone and .failed say what was not
    ...
    hold.release()                             # blocking, idempotent
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import errno
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from strobe.errors import StrobeError, ValidationError

log = logging.getLogger(__name__)

HELPER_MODULE = "strobe.instrument.thread_stops"
STARTUP_MARGIN_S = 10.0  # on top of the stop timeout: the helper's interpreter starting on a loaded machine
PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
PTRACE_EVENT_STOP = 128
WALL: int = getattr(os, "__WALL", 0x40000000)  # waitpid: threads (clones) as well as processes


class ThreadHoldFailed(StrobeError):
    """The helper could not be started or died before saying which threads it stopped (none are held then)."""


@dataclass
class HoldResult:
    """What a hold got: every tid asked for is in exactly one of `held`, `gone` and `failed`."""

    held: list[int]  # tids now stopped
    gone: list[int]  # tids that had exited (or were never threads of the process) before or while being stopped
    failed: dict[int, str]  # tid -> why it is not stopped (e.g. already traced by a debugger, permission)
    signals: dict[int, int] = field(default_factory=dict)  # held tid -> a signal caught while stopping it: handed
    # back to it at release, so the program does not lose it

    def to_json(self) -> dict[str, Any]:
        return {"held": self.held, "gone": self.gone, "failed": {str(t): w for t, w in self.failed.items()},
                "signals": {str(t): s for t, s in self.signals.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HoldResult:
        return cls([int(t) for t in data["held"]], [int(t) for t in data["gone"]],
                   {int(t): str(w) for t, w in data["failed"].items()},
                   {int(t): int(s) for t, s in data.get("signals", {}).items()})


class ThreadHold:
    """Holds threads of one process stopped, through a helper process that ptrace-seizes and interrupts them.

    `start` returns once every tid is stopped, gone or failed (see `result`); `release` lets the held ones run again.
    A hold whose daemon dies lets go by itself (the helper reads the end of its stdin), and so does one whose helper
    is killed. Use it as a context manager to release on the way out."""

    def __init__(self, process: subprocess.Popen[bytes] | None, result: HoldResult) -> None:
        self._process = process
        self._result = result
        self._lock = threading.Lock()

    @classmethod
    def start(cls, pid: int, tids: list[int], timeout_s: float = 2.0) -> ThreadHold:
        """Stop the threads `tids` of process `pid` and return once each is stopped, gone or failed. A thread still
        not stopped after `timeout_s` (one in uninterruptible sleep in the kernel) is reported failed, and let go as
        soon as it stops. Blocks for up to `timeout_s` plus the helper's start-up; raises ThreadHoldFailed if the
        helper cannot start or dies first, ValidationError for ids that cannot be threads of another process."""
        if pid <= 0 or any(tid <= 0 for tid in tids):
            raise ValidationError(f"pid {pid} and tids {tids} must be positive thread ids (see /proc/PID/task).")
        if pid == os.getpid():
            raise ValidationError(f"pid {pid} is this process (the daemon): its own threads cannot be held; "
                                  "pass the pid of the traced program.")
        if not tids:
            return cls(None, HoldResult([], [], {}))
        env = dict(os.environ)  # the helper runs this very module, whichever strobe the caller imported
        source_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (source_root, env.get("PYTHONPATH")) if p)
        command = [sys.executable, "-m", HELPER_MODULE, "--timeout", str(timeout_s), str(pid), *map(str, tids)]
        try:
            process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, env=env)
        except OSError as exc:
            raise ThreadHoldFailed(f"could not start the thread-stop helper ({' '.join(command)}): {exc}. "
                                   "Check that the Python running the daemon can be executed.") from exc
        assert process.stdout is not None
        line = _read_line(process.stdout.fileno(), time.monotonic() + timeout_s + STARTUP_MARGIN_S)
        if line is None:
            _end(process, 0.0)
            stderr = process.stderr.read().decode(errors="replace").strip() if process.stderr else ""
            raise ThreadHoldFailed(
                f"the thread-stop helper ({' '.join(command)}) exited with {process.returncode} before stopping "
                f"any thread; nothing is held. Its error output: {stderr or '(none)'}. Run that command by hand to "
                "see why; the threads can only be held while it runs.")
        hold = cls(process, HoldResult.from_json(json.loads(line)))
        if not hold.result.held:  # nothing to hold: no reason to keep the helper
            hold.release()
        return hold

    @property
    def result(self) -> HoldResult:
        """Which tids were stopped by `start` (unchanged by `release`)."""
        return self._result

    @property
    def active(self) -> bool:
        """Whether the helper still holds the threads: False after `release`, or once the helper died."""
        process = self._process
        return process is not None and process.poll() is None

    @property
    def helper_pid(self) -> int | None:
        """The helper's pid while it runs (None once released): what holds the threads, to kill if all else fails."""
        process = self._process
        return process.pid if process is not None else None

    def release(self, timeout_s: float = 2.0) -> None:
        """Let every held thread run again and wait for the helper to exit. Idempotent. A helper that has not exited
        after `timeout_s` is killed, and the kernel then detaches (restarts) its threads itself."""
        with self._lock:
            process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None
        with contextlib.suppress(OSError):  # a helper that is gone released them by dying
            process.stdin.write(b"release\n")
            process.stdin.flush()
        with contextlib.suppress(OSError):
            process.stdin.close()
        _end(process, timeout_s)
        if process.returncode != 0:
            stderr = process.stderr.read().decode(errors="replace").strip() if process.stderr else ""
            log.warning("thread-stop helper %d ended with %d (its threads run again, the kernel detached them): %s",
                        process.pid, process.returncode, stderr)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()

    def __enter__(self) -> ThreadHold:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


def _read_line(fd: int, deadline: float) -> bytes | None:
    """The first line written to `fd`, or None if it closes or `deadline` passes first."""
    data = b""
    while b"\n" not in data:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        data += chunk
    return data.split(b"\n", 1)[0]


def _end(process: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Wait up to `timeout_s` for the helper to exit, then kill it (its tracees are detached by the kernel)."""
    try:
        process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


# The helper's side. ptrace requests are per tracer *thread*: every call below runs on the helper's main thread.


class _Tracer:
    """The helper's tracer of the threads it holds: seizes, interrupts, waits for their stops and detaches them."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.held: dict[int, int] = {}  # tid -> the signal to hand back at detach (0: none)
        self.late: set[int] = set()  # seized and interrupted but not stopped in time: detached as soon as they stop
        libc = ctypes.CDLL(None, use_errno=True)
        self._ptrace = libc.ptrace
        self._ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        self._ptrace.restype = ctypes.c_long
        # A tracee's stop or death sends the tracer SIGCHLD: it wakes the waits below through this pipe.
        self._wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda signum, frame: None)

    def ptrace(self, request: int, tid: int, data: int = 0) -> int:
        """Run one ptrace request; 0 or the errno it failed with."""
        ctypes.set_errno(0)
        if self._ptrace(request, tid, None, ctypes.c_void_p(data)) == -1:
            return ctypes.get_errno()
        return 0

    def stop(self, tids: list[int], timeout_s: float) -> HoldResult:
        result = HoldResult([], [], {})
        deadline = time.monotonic() + timeout_s
        pending: list[int] = []
        for tid in dict.fromkeys(tids):
            why = self._seize(tid)
            if why is None:
                pending.append(tid)
            elif why == "gone":
                result.gone.append(tid)
            else:
                result.failed[tid] = why
        while pending:
            for tid in list(pending):
                stopped = self._poll(tid)
                if stopped is not None:
                    pending.remove(tid)
                    (result.held if stopped else result.gone).append(tid)
            remaining = deadline - time.monotonic()
            if not pending or remaining <= 0:
                break
            self._sleep(min(remaining, 0.05))  # woken by SIGCHLD; the cap covers a notification that raced it
        for tid in pending:
            self.late.add(tid)
            result.failed[tid] = (f"did not stop within {timeout_s}s (state {_state(self.pid, tid)}: 'D' is a "
                                  "system call that cannot be interrupted); it runs on and is let go once it stops")
        order = {tid: index for index, tid in enumerate(tids)}  # in the order asked, not the order they stopped in
        result.held.sort(key=order.__getitem__)
        result.gone.sort(key=order.__getitem__)
        result.signals = {tid: sig for tid, sig in self.held.items() if sig}
        return result

    def _seize(self, tid: int) -> str | None:
        """Seize and interrupt `tid`: None once asked to stop, else "gone" or why it cannot be."""
        if tid in _own_threads():
            return f"thread {tid} belongs to the thread-stop helper itself"
        if _state(self.pid, tid) in ("?", "Z", "X"):
            return "gone"  # not (or no longer) a thread of the process
        err = self.ptrace(PTRACE_SEIZE, tid)
        if err == errno.ESRCH or (err and _state(self.pid, tid) in ("?", "Z", "X")):
            return "gone"
        if err == errno.EPERM:
            return _why_not_traceable(self.pid, tid)
        if err:
            return f"PTRACE_SEIZE failed: {errno.errorcode.get(err, err)} ({os.strerror(err)})"
        self.ptrace(PTRACE_INTERRUPT, tid)  # ESRCH: it is exiting, and its waitpid will say so
        return None

    def _poll(self, tid: int) -> bool | None:
        """True if `tid` is now stopped (and held), False if it is gone, None if it has not reported yet."""
        try:
            got, status = os.waitpid(tid, WALL | os.WNOHANG)
        except ChildProcessError:
            return False
        if got == 0:
            return None
        if not os.WIFSTOPPED(status):
            return False  # exited or killed
        # status>>16 == PTRACE_EVENT_STOP: the interrupt (or a group-stop). 0: a signal-delivery-stop: a signal came
        # between the seize and the interrupt; it is dequeued already, so it must be handed back at detach.
        self.held[tid] = os.WSTOPSIG(status) if status >> 16 == 0 else 0
        if _state(self.pid, tid) == "?":  # a reused number that is no thread of the process (cannot happen once
            self.ptrace(PTRACE_DETACH, tid, self.held.pop(tid))  # seized, but checked because it is cheap)
            return False
        return True

    def _sleep(self, timeout_s: float) -> None:
        if select.select([self._wake_read], [], [], timeout_s)[0]:
            with contextlib.suppress(BlockingIOError):
                os.read(self._wake_read, 4096)

    def wait_for_release(self, stdin: int) -> None:
        """Block until `stdin` says `release` or ends, reaping held threads that die and letting late ones go."""
        data = b""
        while True:
            self._reap()
            ready = select.select([stdin, self._wake_read], [], [])[0]
            if self._wake_read in ready:
                with contextlib.suppress(BlockingIOError):
                    os.read(self._wake_read, 4096)
            if stdin in ready:
                chunk = os.read(stdin, 4096)
                if not chunk:
                    return
                data += chunk
                *lines, data = data.split(b"\n")
                if any(line.strip() == b"release" for line in lines):
                    return

    def _reap(self) -> None:
        while True:
            try:
                tid, status = os.waitpid(-1, WALL | os.WNOHANG)
            except ChildProcessError:
                return
            if tid == 0:
                return
            if os.WIFSTOPPED(status):  # only a late thread can report a stop: held ones are never restarted
                self.late.discard(tid)
                self.ptrace(PTRACE_DETACH, tid, os.WSTOPSIG(status) if status >> 16 == 0 else 0)
            else:
                self.held.pop(tid, None)
                self.late.discard(tid)

    def release(self) -> None:
        """Detach every held thread, handing back the signal it was stopped with, if any: it runs again."""
        for tid, sig in list(self.held.items()):
            self.ptrace(PTRACE_DETACH, tid, sig)  # ESRCH: it died while held
        self.held.clear()


def _state(pid: int, tid: int) -> str:
    """The thread's state letter from /proc (R, S, D, t, Z...), "?" if it is not a thread of `pid`."""
    try:
        return Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def _own_threads() -> set[int]:
    return {int(name) for name in os.listdir("/proc/self/task")}


def _why_not_traceable(pid: int, tid: int) -> str:
    tracer = 0
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
            if line.startswith("TracerPid:"):
                tracer = int(line.split()[1])
    if tracer:
        try:
            name = Path(f"/proc/{tracer}/comm").read_text().strip()
        except OSError:
            name = "?"
        return (f"already traced by process {tracer} ({name}): a debugger (gdb, strace, another hold) has it; "
                "detach that one first")
    scope = "absent"
    with contextlib.suppress(OSError):
        scope = Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()
    return (f"ptrace refused (EPERM) for uid {os.getuid()}: another user's or a setuid process, or one that made "
            "itself non-dumpable, needs root or CAP_SYS_PTRACE; and with Yama ptrace_scope 1 (here: "
            f"{scope}) only ancestors may trace, which the helper is not: set it to 0, or run as root")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {HELPER_MODULE}", description=(
        "Stop threads of a process with ptrace, print a JSON line {held, gone, failed, signals} once they are "
        "stopped, then hold them until a line 'release' or the end of stdin; then detach them and print 'released'."))
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds to wait for the threads to stop")
    parser.add_argument("pid", type=int, help="the process whose threads to stop")
    parser.add_argument("tids", type=int, nargs="+", help="the thread ids (/proc/PID/task/*) to stop")
    args = parser.parse_args(argv)
    tracer = _Tracer(args.pid)
    try:
        result = tracer.stop(args.tids, args.timeout)
        try:
            sys.stdout.write(json.dumps(result.to_json()) + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            pass  # whoever asked is gone: let go at once
        else:
            tracer.wait_for_release(sys.stdin.fileno())
    finally:
        tracer.release()
    with contextlib.suppress(OSError):
        sys.stdout.write("released\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
