"""Fakes for the Frida side of session orchestration: a worker that runs calls inline, a launcher whose
processes are plain objects the test makes exit, crash, fork and exec, and an image loader with a small
function index. The store stays real (a SQLite file under tmp_path)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from strobe.daemon.images import ImageLoader
from strobe.daemon.ingest import IngestWorker
from strobe.daemon.process import ProcessImage
from strobe.daemon.runtimes import RuntimeKind, runtime_for
from strobe.daemon.services import Services
from strobe.daemon.symbols import ModuleSymbols, SessionSymbols
from strobe.instrument.handle import ProcessGone
from strobe.instrument.protocol import CrashReport, HookFailure, HooksUpdated, ModuleInfo, WatchesUpdated
from strobe.instrument.requests import HookOptions
from strobe.paths import StrobePaths
from strobe.store.reader import Reader
from strobe.store.writer import Writer
from strobe.symbols.cache import FunctionTable
from strobe.symbols.elf import ElfInfo
from strobe.symbols.index import FunctionIndex

T = TypeVar("T")


def module(path: str, names: Sequence[str], unhookable: Sequence[str] = ()) -> ModuleSymbols:
    """A module with functions at 0x10, 0x20, …; `unhookable` ones get addresses the fake agent refuses."""
    rows = [(name, name, name, 0x10 * (i + 1) + (0xF000 if name in unhookable else 0), 16, "/proj/app.c", i + 1,
             False, 1) for i, name in enumerate(names)]
    return ModuleSymbols(path, FunctionIndex(ElfInfo(path, None, 0, True, True), FunctionTable.from_rows(rows)), 0)


class InlineWorker:
    async def run(self, fn: Callable[[], T]) -> T:
        return fn()

    def close(self, timeout: float = 0) -> None:
        pass


@dataclass(eq=False)
class FakeHandle:
    pid: int
    observer: Any
    modules: list[ModuleInfo] = field(default_factory=list)
    hooked: dict[int, int] = field(default_factory=dict)  # slot -> address
    watches: list[dict[str, object]] = field(default_factory=list)
    follows: int = 0
    crash_acks: int = 0
    alive: bool = True

    def update_hooks(self, action: Any, functions: list[tuple[int, int, int]], options: HookOptions) -> HooksUpdated:
        if not self.alive:
            raise ProcessGone(f"The process {self.pid} is gone.")
        failed = []
        for slot, address, _size in functions:
            if action == "remove":
                self.hooked.pop(slot, None)
            elif address & 0xF000:
                failed.append(HookFailure(id=slot, error="unable to intercept function"))
            else:
                self.hooked[slot] = address
        return HooksUpdated(type="hooks_updated", requestId=0, activeCount=len(self.hooked), failed=failed)

    def set_watches(self, watches: dict[str, object]) -> WatchesUpdated:
        if not self.alive:
            raise ProcessGone(f"The process {self.pid} is gone.")
        self.watches.append(watches)
        return WatchesUpdated(type="watches_updated", requestId=0, activeCount=0, errors=[])

    def set_follow(self, funcs: list[dict[str, object]]) -> None:
        self.follows += 1

    def flush(self, timeout: float) -> None:
        if not self.alive:
            raise ProcessGone(f"The process {self.pid} is gone.")

    def ack_crash(self) -> None:
        self.crash_acks += 1

    def read_memory(self, recipes: list[dict[str, object]], timeout: float, poll: Any = None) -> Any:
        raise ProcessGone("not in these tests")


class FakeLauncher:
    """Processes are FakeHandles; the test ends them with exit()/crash(), and kill() ends them too."""

    def __init__(self) -> None:
        self.handles: dict[int, FakeHandle] = {}
        self.resumed: list[int] = []
        self.killed: list[int] = []
        self._next = 1000

    def _handle(self, pid: int, observer: Any) -> FakeHandle:
        handle = FakeHandle(pid, observer)
        self.handles[pid] = handle
        return handle

    def spawn(self, argv: list[str], cwd: str, env: dict[str, str], agent_js: str, observer: Any) -> FakeHandle:
        self._next += 1
        return self._handle(self._next, observer)

    def attach(self, pid: int, agent_js: str, observer: Any) -> FakeHandle:
        return self._handle(pid, observer)

    def resume(self, pid: int) -> None:
        self.resumed.append(pid)

    def resume_quietly(self, pid: int) -> None:
        self.resumed.append(pid)

    def kill(self, pid: int) -> None:
        self.killed.append(pid)
        handle = self.handles.get(pid)
        if handle is not None and handle.alive:
            self.end(pid)

    def forget(self, pid: int) -> None:
        pass

    def close(self) -> None:
        pass

    # ---- what the test makes happen (as Frida would report it) ----

    def end(self, pid: int, code: int | None = None) -> None:
        handle = self.handles[pid]
        handle.alive = False
        if code is not None:
            handle.observer.on_exit_code(pid, code)
        handle.observer.on_output(pid, 1, b"")
        handle.observer.on_output(pid, 2, b"")
        handle.observer.on_detached(handle, "process-terminated")

    def fork(self, parent: int, origin: str = "fork", path: str = "/proj/app") -> FakeHandle:
        self._next += 1
        observer = self.handles[parent].observer
        child = self._handle(self._next, observer)
        observer.on_child(child, origin, parent, path)
        return child

    def exec(self, pid: int, path: str) -> FakeHandle:
        old = self.handles[pid]
        old.alive = False
        old.observer.on_detached(old, "process-replaced")
        new = self._handle(pid, old.observer)
        old.observer.on_child(new, "exec", pid, path)
        return new

    def crash(self, pid: int, signal: str = "SIGSEGV") -> None:
        report = CrashReport(type="crash", tid=pid, kind="access-violation", signal=signal, address="0x10",
                             registers={}, frames=[], stackBase="0x0", stackSize=0, sec=0, nsec=0)
        self.handles[pid].observer.on_crash(pid, report, b"")


class FakeImages(ImageLoader):
    """Every binary's index is `modules[binary]`; `hold` makes an image's index wait for the test."""

    def __init__(self, modules: dict[str, list[ModuleSymbols]]) -> None:
        super().__init__(Path("/nonexistent"))
        self.modules = modules
        self.hold: asyncio.Event | None = None

    def preload(self, binary: str) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future

    def load(self, binary: str, modules: list[ModuleInfo], project_root: str,
             preloaded: asyncio.Future[Any] | None = None) -> ProcessImage:
        indexes = tuple(self.modules.get(binary, []))
        hold = self.hold

        async def symbols() -> SessionSymbols:
            if hold is not None:
                await hold.wait()
            return SessionSymbols(binary, bool(indexes), indexes)

        return ProcessImage(binary, RuntimeKind.NATIVE, runtime_for(RuntimeKind.NATIVE),
                            asyncio.ensure_future(symbols()))


    async def refresh(self, image: ProcessImage, pid: int) -> None:
        """Fake processes load nothing after launch (and their pids may be real processes' pids)."""


class FakeAgent:
    def get(self) -> str:
        return "// agent"


def services(home: Path, launcher: FakeLauncher, images: FakeImages) -> Services:
    paths = StrobePaths(home)
    paths.ensure_home()
    return Services(paths, Writer(paths.database), Reader(paths.database), InlineWorker(), launcher, IngestWorker(),
                    FakeAgent(), images)
