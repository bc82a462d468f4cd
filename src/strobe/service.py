"""The daemon's composition root: store + sessions + MCP server + socket listener, wired together."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import logging.handlers
import os
from typing import Any

from strobe.daemon.server import DaemonServer, IdleClock
from strobe.daemon.sessions import SessionManager
from strobe.daemon.transport import socket_streams
from strobe.mcp.app import build_server
from strobe.mcp.registry import ToolContext
from strobe.paths import StrobePaths, private_opener

log = logging.getLogger("strobe")


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """daemon.log opened 0600 (at start and after each rotation); rotated files are renames, so they keep it."""

    def _open(self) -> Any:
        return open(self.baseFilename, self.mode, encoding=self.encoding, errors=self.errors, opener=private_opener)


LOG_BACKUPS = 2


def configure_logging(paths: StrobePaths) -> None:
    handler = PrivateRotatingFileHandler(
        paths.log_file, maxBytes=10 * 1024 * 1024, backupCount=LOG_BACKUPS, encoding="utf-8"
    )
    for n in range(1, LOG_BACKUPS + 1):  # rotated logs an older version left readable by others
        with contextlib.suppress(OSError):
            os.close(private_opener(f"{paths.log_file}.{n}", os.O_RDONLY))
    handler.setFormatter(logging.Formatter("%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(os.environ.get("STROBE_LOG_LEVEL", "INFO").upper())


class Connection:
    """One client connection's identity (a key for what it keeps between calls)."""


async def _serve(paths: StrobePaths) -> None:
    manager = SessionManager.create(paths)
    await manager.start()
    idle = IdleClock()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Any:
        # One server per connection: its ToolContext's client is this connection, which owns what it stages
        # (patterns for its next launch) and releases it when it goes.
        mcp_server = build_server(ToolContext(manager=manager, paths=paths, client=Connection()), idle.activity)
        async with socket_streams(reader, writer) as (read_stream, write_stream):
            await mcp_server.run(read_stream, write_stream, mcp_server.create_initialization_options())

    try:
        await DaemonServer(paths, idle, handle).serve()
    finally:
        await manager.close()


GC_THRESHOLDS = (50_000, 50, 100)
"""The daemon's cyclic GC runs after 50,000 new container objects (CPython's default: 700). Ingesting Python trace
batches allocates ~10 objects an event, and with the default every batch set off several collections, full ones
over the daemon's whole heap among them: parsing a batch cost ~2.3 us an event instead of ~0.35 us, and the
daemon stored ~150k Python events/s instead of the ~240k offered. The daemon's data is mostly acyclic (numpy
arrays, rows, strings), so collecting less often finds the same garbage later and costs little memory."""


def run_daemon(paths: StrobePaths) -> int:
    """Serve until idle or told to stop. The caller holds the DaemonLock for this STROBE_HOME."""
    configure_logging(paths)
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        asyncio.run(_serve(paths))
    except Exception:
        log.exception("daemon crashed")
        return 1
    log.info("daemon %d exited", os.getpid())
    return 0
