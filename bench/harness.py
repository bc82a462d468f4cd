"""Shared pieces of the benchmark: building targets, a private Strobe daemon, an MCP client."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

BENCH = Path(__file__).resolve().parent
T = TypeVar("T")


def build_c(name: str, out_dir: Path, *extra: str) -> Path:
    out = (out_dir / name).absolute()
    source = BENCH / "targets" / f"{name}.c"
    if not out.exists() or out.stat().st_mtime < source.stat().st_mtime:
        subprocess.run(["gcc", "-g", "-O0", *extra, "-o", str(out), str(source)], check=True)
    return out


class ToolError(RuntimeError):
    pass


@dataclass
class Strobe:
    """An MCP session with `strobe mcp` over stdio, on a private STROBE_HOME."""

    session: ClientSession
    home: Path

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        result = await self.session.call_tool(tool, arguments)
        payload: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
        if result.is_error:
            raise ToolError(f"{tool}: {payload['error']}")
        return payload

    async def timed(self, tool: str, **arguments: Any) -> tuple[float, dict[str, Any]]:
        started = time.perf_counter()
        payload = await self.call(tool, **arguments)
        return time.perf_counter() - started, payload

    def daemon_pid(self) -> int:
        return int((self.home / "strobe.pid").read_text())

    async def output(self, session_id: str) -> list[str]:
        texts: list[str] = []
        while True:
            page = await self.call("debug_query", sessionId=session_id, eventType="stdout", limit=500,
                                   offset=len(texts))
            texts += [e["text"] for e in page["events"]]
            if not page["hasMore"]:
                return texts

    async def wait_output(self, session_id: str, predicate: Callable[[list[str]], bool], timeout: float) -> list[str]:
        async def check() -> list[str] | None:
            texts = await self.output(session_id)
            return texts if predicate(texts) else None

        return await poll(check, timeout, f"output of {session_id}")


async def poll(check: Callable[[], Awaitable[T | None]], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        await anyio.sleep(0.05)


@asynccontextmanager
async def client(home: Path) -> AsyncIterator[Strobe]:
    """An MCP client of `strobe mcp` on `home` (its daemon is started if none runs); the caller owns the home."""
    env = {"STROBE_HOME": str(home)}
    if "PYTHONPATH" in os.environ:  # the strobe this run imports (a worktree's), not the one the venv installed
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    async with AsyncExitStack() as stack:
        read, write = await stack.enter_async_context(
            stdio_client(StdioServerParameters(command=sys.executable, args=["-m", "strobe", "mcp"], env=env))
        )
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        yield Strobe(session, home)


def shutdown(home: Path) -> None:
    subprocess.run([sys.executable, "-m", "strobe", "shutdown"], env={**os.environ, "STROBE_HOME": str(home)},
                   check=False)


@asynccontextmanager
async def strobe(settings: dict[str, Any] | None = None) -> AsyncIterator[Strobe]:
    home = Path(tempfile.mkdtemp(prefix="sb-", dir="/tmp"))
    if settings:
        (home / "settings.json").write_text(json.dumps(settings))
    try:
        async with client(home) as connected:
            yield connected
    finally:
        shutdown(home)
        if os.environ.get("STROBE_BENCH_KEEP_LOGS"):
            shutil.copy(home / "daemon.log", Path(os.environ["STROBE_BENCH_KEEP_LOGS"]) / f"{home.name}.log")
        shutil.rmtree(home, ignore_errors=True)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
