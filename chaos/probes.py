"""The reliability probes behind docs/reliability.md: each does to a real daemon what a bad day would (kill -9 at
full ingest, a client killed mid-call, a full disk, a flood of output, many clients at once) and measures what
survived. Each returns a Result; `ok` is False when what the probe checks did not hold."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
from bench.harness import Strobe, client, poll, shutdown
from tests.conftest import processes_under

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ROOT / "tests" / "targets"
T = TypeVar("T")


@dataclass(frozen=True)
class Result:
    probe: str
    procedure: str
    figure: str
    ok: bool


def build(name: str, out_dir: Path) -> Path:
    out = out_dir / name
    if not out.exists():
        subprocess.run(["gcc", "-g", "-O0", "-pthread", "-o", str(out), str(TARGETS / f"{name}.c")], check=True)
    return out


def _describe(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "(gone)"
    return f"{Path(argv[0].decode(errors='replace')).name} [{state}]"


def _is_proxy(pid: int) -> bool:
    """A `strobe mcp` (the probe's own client)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return argv[1:4] == [b"-m", b"strobe", b"mcp"]


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@asynccontextmanager
async def private_home(settings: dict[str, Any] | None = None, *, mount_mib: int | None = None
                       ) -> AsyncIterator[Path]:
    """A STROBE_HOME of its own (on a tmpfs of `mount_mib` MiB if asked); everything under it is gone after."""
    home = Path(tempfile.mkdtemp(prefix="sc-", dir="/tmp"))
    if mount_mib is not None:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mount_mib}m,mode=0700", "tmpfs", str(home)],
                       check=True)
    try:
        if settings:
            (home / "settings.json").write_text(json.dumps(settings))
        yield home
    finally:
        shutdown(home)
        for pid in processes_under(home):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if mount_mib is not None:
            subprocess.run(["umount", "-l", str(home)], check=False)
        shutil.rmtree(home, ignore_errors=True)


async def until(check: Callable[[], Awaitable[T | None]], timeout: float, what: str) -> T:
    return await poll(check, timeout, what)


async def wait_ended(s: Strobe, session_id: str, timeout: float = 60) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        listing = await s.call("debug_list_sessions")
        mine = [x for x in listing["sessions"] if x["sessionId"] == session_id]
        return mine[0] if mine and mine[0]["status"] != "running" else None

    return await until(check, timeout, f"{session_id} to end")


def vm_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


# ---- the probes ----------------------------------------------------------------------------------------------


async def kill9_at_full_ingest(build_dir: Path, rounds: int) -> Result:
    """kill -9 of the daemon while a hot function floods the store: the store stays intact, what was committed
    stays queryable, the session is marked stopped, and the traced program does not outlive the daemon."""
    hot = build("hot", build_dir)
    intact = targets_ended = 0
    kept: list[int] = []
    settings = {"events.maxPerSession": 5_000_000, "trace.samplePercent": 100,
                "trace.hotCallsPerSecond": 100_000_000}
    for _ in range(rounds):
        async with private_home(settings) as home:
            control = home / "control"
            control.mkdir()
            async with client(home) as s:
                sid = (await s.call("debug_launch", command=str(hot), args=[str(control), "50000000"],
                                    projectRoot=str(home)))["sessionId"]
                target = int((await s.call("debug_list_sessions"))["sessions"][0]["pid"])
                await s.call("debug_trace", sessionId=sid, add=["hot_add"])
                (control / "go").touch()

                async def flooding(s: Strobe = s, sid: str = sid) -> int | None:
                    page = await s.call("debug_query", sessionId=sid, function={"equals": "hot_add"}, limit=1)
                    return page["totalCount"] if page["totalCount"] > 100_000 else None

                await until(flooding, 60, "the ingest to be in full flow")
                os.kill(s.daemon_pid(), signal.SIGKILL)
            deadline = time.monotonic() + 5
            while alive(target) and time.monotonic() < deadline:
                await anyio.sleep(0.05)
            targets_ended += not alive(target)
            with contextlib.suppress(ProcessLookupError):
                os.kill(target, signal.SIGKILL)
            conn = sqlite3.connect(home / "strobe.db")
            try:
                intact += conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            finally:
                conn.close()
            async with client(home) as s:  # a new daemon on the same store
                listed = (await s.call("debug_list_sessions"))["sessions"]
                page = await s.call("debug_query", sessionId=sid, function={"equals": "hot_add"}, limit=1)
                kept.append(page["totalCount"] if listed and listed[0]["status"] == "stopped" else 0)
    kept_min = min(kept) if kept else 0
    return Result(
        "kill -9 at full ingest",
        f"{rounds}× : trace a function called 50M times, kill -9 the daemon once >100k events are stored, "
        "start a new daemon on the same store",
        f"integrity_check ok {intact}/{rounds}; session listed 'stopped' with its events queryable "
        f"(≥ {kept_min:,} kept) {sum(1 for k in kept if k)}/{rounds}; traced program gone within 5 s "
        f"{targets_ended}/{rounds}",
        intact == rounds and all(kept) and targets_ended == rounds,
    )


