"""Command line: argument parsing only."""

from __future__ import annotations

import argparse
import sys

from strobe import __version__
from strobe.paths import StrobePaths, UnsafeHomeError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="strobe", description="A debugger for coding agents, over MCP.")
    parser.add_argument("--version", action="version", version=f"strobe {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("mcp", help="stdio MCP server for an agent (starts the daemon if needed)")
    commands.add_parser("daemon", help="run the daemon in the foreground (normally started by `strobe mcp`)")
    commands.add_parser("shutdown", help="stop the running daemon and the programs it launched")
    args = parser.parse_args(argv)
    paths = StrobePaths.from_env()
    try:
        return _run(args.command, paths)
    except UnsafeHomeError as exc:  # the message says what is wrong and what to do
        print(exc, file=sys.stderr)
        return 1


def _run(command: str, paths: StrobePaths) -> int:
    if command == "mcp":
        from strobe.daemon.proxy import run_proxy

        return run_proxy(paths)
    if command == "daemon":
        from strobe.daemon.server import DaemonLock

        # Take the lock before the heavy imports, so a daemon that loses a start-up race exits at once.
        paths.ensure_home()
        lock = DaemonLock(paths)
        if not lock.acquire():
            return 0
        from strobe.service import run_daemon

        try:
            return run_daemon(paths)
        finally:
            lock.release()
    if command == "shutdown":
        from strobe.daemon.proxy import stop_daemon

        if stop_daemon(paths):
            return 0
        print("strobe: the daemon did not exit within 15s", file=sys.stderr)
        return 1
    raise AssertionError(f"unknown command {command}")
