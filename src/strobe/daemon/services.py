"""What session orchestration is built from, passed in rather than constructed inside it: the store's writer and
reader, the Frida worker and launcher, the ingest thread, the agent's source and the image loader. The daemon
wires the real ones (SessionManager.create); tests pass fakes for the Frida side and keep a real SQLite file."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from strobe.daemon.images import ImageLoader
from strobe.daemon.ingest import IngestWorker
from strobe.paths import StrobePaths
from strobe.store.reader import Reader
from strobe.store.writer import Writer

T = TypeVar("T")


class ProcessControl(Protocol):
    """Spawning, attaching to and controlling processes (instrument.launcher.Launcher). Blocking: call through
    the worker. `observer` is the LiveSession that receives what the process reports."""

    def spawn(self, argv: list[str], cwd: str, env: dict[str, str], agent_js: str, observer: Any) -> Any: ...

    def attach(self, pid: int, agent_js: str, observer: Any) -> Any: ...

    def attach_running(self, pid: int, agent_js: str, observer: Any) -> Any:
        """A process Strobe did not start: never tied to the daemon's life, its output captured by the agent."""

    def detach(self, handle: Any) -> None:
        """Let go of a process and leave it running: its agent (hooks, breakpoints) unloads."""

    def resume(self, pid: int) -> None: ...

    def resume_quietly(self, pid: int) -> None: ...

    def kill(self, pid: int) -> None: ...

    def forget(self, pid: int) -> None: ...

    def close(self) -> None: ...


class BlockingWorker(Protocol):
    """The thread every blocking Frida call runs on (instrument.worker.FridaWorker)."""

    async def run(self, fn: Callable[[], T]) -> T: ...

    def close(self, timeout: float = ...) -> None: ...


class AgentSource(Protocol):
    def get(self) -> str: ...


@dataclass
class Services:
    paths: StrobePaths
    writer: Writer
    reader: Reader
    worker: BlockingWorker
    launcher: ProcessControl
    ingest: IngestWorker
    agent: AgentSource
    images: ImageLoader
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def write(self, fn: Callable[[Any], T]) -> T:
        """Run `fn(connection)` on the writer's connection, after everything submitted before it."""
        result: T = await asyncio.wrap_future(self.writer.call(fn))
        return result

    async def read(self, fn: Callable[[Any], T]) -> T:
        result: T = await self.reader.run(fn)
        return result

    def spawn(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run `work` in the background, kept referenced until it ends."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def kill(self, pid: int) -> None:
        await self.worker.run(lambda: self.launcher.kill(pid))
