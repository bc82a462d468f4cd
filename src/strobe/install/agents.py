"""The coding agents `strobe install` knows: where each keeps its MCP servers, in which format, how it is found.

One `AgentSpec` per agent in `AGENTS`; nothing here touches a file. Paths are resolved against a `Machine` (home,
environment, PATH lookup) so that tests can point everything at a temporary directory:

    machine = Machine.current(project=Path.cwd())
    for agent in detected_agents(machine):
        path = agent.config_path(machine, Scope.USER)   # None when the agent has no file for that scope

Formats, as each agent documents them:
- Claude Code: `~/.claude.json` (user) and `<project>/.mcp.json`, `"mcpServers"`, entries with `"type": "stdio"`.
- Cursor: `~/.cursor/mcp.json` and `<project>/.cursor/mcp.json`, `"mcpServers"`.
- VS Code (Copilot agent mode): `mcp.json` in the user profile and `<project>/.vscode/mcp.json`, `"servers"`,
  entries with `"type": "stdio"`.
- Codex CLI: `$CODEX_HOME/config.toml` (default `~/.codex`) and `<project>/.codex/config.toml` (read in trusted
  projects only), a `[mcp_servers.<name>]` table.
- Gemini CLI: `~/.gemini/settings.json` and `<project>/.gemini/settings.json`, `"mcpServers"`.
- Windsurf: `~/.codeium/windsurf/mcp_config.json` only, `"mcpServers"`.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

SERVER_NAME = "strobe"


class Scope(StrEnum):
    USER = "user"
    PROJECT = "project"


class ConfigFormat(StrEnum):
    JSON = "json"
    TOML = "toml"


@dataclass(frozen=True)
class Machine:
    """Where the agents' files are: the home directory, the project (for project scope), the environment
    (CODEX_HOME, XDG_CONFIG_HOME) and how an executable is found on PATH."""

    home: Path
    project: Path
    env: Mapping[str, str] = field(default_factory=dict)
    which: Callable[[str], str | None] = shutil.which

    @classmethod
    def current(cls, project: Path) -> Machine:
        env = dict(os.environ)
        path = env.get("PATH", os.defpath)
        return cls(Path.home(), project.absolute(), env, lambda name: shutil.which(name, path=path))

    def codex_home(self) -> Path:
        override = self.env.get("CODEX_HOME")
        return Path(override).expanduser() if override else self.home / ".codex"

    def vscode_user_dir(self) -> Path:
        if sys.platform == "darwin":
            return self.home / "Library" / "Application Support" / "Code" / "User"
        config = self.env.get("XDG_CONFIG_HOME")
        return (Path(config) if config else self.home / ".config") / "Code" / "User"


@dataclass(frozen=True)
class AgentSpec:
    """One agent: its MCP configuration file per scope, the key its servers live under, the shape of an entry,
    and what says it is installed (a directory of its own, or its executable on PATH)."""

    name: str  # what --agent takes
    title: str  # what the user reads
    format: ConfigFormat
    servers_key: str  # "mcpServers", "servers"; for TOML the table prefix "mcp_servers"
    user_file: Callable[[Machine], Path]
    project_file: Callable[[Machine], Path] | None
    marks: Callable[[Machine], tuple[Path, ...]]  # any of these existing means the agent is installed
    executables: tuple[str, ...]
    stdio_type: bool = False  # entries carry "type": "stdio"
    no_project_reason: str = ""

    def config_path(self, machine: Machine, scope: Scope) -> Path | None:
        if scope is Scope.USER:
            return self.user_file(machine)
        return self.project_file(machine) if self.project_file else None

    def entry(self, command: str, args: list[str]) -> dict[str, object]:
        """The server entry this agent's file gets for Strobe."""
        entry: dict[str, object] = {"type": "stdio"} if self.stdio_type else {}
        entry.update({"command": command, "args": list(args)})
        return entry

    def is_installed(self, machine: Machine) -> bool:
        return any(path.exists() for path in self.marks(machine)) or any(
            machine.which(exe) for exe in self.executables)


AGENTS: tuple[AgentSpec, ...] = (
    AgentSpec(
        name="claude", title="Claude Code", format=ConfigFormat.JSON, servers_key="mcpServers",
        user_file=lambda m: m.home / ".claude.json",
        project_file=lambda m: m.project / ".mcp.json",
        marks=lambda m: (m.home / ".claude", m.home / ".claude.json"),
        executables=("claude",), stdio_type=True,
    ),
    AgentSpec(
        name="cursor", title="Cursor", format=ConfigFormat.JSON, servers_key="mcpServers",
        user_file=lambda m: m.home / ".cursor" / "mcp.json",
        project_file=lambda m: m.project / ".cursor" / "mcp.json",
        marks=lambda m: (m.home / ".cursor",),
        executables=("cursor", "cursor-agent"),
    ),
    AgentSpec(
        name="vscode", title="VS Code", format=ConfigFormat.JSON, servers_key="servers",
        user_file=lambda m: m.vscode_user_dir() / "mcp.json",
        project_file=lambda m: m.project / ".vscode" / "mcp.json",
        marks=lambda m: (m.vscode_user_dir(),),
        executables=("code",), stdio_type=True,
    ),
    AgentSpec(
        name="codex", title="Codex CLI", format=ConfigFormat.TOML, servers_key="mcp_servers",
        user_file=lambda m: m.codex_home() / "config.toml",
        project_file=lambda m: m.project / ".codex" / "config.toml",
        marks=lambda m: (m.codex_home(),),
        executables=("codex",),
    ),
    AgentSpec(
        name="gemini", title="Gemini CLI", format=ConfigFormat.JSON, servers_key="mcpServers",
        user_file=lambda m: m.home / ".gemini" / "settings.json",
        project_file=lambda m: m.project / ".gemini" / "settings.json",
        marks=lambda m: (m.home / ".gemini",),
        executables=("gemini",),
    ),
    AgentSpec(
        name="windsurf", title="Windsurf", format=ConfigFormat.JSON, servers_key="mcpServers",
        user_file=lambda m: m.home / ".codeium" / "windsurf" / "mcp_config.json",
        project_file=None,
        marks=lambda m: (m.home / ".codeium" / "windsurf",),
        executables=("windsurf",),
        no_project_reason="Windsurf reads MCP servers only from ~/.codeium/windsurf/mcp_config.json; "
                          "run with --scope user",
    ),
)
AGENT_NAMES: tuple[str, ...] = tuple(agent.name for agent in AGENTS)


def agent_named(name: str) -> AgentSpec:
    for agent in AGENTS:
        if agent.name == name:
            return agent
    raise KeyError(f"unknown agent {name!r}; known agents: {', '.join(AGENT_NAMES)}")


def detected_agents(machine: Machine) -> list[AgentSpec]:
    """The agents found on this machine: a directory of theirs exists or their executable is on PATH."""
    return [agent for agent in AGENTS if agent.is_installed(machine)]


def server_command(argv0: str, executable: str) -> tuple[str, list[str]]:
    """The command and arguments an agent runs to start Strobe's MCP server: the `strobe` script that is running
    now (absolute), or `python -m strobe mcp` with this interpreter when Strobe runs as a module (or from
    anything else, such as a test runner). The interpreter path is kept as is: resolving a virtualenv's python
    symlink would lose the virtualenv."""
    script = Path(argv0)
    if script.name == "strobe" and script.is_file():
        return str(script.resolve()), ["mcp"]
    return executable, ["-m", "strobe", "mcp"]
