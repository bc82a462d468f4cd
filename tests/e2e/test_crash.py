"""Crash capture: a fatal signal becomes a stored `crash` event (signal, fault, registers, symbolized backtrace,
stack memory, the crashing thread's last calls) before the process dies as it would without Strobe."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Control, StrobeClient, poll
from tests.e2e.test_trace import launch_ready

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def crash_run(
    strobe: StrobeClient, binary: Path, project: Path, control: Control, mode: str, status: str = "crashed",
    trace: tuple[str, ...] = ("prepare", "crash_worker", "check_value", "divide", "trap_here"),
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Launch `crash MODE`, trace, let it run; returns (session id, its listed session, its one crash event)."""
    sid = await launch_ready(strobe, binary, project, mode, str(control.directory))
    await strobe.call("debug_trace", sessionId=sid, add=list(trace))
    (control.directory / "go").touch()
    listed = await strobe.wait_for_status(sid, status, timeout=30)
    crashes = await strobe.all_events(sid, eventType="crash")
    assert len(crashes) == 1, crashes
    return sid, listed, crashes[0]


def frame_functions(crash: dict[str, Any]) -> list[str]:
    return [f.get("function", "?") for f in crash["backtrace"]]


async def test_null_dereference_on_a_worker_thread(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid, listed, crash = await crash_run(strobe, c_target("crash"), project, control, "null-worker")
    assert listed["signal"] == "SIGSEGV" and listed["exitCode"] is None
    assert crash["signal"] == "SIGSEGV" and crash["access"] == "write" and int(crash["faultAddress"], 16) == 0
    assert crash["threadName"] == "crasher"
    assert crash["function"] == "crash_worker" and crash["sourceFile"].endswith("crash.c")
    source = (Path(__file__).parents[1] / "targets" / "crash.c").read_text().splitlines()
    assert "*target = value + local_marker;" in source[crash["line"] - 1]
    # The faulting frame first, then its caller (a return address, shown at the line of the call).
    functions = frame_functions(crash)
    assert functions[0] == "crash_worker" and functions[1] == "crasher"
    assert "crash_worker((int *)arg, 42);" in source[crash["backtrace"][1]["line"] - 1]
    assert crash["registers"]["pc"] == crash["address"] and set(crash["registers"]) >= {"sp", "rbp", "rdi"}
    memory = crash["frameMemory"]
    data = bytes.fromhex(memory["hex"])
    assert memory["size"] == len(data) == 640 and memory["belowFramePointer"] == 512
    assert (0x5EED).to_bytes(4, "little") in data[:512]  # crash_worker's local, below its frame pointer
    assert crash["locals"] == {"target": None, "value": 42, "local_marker": 0x5EED}  # read from that dump
    # The crashing thread's last calls, up to the crash, and the crash among the timeline's events.
    assert [(e["eventType"], e["function"]) for e in crash["lastEvents"]][-1:] == [("function_enter", "crash_worker")]
    assert re.match(r"SIGSEGV \(write of 0x0\) in crash_worker at crash\.c:\d+, thread crasher", crash["text"])
    everything = await strobe.all_events(sid)
    assert everything[-1]["eventType"] == "crash" or any(e["eventType"] == "crash" for e in everything)
    assert not any(e.get("text") == "not crashed\n" for e in everything)


async def test_failed_assert_aborts(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid, listed, crash = await crash_run(strobe, c_target("crash"), project, control, "assert")
    assert crash["signal"] == "SIGABRT" and listed["signal"] == "SIGABRT"
    assert "check_value" in frame_functions(crash)
    stderr = await strobe.all_events(sid, eventType="stderr")
    assert any("Assertion" in e["text"] and "value == 3" in e["text"] for e in stderr)  # libc's own message


async def test_division_by_zero_and_illegal_instruction(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    _, _, crash = await crash_run(strobe, c_target("crash"), project, control, "divide")
    assert crash["signal"] == "SIGFPE" and crash["function"] == "divide" and "access" not in crash
    control.directory.joinpath("go").unlink()
    _, _, crash = await crash_run(strobe, c_target("crash"), project, control, "trap")
    assert crash["signal"] == "SIGILL" and crash["function"] == "trap_here"


async def test_the_targets_own_handler_still_runs(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid, listed, crash = await crash_run(strobe, c_target("crash"), project, control, "own-handler", status="exited")
    assert listed["exitCode"] == 3 and "signal" not in listed  # it handled the signal and exited by itself
    assert crash["signal"] == "SIGSEGV" and crash["function"] == "crash_worker"
    stderr = await strobe.all_events(sid, eventType="stderr")
    assert any(e["text"] == "own handler ran\n" for e in stderr)


async def test_ten_crashes_in_a_row_store_ten_crash_events(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    binary = c_target("crash")
    for _ in range(10):
        control.directory.joinpath("go").unlink(missing_ok=True)
        _, listed, crash = await crash_run(strobe, binary, project, control, "null-worker", trace=("prepare",))
        assert listed["status"] == "crashed" and crash["function"] == "crash_worker"


async def test_a_handler_that_re_raises_the_signal_is_one_crash(strobe: StrobeClient, project: Path) -> None:
    """Python's faulthandler prints the Python traceback, then raises the same signal again on the same thread:
    one death, one crash event — the first, at the fault (the second was reported as a 'read of' the pid)."""
    python = Path("/usr/bin/python3") if Path("/usr/bin/python3").exists() else Path(sys.executable)
    (project / "boom.py").write_text("import ctypes\nprint('about to crash', flush=True)\nctypes.string_at(0)\n")
    launched = await strobe.call("debug_launch", command=str(python), args=["-X", "faulthandler", "boom.py"],
                                 projectRoot=str(project), cwd=str(project))
    listed = await strobe.wait_for_status(launched["sessionId"], "crashed", timeout=30)
    assert listed["signal"] == "SIGSEGV"
    crashes = await strobe.all_events(launched["sessionId"], eventType="crash")
    assert len(crashes) == 1, [c["text"] for c in crashes]
    assert crashes[0]["text"].startswith("SIGSEGV (read of 0x0)")
    stderr = "".join(e["text"] for e in await strobe.all_events(launched["sessionId"], eventType="stderr"))
    assert "Fatal Python error: Segmentation fault" in stderr  # the program's own handler still ran


# ---- what caused the signal: the kernel's siginfo, not a guess from Frida's fault address ----------------------

SIGNALS_C = r"""
/* Usage: signals MODE CONTROL_DIR. Prints "ready", waits for CONTROL_DIR/go, calls prepare(1), then by MODE:
 *   raise     raise(SIGSEGV)                    kill-bus  kill(getpid(), SIGBUS)
 *   wait      prints "waiting" and sleeps until a signal from outside ends it
 *   readonly  writes to a read-only page, whose address it prints first ("page 0x...")
 *   bus       reads a file mapping past the file's end (a real SIGBUS), address printed first
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

__attribute__((noinline)) int prepare(int step) { return step * 2; }

int main(int argc, char **argv) {
    const char *mode = argv[1];
    char go[4096];
    struct stat st;
    snprintf(go, sizeof go, "%s/go", argv[2]);
    printf("ready\n");
    fflush(stdout);
    while (stat(go, &st) != 0) usleep(2000);
    prepare(1);
    if (strcmp(mode, "raise") == 0) {
        raise(SIGSEGV);
    } else if (strcmp(mode, "kill-bus") == 0) {
        kill(getpid(), SIGBUS);
    } else if (strcmp(mode, "wait") == 0) {
        printf("waiting\n");
        fflush(stdout);
        for (;;) pause();
    } else if (strcmp(mode, "readonly") == 0) {
        char *page = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        printf("page %p\n", (void *)(page + 8));
        fflush(stdout);
        page[8] = 1;
    } else if (strcmp(mode, "bus") == 0) {
        FILE *empty = tmpfile();
        volatile char *mapped = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fileno(empty), 0);
        printf("page %p\n", (void *)(mapped + 16));
        fflush(stdout);
        printf("%d\n", mapped[16]);
    }
    printf("not crashed\n");
    return 0;
}
"""


@pytest.fixture(scope="session")
def signals_binary(build_dir: Path) -> Path:
    source, out = build_dir / "signals.c", build_dir / "signals"
    if not out.exists():
        source.write_text(SIGNALS_C)
        subprocess.run(["gcc", "-g", "-O0", "-o", str(out), str(source)], check=True)
    return out


async def printed(strobe: StrobeClient, sid: str, prefix: str) -> str:
    async def line() -> str | None:
        found = [e["text"] for e in await strobe.all_events(sid, eventType="stdout") if e["text"].startswith(prefix)]
        return found[0] if found else None

    return await poll(line, 30, f"{prefix!r} from {sid}")


async def test_a_signal_sent_from_outside_names_its_sender(
    strobe: StrobeClient, signals_binary: Path, project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, signals_binary, project, "wait", str(control.directory))
    (control.directory / "go").touch()
    await printed(strobe, sid, "waiting")
    pid = next(s["pid"] for s in (await strobe.call("debug_list_sessions"))["sessions"] if s["sessionId"] == sid)
    sender = subprocess.Popen(["/bin/kill", "-SEGV", str(pid)])
    assert sender.wait(timeout=30) == 0
    listed = await strobe.wait_for_status(sid, "crashed", timeout=30)
    assert listed["signal"] == "SIGSEGV"
    crashes = await strobe.all_events(sid, eventType="crash")
    assert len(crashes) == 1, crashes
    crash = crashes[0]
    assert crash["cause"] == "sent" and crash["signalCode"] == "SI_USER"
    assert crash["sender"]["pid"] == sender.pid and crash["sender"]["uid"] == os.getuid()
    assert crash["sender"]["self"] is False
    assert "access" not in crash and "faultAddress" not in crash
    assert f"[{sender.pid}])" in crash["text"] or f"pid {sender.pid})" in crash["text"]
    assert crash["text"].startswith("SIGSEGV (sent by ") and " of 0x" not in crash["text"]
    assert not any(name.startswith("si_") for name in crash["registers"])


@pytest.mark.parametrize(("mode", "signal_name", "code"), [("raise", "SIGSEGV", "SI_TKILL"),
                                                            ("kill-bus", "SIGBUS", "SI_USER")])
async def test_a_signal_the_program_sends_itself_names_the_program(
    strobe: StrobeClient, signals_binary: Path, project: Path, control: Control, mode: str, signal_name: str,
    code: str,
) -> None:
    _, listed, crash = await crash_run(strobe, signals_binary, project, control, mode, trace=("prepare",))
    assert listed["signal"] == crash["signal"] == signal_name  # kill(getpid(), SIGBUS) is a SIGBUS
    assert crash["cause"] == "sent" and crash["signalCode"] == code
    assert crash["sender"] == {"pid": listed["pid"], "uid": os.getuid(), "self": True}
    assert "access" not in crash and "faultAddress" not in crash
    assert crash["text"].startswith(f"{signal_name} (raised by the program itself)")


@pytest.mark.parametrize(("mode", "signal_name", "access", "code"), [
    ("readonly", "SIGSEGV", "write", "SEGV_ACCERR"), ("bus", "SIGBUS", "read", "BUS_ADRERR")])
async def test_a_real_fault_still_names_its_address(
    strobe: StrobeClient, signals_binary: Path, project: Path, control: Control, mode: str, signal_name: str,
    access: str, code: str,
) -> None:
    sid, listed, crash = await crash_run(strobe, signals_binary, project, control, mode, trace=("prepare",))
    address = (await printed(strobe, sid, "page ")).split()[1]
    assert listed["signal"] == crash["signal"] == signal_name
    assert crash["cause"] == "fault" and crash["signalCode"] == code and "sender" not in crash
    assert (crash["access"], int(crash["faultAddress"], 16)) == (access, int(address, 16))
    assert crash["text"].startswith(f"{signal_name} ({access} of {crash['faultAddress']}) in main at signals.c:")