def _rpc(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


async def proxy_killed_mid_call(build_dir: Path, rounds: int) -> Result:
    """A `strobe mcp` killed -9 while its debug_launch is in flight: the daemon serves the next client, and a
    program that call launched is stopped cleanly (no stopped or orphaned process left)."""
    sleeper = build("sleeper", build_dir)
    answered = launched = leaks = 0
    left_behind: list[str] = []
    for _ in range(rounds):
        async with private_home() as home:
            env = {**os.environ, "STROBE_HOME": str(home)}
            proc = subprocess.Popen([sys.executable, "-m", "strobe", "mcp"], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
            assert proc.stdout is not None
            _rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "chaos", "version": "0"}}})
            await anyio.to_thread.run_sync(proc.stdout.readline)
            _rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            _rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "debug_launch", "arguments": {"command": str(sleeper), "projectRoot": str(home)}}})
            proc.kill()
            proc.wait()
            async with client(home) as s:
                started = time.monotonic()
                listing = await s.call("debug_list_sessions")
                answered += time.monotonic() - started < 10
                for session in listing["sessions"]:
                    launched += 1
                    await s.call("debug_stop", sessionId=session["sessionId"])
                daemon = s.daemon_pid()
                left = [pid for pid in processes_under(home) if pid != daemon and not _is_proxy(pid)]
                leaks += len(left)
                left_behind += [_describe(pid) for pid in left]
    return Result(
        "proxy killed mid-call",
        f"{rounds}× : kill -9 a `strobe mcp` right after it sent debug_launch, then connect a new client",
        f"daemon answered the next client {answered}/{rounds}; launches that went through anyway: {launched} "
        f"(stopped with debug_stop); processes left behind: {leaks}"
        + (f" ({', '.join(sorted(set(left_behind)))})" if left_behind else ""),
        answered == rounds and leaks == 0,
    )


async def full_disk(build_dir: Path) -> Result:
    """STROBE_HOME on a 96 MiB tmpfs that a chatty program fills."""
    if os.geteuid() != 0:
        return Result("full disk", "needs root (mounts a small tmpfs)", "not run", True)
    program = build("floodctl", build_dir)
    async with private_home({"events.maxOutputPerSession": 10_000_000}, mount_mib=96) as home:
        stop = home.parent / f"{home.name}-stop"
        try:
            async with client(home) as s:
                sid = (await s.call("debug_launch", command=str(program), args=[str(stop)],
                                    projectRoot=str(home)))["sessionId"]

                async def losing() -> dict[str, Any] | None:
                    page = await s.call("debug_query", sessionId=sid, eventType="stdout", limit=1)
                    return page if any("could not be stored" in w for w in page.get("warnings", [])) else None

                page = await until(losing, 120, "the disk to fill")
                stored = page["totalCount"]
                stop.touch()
                ended = await wait_ended(s, sid)
                lost = int(next(w for w in ended["warnings"] if "could not be stored" in w).split()[0]
                           .replace(",", ""))
                free_before = shutil.disk_usage(home).free
                deleted = await s.call("debug_delete_session", sessionId=sid)
                freed = (shutil.disk_usage(home).free - free_before) >> 20
                again = (await s.call("debug_launch", command=str(program), args=[str(stop) + "-never", "50"],
                                      projectRoot=str(home)))["sessionId"]
                await wait_ended(s, again)
                after = await s.call("debug_query", sessionId=again, eventType="stdout", limit=100)
        finally:
            stop.unlink(missing_ok=True)
    ok = (ended["status"], ended.get("exitCode")) == ("exited", 7) and deleted == {"success": True} and \
        after["totalCount"] == 50 and "warnings" not in after
    return Result(
        "full disk",
        "STROBE_HOME on a 96 MiB tmpfs; a program writes lines until the store stops taking them, then exits 7; "
        "delete its session; launch another",
        f"{stored:,} lines stored, {lost:,} counted as lost (warning in debug_query/debug_list_sessions/debug_stop); "
        f"status {ended['status']}, exit code {ended.get('exitCode')}; delete freed {freed} MiB; the next session "
        f"stored {after['totalCount']}/50 lines",
        ok,
    )


