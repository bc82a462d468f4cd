"""Shared fixtures: a private STROBE_HOME per test, C targets compiled at test time, and an MCP client
that talks to a real `strobe mcp` subprocess. Every test that starts a daemon shuts it down and fails
if any process started under its STROBE_HOME is left behind."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

TARGETS = Path(__file__).parent / "targets"
T = TypeVar("T")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def build_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="strobe-targets-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def c_target(build_dir: Path) -> Callable[[str], Path]:
    """Compile tests/targets/<name>.c with debug info (once per test session) and return the binary."""

    def build(name: str) -> Path:
        out = build_dir / name
        if not out.exists():
            subprocess.run(
                ["gcc", "-g", "-O0", "-pthread", "-o", str(out), str(TARGETS / f"{name}.c")],
                check=True,
            )
        return out

    return build


@pytest.fixture(scope="session")
def cpp_target(build_dir: Path) -> Callable[[str], Path]:
    """Compile tests/targets/<name>.cpp with g++ -g -O0 (once per test session)."""

    def build(name: str) -> Path:
        out = build_dir / name
        if not out.exists():
            subprocess.run(["g++", "-g", "-O0", "-o", str(out), str(TARGETS / f"{name}.cpp")], check=True)
        return out

    return build


@pytest.fixture(scope="session")
def go_target(build_dir: Path) -> Callable[..., Path]:
    """Build the Go module tests/targets/<name> once per test session: dynamically linked (cgo, the external
    linker) or, with `static`, statically (cgo off: Go's default without C)."""

    def build(name: str, static: bool = False) -> Path:
        out = build_dir / f"go-{name}{'-static' if static else ''}"
        if not out.exists():
            env = {**os.environ, "GOTOOLCHAIN": "local", "CGO_ENABLED": "0" if static else "1"}
            flags = [] if static else ["-ldflags=-linkmode=external"]
            subprocess.run(["go", "build", *flags, "-o", str(out), "."], cwd=TARGETS / name, env=env, check=True,
                           capture_output=True, timeout=300)
        return out

    return build


@pytest.fixture(scope="session")
def rust_target(build_dir: Path) -> Callable[[str], Path]:
    """Build the cargo project tests/targets/<name> (debug profile, no crates) once per test session."""

    def build(name: str) -> Path:
        target_dir = build_dir / f"cargo-{name}"
        out = target_dir / "debug" / name
        if not out.exists():
            subprocess.run(
                ["cargo", "build", "--quiet", "--offline", "--manifest-path", str(TARGETS / name / "Cargo.toml")],
                check=True, env={**os.environ, "CARGO_TARGET_DIR": str(target_dir)},
            )
        return out

    return build


def _is_frida_shared_helper(entry: Path) -> bool:
    """Frida's per-user background helper (/tmp/frida-<hash>/<name> --background): every Frida client on the
    machine shares it and it exits by itself ~30 s after its last use, so it is not ours to clean up."""
    try:
        argv = (entry / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return len(argv) >= 2 and argv[1] == b"--background" and re.match(rb"/tmp/frida-[0-9a-f]+/", argv[0]) is not None


def processes_under(home: Path) -> list[int]:
    """Pids whose environment carries STROBE_HOME=<home>: the daemon and everything it launched."""
    marker = f"STROBE_HOME={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z" and marker in environ.split(b"\0") and not _is_frida_shared_helper(entry):
            found.append(int(entry.name))
    return found


def shutdown_daemon(home: Path) -> None:
    env = {**os.environ, "STROBE_HOME": str(home)}
    subprocess.run([sys.executable, "-m", "strobe", "shutdown"], env=env, check=False, timeout=30)


@pytest.fixture(scope="session", autouse=True)
def private_home() -> Iterator[None]:
    """No test reads or writes the real ~/.strobe: code that resolves settings in this process (test adapters)
    sees an empty home unless a test sets its own."""
    home = Path(tempfile.mkdtemp(prefix="strobe-home-"))
    previous = os.environ.get("STROBE_HOME")
    os.environ["STROBE_HOME"] = str(home)
    yield
    if previous is None:
        os.environ.pop("STROBE_HOME", None)
    else:
        os.environ["STROBE_HOME"] = previous
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def strobe_home() -> Iterator[Path]:
    """A short private home (unix socket paths are limited to ~107 bytes)."""
    home = Path(tempfile.mkdtemp(prefix="sh-", dir="/tmp"))
    yield home
    shutdown_daemon(home)
    if os.environ.get("STROBE_KEEP_LOGS"):  # debugging aid: keep the daemon's log of each test
        shutil.copy(home / "daemon.log", Path(os.environ["STROBE_KEEP_LOGS"]) / f"{home.name}.log")
    # Killed processes may take a moment to be reaped; anything still there after that is a leak.
    deadline = time.monotonic() + 5
    leftovers = processes_under(home)
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.05)
        leftovers = processes_under(home)
    described = [f"{pid} {_cmdline(pid)}" for pid in leftovers]
    for pid in leftovers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    shutil.rmtree(home, ignore_errors=True)
    assert not leftovers, f"processes left behind under {home}: {described}"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "(gone)"


class ToolError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class StrobeClient:
    """A real MCP client session with `strobe mcp`, as an agent would have."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.session.call_tool(tool, arguments)
        payload = json.loads(result.content[0].text)  # type: ignore[union-attr]
        if result.is_error:
            raise ToolError(payload["error"]["code"], payload["error"]["message"])
        assert isinstance(payload, dict)
        return payload

    async def error(self, tool: str, **arguments: Any) -> ToolError:
        try:
            await self.call(tool, **arguments)
        except ToolError as exc:
            return exc
        raise AssertionError(f"{tool}({arguments}) succeeded but an error was expected")

    async def wait_for_status(self, session_id: str, status: str, timeout: float = 15.0) -> dict[str, Any]:
        async def check() -> dict[str, Any] | None:
            sessions = (await self.call("debug_list_sessions"))["sessions"]
            match = [s for s in sessions if s["sessionId"] == session_id]
            return match[0] if match and match[0]["status"] == status else None

        return await poll(check, timeout, f"session {session_id} to become {status}")

    async def all_events(self, session_id: str, **filters: Any) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        while True:
            page = await self.call("debug_query", sessionId=session_id, limit=500, offset=len(events), **filters)
            events += page["events"]
            if not page["hasMore"]:
                return events


async def poll(check: Callable[[], Awaitable[T | None]], timeout: float, what: str) -> T:
    """Call `check` until it returns something other than None, or fail after `timeout` seconds."""
    import anyio

    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        value = await check()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await anyio.sleep(delay)
        delay = min(delay * 2, 0.25)


@asynccontextmanager
async def connect(home: Path) -> AsyncIterator[StrobeClient]:
    env = {"STROBE_HOME": str(home)}
    if "PYTHONPATH" in os.environ:  # the strobe this test imports (a worktree's), not the one the venv installed
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    params = StdioServerParameters(command=sys.executable, args=["-m", "strobe", "mcp"], env=env)
    async with AsyncExitStack() as stack:
        read, write = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        yield StrobeClient(session)


@pytest.fixture
async def strobe(strobe_home: Path) -> AsyncIterator[StrobeClient]:
    async with connect(strobe_home) as client:
        yield client


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


class Control:
    """Drives a target that waits for files in a control directory (see tests/targets/traced.c)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.rounds = 0

    async def round(self, client: StrobeClient, session_id: str) -> None:
        """Run one round of the target's work and wait until it says it is done."""
        self.rounds += 1
        (self.directory / f"round-{self.rounds}").touch()
        expected = f"round {self.rounds} done\n"

        async def done() -> bool | None:
            page = await client.call("debug_query", sessionId=session_id, eventType="stdout", limit=500)
            return True if any(e["text"] == expected for e in page["events"]) else None

        await poll(done, 30, f"round {self.rounds} of {session_id}")


@pytest.fixture
def control(tmp_path: Path) -> Control:
    directory = tmp_path / "control"
    directory.mkdir()
    return Control(directory)


def write_settings(directory: Path, values: dict[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "settings.json").write_text(json.dumps(values))
