"""`strobe doctor`: what Strobe needs on this machine, each check answered ok / warn / fail with the fix.

The checks are pure functions of a `Probe` (every question they ask of the machine, as a function), so a test
feeds fake answers:

    probe = Probe.real(StrobePaths.from_env())
    results = run_checks(probe)          # [CheckResult(name, status, detail, fix), ...]
    code = run_doctor(probe, as_json=False)   # prints them; 1 when any check failed

Nothing here changes the machine: the daemon is looked for, never started; the agent is looked for, never built.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import TextIO

from strobe.paths import StrobePaths, UnsafeHomeError

MIN_FREE_BYTES = 1 << 30
FRIDA_TIMEOUT_S = 10.0
FRIDA_SLOW_S = 2.0
CAP_SYS_PTRACE = 19
COMPILERS = {"gcc": "gcc", "g++": "g++", "cargo": "cargo", "go": "golang", "node": "nodejs"}  # command: apt package
PTRACE_FIX = ("sudo sysctl kernel.yama.ptrace_scope=0 (until reboot; to keep it, put kernel.yama.ptrace_scope = 0 "
              "in /etc/sysctl.d/10-ptrace.conf), or run Strobe as root")


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: Status
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class FridaInfo:
    version: str | None  # None: not importable
    error: str = ""  # why it could not be imported or could not list processes
    processes: int | None = None
    seconds: float = 0.0


@dataclass(frozen=True)
class AgentInfo:
    packaged: Path | None  # strobe/_agent/agent.js of a wheel
    source: Path | None  # the checkout's agent/ project
    error: str = ""
    has_compiler: bool = False  # frida.Compiler, which builds the agent from its TypeScript


@dataclass(frozen=True)
class Probe:
    paths: StrobePaths
    ptrace_scope: Callable[[], int | None]
    privileged: Callable[[], str]  # "root", "CAP_SYS_PTRACE" or ""
    frida: Callable[[], FridaInfo]
    agent: Callable[[], AgentInfo]
    which: Callable[[str], str | None]
    free_bytes: Callable[[Path], int]
    daemon_pid: Callable[[StrobePaths], int | None]
    socket_answers: Callable[[Path], bool]

    @classmethod
    def real(cls, paths: StrobePaths) -> Probe:
        return cls(paths, read_ptrace_scope, ptrace_privilege, probe_frida, probe_agent, shutil.which,
                   free_bytes, daemon_pid, socket_answers)


def read_ptrace_scope() -> int | None:
    try:
        return int(Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip())
    except (OSError, ValueError):
        return None  # no Yama: only the classic rules (same user) apply


def ptrace_privilege() -> str:
    if os.geteuid() == 0:
        return "root"
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:") and int(line.split()[1], 16) >> CAP_SYS_PTRACE & 1:
                return "CAP_SYS_PTRACE"
    except (OSError, ValueError, IndexError):
        pass
    return ""


def probe_frida(timeout_s: float = FRIDA_TIMEOUT_S) -> FridaInfo:
    try:
        import frida
    except Exception as exc:  # ImportError, or a broken native module
        return FridaInfo(None, f"{type(exc).__name__}: {exc}")
    version = str(frida.__version__)
    found: list[int] = []
    failure: list[str] = []

    def enumerate_processes() -> None:
        try:
            found.append(len(frida.get_local_device().enumerate_processes()))
        except Exception as exc:
            failure.append(f"{type(exc).__name__}: {exc}")

    started = time.monotonic()
    worker = threading.Thread(target=enumerate_processes, daemon=True)
    worker.start()
    worker.join(timeout_s)
    seconds = time.monotonic() - started
    if failure or not found:
        error = failure[0] if failure else f"listing local processes did not finish within {timeout_s:.0f}s"
        return FridaInfo(version, error, None, seconds)
    return FridaInfo(version, "", found[0], seconds)


def probe_agent() -> AgentInfo:
    try:
        import frida

        from strobe.instrument import agent_build
    except Exception as exc:  # agent_build needs frida
        return AgentInfo(None, None, f"{type(exc).__name__}: {exc}")
    packaged = agent_build.PACKAGED_AGENT
    return AgentInfo(packaged if packaged.is_file() else None, agent_build.agent_source_dir(),
                     has_compiler=hasattr(frida, "Compiler"))


def free_bytes(path: Path) -> int:
    while not path.exists() and path != path.parent:
        path = path.parent  # STROBE_HOME may not exist yet: the filesystem it will be on
    return shutil.disk_usage(path).free


def daemon_pid(paths: StrobePaths) -> int | None:
    from strobe.daemon.server import verified_daemon_pid

    return verified_daemon_pid(paths)


def socket_answers(path: Path) -> bool:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(2.0)
    try:
        sock.connect(str(path))
        return True
    except OSError:
        return False
    finally:
        sock.close()


def check_ptrace(probe: Probe) -> CheckResult:
    scope = probe.ptrace_scope()
    who = probe.privileged()
    if scope is None or scope == 0:
        return CheckResult("ptrace", Status.OK, "no Yama restriction" if scope is None else "ptrace_scope=0")
    if scope == 3:
        return CheckResult("ptrace", Status.FAIL, "ptrace_scope=3: ptrace is disabled for everyone, root included; "
                           "Frida cannot instrument the programs Strobe launches",
                           "it cannot be lowered without a reboot: put kernel.yama.ptrace_scope = 0 in "
                           "/etc/sysctl.d/10-ptrace.conf and reboot")
    if who:
        return CheckResult("ptrace", Status.OK, f"ptrace_scope={scope}, running with {who}")
    if scope == 1:
        return CheckResult("ptrace", Status.WARN, "ptrace_scope=1: only a process's ancestors may trace it. "
                           "Launching works; stopping every thread at a breakpoint (allThreads) and the stacks "
                           "of a hung test (eu-stack, gdb) need to trace a process that is not their child",
                           PTRACE_FIX)
    return CheckResult("ptrace", Status.FAIL, f"ptrace_scope={scope}: only CAP_SYS_PTRACE may trace; Frida cannot "
                       "instrument the programs Strobe launches", PTRACE_FIX)


def check_frida(probe: Probe) -> CheckResult:
    info = probe.frida()
    reinstall = f"{sys.executable} -m pip install --force-reinstall 'frida>=17.2,<18'"
    if info.version is None:
        return CheckResult("frida", Status.FAIL, f"frida is not importable ({info.error})", reinstall)
    if info.error:
        return CheckResult("frida", Status.FAIL, f"frida {info.version} cannot list local processes ({info.error})",
                           "check the ptrace result above; then " + reinstall)
    detail = f"frida {info.version}, {info.processes} local processes listed in {info.seconds:.2f}s"
    if info.seconds > FRIDA_SLOW_S:
        return CheckResult("frida", Status.WARN, detail + " (slow: launches will be slow too)",
                           "a loaded machine or a slow /proc; see whether `frida-ps` is slow as well")
    return CheckResult("frida", Status.OK, detail)


def check_agent(probe: Probe) -> CheckResult:
    info = probe.agent()
    if info.error:
        return CheckResult("agent", Status.FAIL, f"cannot look for the agent ({info.error})",
                           "fix the frida check first")
    if info.packaged is not None:
        return CheckResult("agent", Status.OK, f"prebuilt agent at {info.packaged}")
    if info.source is not None and (info.source / "tsconfig.json").is_file():
        if info.has_compiler:
            return CheckResult("agent", Status.OK, f"built from {info.source} at first launch with frida.Compiler, "
                               f"cached under {probe.paths.cache_dir}")
        return CheckResult("agent", Status.FAIL, f"sources at {info.source}, but this frida has no Compiler to "
                           "build them", "install frida>=17.2 in this environment")
    return CheckResult("agent", Status.FAIL, "no agent: neither the wheel's strobe/_agent/agent.js nor a source "
                       "tree's agent/ (tsconfig.json, src/index.ts) was found",
                       "reinstall Strobe from a wheel, or run it from a complete checkout")


def check_home(probe: Probe) -> CheckResult:
    home = probe.paths.home
    if not os.path.lexists(home):
        return CheckResult("home", Status.OK, f"{home} does not exist yet; it is created (mode 700) at first use")
    try:
        probe.paths.check_home()
    except UnsafeHomeError as exc:
        return CheckResult("home", Status.FAIL, str(exc), "see the message: make the directory private or set "
                           "STROBE_HOME to one of your own")
    return CheckResult("home", Status.OK, f"{home} is a private directory")


def check_disk(probe: Probe) -> CheckResult:
    free = probe.free_bytes(probe.paths.home)
    detail = f"{free / (1 << 30):.1f} GiB free for {probe.paths.home}"
    if free < MIN_FREE_BYTES:
        return CheckResult("disk", Status.WARN, detail + " (under 1 GiB: traces of busy programs are cut short)",
                           "free space on that filesystem, or set STROBE_HOME to a directory on a bigger one")
    return CheckResult("disk", Status.OK, detail)


def check_compilers(probe: Probe) -> CheckResult:
    missing = [name for name in COMPILERS if probe.which(name) is None]
    if not missing:
        return CheckResult("compilers", Status.OK, "gcc, g++, cargo, go and node are on PATH")
    packages = " ".join(COMPILERS[name] for name in missing)
    return CheckResult("compilers", Status.WARN, f"not on PATH: {', '.join(missing)} (needed only to build or run "
                       "programs and tests in those languages)", f"sudo apt-get install {packages}")


def check_stack_tools(probe: Probe) -> CheckResult:
    found = [name for name in ("eu-stack", "gdb") if probe.which(name)]
    if found:
        return CheckResult("stack tools", Status.OK, f"{' and '.join(found)} on PATH (stacks of hung tests)")
    return CheckResult("stack tools", Status.WARN, "neither eu-stack nor gdb is on PATH: a hung test is reported "
                       "without its threads' stacks", "sudo apt-get install elfutils (or gdb)")


def check_daemon(probe: Probe) -> CheckResult:
    paths = probe.paths
    if not paths.home.is_dir():
        return CheckResult("daemon", Status.OK, "not running (STROBE_HOME does not exist yet); `strobe mcp` starts "
                           "it when an agent connects")
    pid = probe.daemon_pid(paths)
    if pid is None:
        return CheckResult("daemon", Status.OK, "not running; `strobe mcp` starts it when an agent connects")
    if not probe.socket_answers(paths.socket):
        return CheckResult("daemon", Status.WARN, f"running (pid {pid}) but not accepting on {paths.socket}",
                           f"it may still be starting; otherwise see {paths.log_file}, and `strobe shutdown`")
    return CheckResult("daemon", Status.OK, f"running (pid {pid}), listening on {paths.socket}")


CHECKS: tuple[Callable[[Probe], CheckResult], ...] = (
    check_ptrace, check_frida, check_agent, check_home, check_disk, check_compilers, check_stack_tools,
    check_daemon,
)


def run_checks(probe: Probe) -> list[CheckResult]:
    return [check(probe) for check in CHECKS]


def run_doctor(probe: Probe, as_json: bool = False, out: TextIO | None = None) -> int:
    """Print every check (text, or one JSON object); 0 when none failed, else 1."""
    out = out or sys.stdout
    results = run_checks(probe)
    failed = any(result.status is Status.FAIL for result in results)
    if as_json:
        print(json.dumps({"strobeHome": str(probe.paths.home), "ok": not failed,
                          "checks": [asdict(result) for result in results]}, indent=2), file=out)
        return 1 if failed else 0
    print(f"strobe doctor (STROBE_HOME={probe.paths.home})", file=out)
    width = max(len(result.name) for result in results)
    for result in results:
        print(f"  {result.status.value:<4}  {result.name:<{width}}  {result.detail}", file=out)
        if result.fix and result.status is not Status.OK:
            print(f"  {'':<4}  {'':<{width}}  fix: {result.fix}", file=out)
    counts = {status: sum(result.status is status for result in results) for status in Status}
    print(f"{counts[Status.FAIL]} failed, {counts[Status.WARN]} warning(s), {counts[Status.OK]} ok.", file=out)
    return 1 if failed else 0