async def output_flood(build_dir: Path, lines: int) -> Result:
    """A program writing `lines` lines as fast as it can: the daemon's memory stays bounded (back-pressure)."""
    program = build("floodctl", build_dir)
    async with private_home() as home, client(home) as s:
        daemon = s.daemon_pid()
        idle_rss = vm_kib(daemon, "VmRSS") >> 10
        # a first short run compiles the agent and starts Frida in the daemon (a start-up peak that any first launch
        # has); the peak from then on is what the flood costs (5 in clear_refs resets VmHWM, Linux 4.0+)
        warm = (await s.call("debug_launch", command=str(program), args=[str(home / "never"), "10"],
                             projectRoot=str(home)))["sessionId"]
        await wait_ended(s, warm)
        await s.call("debug_delete_session", sessionId=warm)
        startup_hwm = vm_kib(daemon, "VmHWM") >> 10
        Path(f"/proc/{daemon}/clear_refs").write_text("5")
        started = time.monotonic()
        sid = (await s.call("debug_launch", command=str(program), args=[str(home / "never"), str(lines)],
                            projectRoot=str(home)))["sessionId"]
        peak_rss = 0

        async def done() -> dict[str, Any] | None:
            nonlocal peak_rss
            peak_rss = max(peak_rss, vm_kib(daemon, "VmRSS") >> 10)
            listing = await s.call("debug_list_sessions")
            mine = [x for x in listing["sessions"] if x["sessionId"] == sid]
            return mine[0] if mine and mine[0]["status"] != "running" else None

        ended = await until(done, 900, "the flood to end")
        elapsed = time.monotonic() - started
        hwm = vm_kib(daemon, "VmHWM") >> 10
        page = await s.call("debug_query", sessionId=sid, eventType="stdout", limit=1, offset=0)
    # what must hold: the program ends normally and the newest lines are kept; the RSS is a measurement (a noisy
    # machine moves it), reported against the 300 MB target rather than failing the short form
    ok = ended.get("exitCode") == 0 and page["totalCount"] > 0
    verdict = "met" if hwm <= 300 else "MISSED"
    return Result(
        f"{lines:,} output lines",
        f"a program writes {lines:,} 100-byte lines to stdout as fast as it can",
        f"daemon RSS {idle_rss} MB idle (peak {startup_hwm} MB through a first short launch), peak while flooding "
        f"(VmHWM reset before its launch) {hwm} MB ({verdict}: ≤ 300 MB), {peak_rss} MB sampled; took "
        f"{elapsed:.1f} s (the program waits on its pipe while the store catches up); "
        f"{page['totalCount']:,} newest lines kept (events.maxOutputPerSession), the rest counted as dropped",
        ok,
    )


async def concurrent_clients(build_dir: Path, clients: int) -> Result:
    """`clients` agents at once, each with its own `strobe mcp`: list, launch, read output, delete."""
    hello = build("hello", build_dir)
    latencies: list[float] = []
    failures: list[str] = []
    async with private_home() as home:
        async with client(home):  # the daemon is up before the crowd arrives
            pass

        async def agent(n: int) -> None:
            started = time.monotonic()
            try:
                async with client(home) as s:
                    await s.call("debug_list_sessions")
                    own = home / f"p{n}" / "hello"  # one binary each: a binary runs in one session at a time
                    shutil.copy(hello, own)
                    sid = (await s.call("debug_launch", command=str(own), args=[f"agent-{n}"],
                                        projectRoot=str(home / f"p{n}")))["sessionId"]
                    await wait_ended(s, sid, timeout=300)
                    texts = await s.output(sid)
                    if f"arg[1]=agent-{n}\n" not in texts:
                        failures.append(f"agent {n}: output {texts}")
                    await s.call("debug_delete_session", sessionId=sid)
            except Exception as exc:  # counted, not raised: the figure is how many made it
                failures.append(f"agent {n}: {exc!r}")
            latencies.append(time.monotonic() - started)

        started = time.monotonic()
        async with anyio.create_task_group() as group:
            for n in range(clients):
                (home / f"p{n}").mkdir()
                group.start_soon(agent, n)
        elapsed = time.monotonic() - started
    return Result(
        f"{clients} concurrent clients",
        f"{clients} `strobe mcp` processes at once, each: list sessions, launch a program, wait for its end, read "
        "its output, delete its session",
        f"{clients - len(failures)}/{clients} completed, {elapsed:.1f} s in all, slowest client {max(latencies):.1f} s"
        + (f"; first failure: {failures[0]}" if failures else ""),
        not failures,
    )


async def fuzz(examples: int) -> Result:
    """The hypothesis fuzz of every tool (tests/e2e/test_fuzz_tools.py) with `examples` examples per tool."""
    env = {**os.environ, "STROBE_FUZZ_EXAMPLES": str(examples)}
    started = time.monotonic()
    run = await anyio.run_process([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                                   str(ROOT / "tests" / "e2e" / "test_fuzz_tools.py")], env=env, check=False,
                                  cwd=ROOT)
    output = run.stdout.decode(errors="replace") + run.stderr.decode(errors="replace")
    calls = [line for line in output.splitlines() if "fuzz:" in line]
    return Result(
        "fuzz of every tool",
        f"hypothesis-generated arguments for every tool through a real `strobe mcp` ({examples} examples per tool)",
        (calls[-1].split("fuzz:", 1)[1].strip() if calls else "no count printed")
        + f"; {time.monotonic() - started:.0f} s",
        run.returncode == 0,
    )
