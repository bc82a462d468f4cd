"""Process images: what a process runs, its runtime detected from its executable and loaded modules, and its
function index loading in a thread from the moment the process is known (it waits, suspended or gated, until
it is hooked)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from strobe.daemon.process import ProcessImage
from strobe.daemon.runtimes import detect_kind, runtime_for
from strobe.daemon.symbols import SessionSymbols, mapped_modules, with_new_modules
from strobe.instrument.protocol import ModuleInfo


class ImageLoader:
    def __init__(self, cache_dir: Path) -> None:
        self._cache_dir = cache_dir

    def preload(self, binary: str) -> asyncio.Future[Any]:
        """A head start on the launched binary's index while it is being spawned."""
        runtime = runtime_for(detect_kind(binary, []))
        return asyncio.ensure_future(asyncio.to_thread(runtime.preload, binary, self._cache_dir))

    def load(self, binary: str, modules: list[ModuleInfo], project_root: str,
             preloaded: asyncio.Future[Any] | None = None) -> ProcessImage:
        """The image a process runs; its index builds in the background (awaited through `image.symbols`).
        `project_root`: the session's (an interpreter's runtime indexes its source files)."""
        kind = detect_kind(binary, modules)
        runtime = runtime_for(kind)
        cache_dir = self._cache_dir

        async def symbols() -> SessionSymbols:
            head_start = await preloaded if preloaded is not None else None
            return await asyncio.to_thread(runtime.index, binary, modules, cache_dir, head_start, project_root)

        return ProcessImage(binary, kind, runtime, asyncio.ensure_future(symbols()))

    async def refresh(self, image: ProcessImage, pid: int) -> None:
        """Add to an image's index the modules with debug info the process has loaded since (dlopen: a C extension
        imported by a Python program); nothing when the process is gone."""
        symbols = await image.symbols
        try:
            modules = await asyncio.to_thread(mapped_modules, pid)
        except OSError:
            return
        updated = await asyncio.to_thread(with_new_modules, symbols, modules, self._cache_dir)
        if updated is not None:
            future: asyncio.Future[SessionSymbols] = asyncio.get_running_loop().create_future()
            future.set_result(updated)
            image.symbols = future
