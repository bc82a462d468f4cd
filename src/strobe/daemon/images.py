"""Process images: what a process runs, its runtime detected from its executable and loaded modules, and its
function index loading in a thread from the moment the process is known (it waits, suspended or gated, until
it is hooked). A stripped binary's DWARF comes from its separate debug file (symbols/debug_files.py): where those are
looked for is set before the image loads (`use_debug_files`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from strobe.daemon.process import ProcessImage
from strobe.daemon.runtimes import RuntimeKind, detect_kind, runtime_for
from strobe.daemon.symbols import SessionSymbols, mapped_modules, with_new_modules
from strobe.errors import ValidationError
from strobe.instrument.protocol import ModuleInfo
from strobe.symbols import debug_files


def use_debug_files(binary: str, directories: Sequence[str], symbols_path: str | None = None) -> list[str]:
    """Where the separate debug files of stripped binaries are looked for from now on: the global debug directories
    (the symbols.debugDirectories setting) and, for `binary`, the symbolsPath given at its launch (blocking: it reads
    the files). Raises ValidationError for a symbolsPath that does not exist or is another build's debug file;
    returns a warning when a symbolsPath directory does not hold the binary's debug file either."""
    debug_files.set_debug_directories(directories)
    if symbols_path is None:
        return []
    found = debug_files.use_symbols_path(binary, symbols_path)
    reason = found.reason
    return [reason] if reason is not None else []


def missing_debug_file(binary: str) -> str | None:
    """What to say when a traced native binary has no DWARF of its own and no separate debug file was found: the
    places searched and how to fix it (None when its DWARF was found; blocking)."""
    try:
        return debug_files.locate(binary).reason
    except ValidationError:
        return None


class ImageLoader:
    def __init__(self, cache_dir: Path) -> None:
        self._cache_dir = cache_dir

    def preload(self, binary: str) -> asyncio.Future[Any]:
        """A head start on the launched binary's index while it is being spawned."""
        runtime = runtime_for(detect_kind(binary, []))
        return asyncio.ensure_future(asyncio.to_thread(runtime.preload, binary, self._cache_dir))

    def load(self, binary: str, modules: list[ModuleInfo], project_root: str,
             preloaded: asyncio.Future[Any] | None = None, native: bool = False) -> ProcessImage:
        """The image a process runs; its index builds in the background (awaited through `image.symbols`).
        `project_root`: the session's (an interpreter's runtime indexes its source files). `native`: traced as
        native code whatever it runs (a process Strobe attached to: no language tracer is installed in it)."""
        kind = RuntimeKind.NATIVE if native else detect_kind(binary, modules)
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
