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
    export = commands.add_parser("export", help="write a session as a Chrome trace (Perfetto) or an HTML timeline")
    export.add_argument("session", metavar="SESSION", help="session id (a wrong one lists the sessions there are)")
    export.add_argument("--format", choices=("chrome", "html"), default="chrome", help="default: chrome")
    export.add_argument("-o", "--output", metavar="PATH",
                        help="file or directory to write (default: STROBE_HOME/exports/SESSION.json|.html)")
    export.add_argument("--max-events", type=int, metavar="N", help="stop after N events")
    export.add_argument("--from", dest="time_from", metavar="TIME", help='window start: "2s", "-5s" (before the end)')
    export.add_argument("--to", dest="time_to", metavar="TIME", help="window end, same forms as --from")
    _add_setup_commands(commands)
    args = parser.parse_args(argv)
    paths = StrobePaths.from_env()
    try:
        if args.command in ("install", "doctor"):
            return _run_setup(args, paths)
        if args.command == "export":  # reads the store directly: no daemon needed
            from strobe.export.command import run_export

            return run_export(paths, args.session, args.format, args.output, args.max_events, args.time_from,
                              args.time_to)
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


def _add_setup_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from strobe.install.agents import AGENT_NAMES

    install = commands.add_parser(
        "install", help="configure the coding agents on this machine to use Strobe (see docs/install.md)")
    install.add_argument("--agent", action="append", choices=AGENT_NAMES, default=[], metavar="NAME",
                         help=f"configure this agent (repeatable; default: each one found): {', '.join(AGENT_NAMES)}")
    install.add_argument("--scope", choices=("user", "project"), default="user",
                         help="user: the agent's own files, for all projects (default); project: files in --project")
    install.add_argument("--project", metavar="DIR", help="the project for --scope project (default: cwd)")
    install.add_argument("--dry-run", action="store_true", help="show what would change; write nothing")
    install.add_argument("--uninstall", action="store_true", help="remove Strobe's entries and instructions only")
    doctor = commands.add_parser("doctor", help="check what Strobe needs on this machine, with the fixes")
    doctor.add_argument("--json", action="store_true", help="one JSON object instead of text")


def _run_setup(args: argparse.Namespace, paths: StrobePaths) -> int:
    if args.command == "doctor":
        from strobe.install.doctor import Probe, run_doctor

        return run_doctor(Probe.real(paths), as_json=args.json)
    from pathlib import Path

    from strobe.install.agents import Machine, Scope, server_command
    from strobe.install.installer import InstallOptions, run_install

    project = Path(args.project).expanduser() if args.project else Path.cwd()
    if args.scope == "project" and not project.is_dir():
        print(f"strobe install: --project {project} is not a directory.", file=sys.stderr)
        return 2
    command, command_args = server_command(sys.argv[0], sys.executable)
    options = InstallOptions(Scope(args.scope), command, command_args, args.agent, args.uninstall, args.dry_run)
    return run_install(Machine.current(project), options)
