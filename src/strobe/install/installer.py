"""`strobe install`: plan the edits for each agent (pure: `plan_agent`), then show them and, unless it is a dry
run, apply them (`run_install`).

    code = run_install(Machine.current(project), InstallOptions(scope=Scope.USER, command=cmd, args=["mcp"]))

Per agent: its MCP configuration file gets (or loses) the `strobe` server entry, and its instructions file the
short text of `instructions.py`. Nothing is written when any file of that agent cannot be edited safely; the
other agents go ahead. Exit status 1 when something was refused or, on install, when no agent was found.
"""

from __future__ import annotations

import difflib
import sys
from dataclasses import dataclass, field
from typing import TextIO

from strobe.install.agents import AGENTS, SERVER_NAME, AgentSpec, ConfigFormat, Machine, Scope, agent_named
from strobe.install.config_files import (
    ConfigError,
    Edit,
    apply_edit,
    json_with_server,
    json_without_server,
    read_text,
)
from strobe.install.instructions import instruction_places
from strobe.install.toml_table import toml_with_server, toml_without_server

MAX_DIFF_LINES = 60


@dataclass(frozen=True)
class InstallOptions:
    scope: Scope
    command: str
    args: list[str]
    agents: list[str] = field(default_factory=list)  # --agent: exactly these; empty: the ones found
    uninstall: bool = False
    dry_run: bool = False


@dataclass
class AgentPlan:
    agent: AgentSpec
    edits: list[Edit] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    note: str = ""  # why nothing is planned (no file for this scope)

    @property
    def changes(self) -> list[Edit]:
        return [edit for edit in self.edits if edit.changed]


def _config_edit(agent: AgentSpec, machine: Machine, options: InstallOptions) -> Edit | None:
    path = agent.config_path(machine, options.scope)
    if path is None:
        return None
    before = read_text(path)
    key = agent.servers_key
    if agent.format is ConfigFormat.TOML:
        if options.uninstall:
            after, summary = toml_without_server(before, path, key, SERVER_NAME)
        else:
            after, summary = toml_with_server(before, path, key, SERVER_NAME, options.command, options.args)
    elif options.uninstall:
        after, summary = json_without_server(before, path, key, SERVER_NAME)
    else:
        after, summary = json_with_server(before, path, key, SERVER_NAME, agent.entry(options.command, options.args))
    return Edit(path, before, after, summary)


def plan_agent(agent: AgentSpec, machine: Machine, options: InstallOptions) -> AgentPlan:
    """What installing (or uninstalling) Strobe for `agent` changes; reads files, writes none."""
    plan = AgentPlan(agent)
    try:
        edit = _config_edit(agent, machine, options)
        if edit is None:
            plan.note = agent.no_project_reason or f"{agent.title} has no {options.scope} scope"
            return plan
        plan.edits.append(edit)
        for place in instruction_places(agent, options.scope, machine):
            before = read_text(place.path)
            after, summary = place.uninstall(before) if options.uninstall else place.install(before)
            plan.edits.append(Edit(place.path, before, after, summary, place.prune_dir, show_diff=False))
    except ConfigError as exc:
        plan.errors.append(str(exc))
    return plan


def _selected(machine: Machine, options: InstallOptions) -> list[tuple[AgentSpec, bool]]:
    """(agent, whether to report it even when nothing changes)."""
    if options.agents:
        return [(agent_named(name), True) for name in dict.fromkeys(options.agents)]
    if options.uninstall:  # wherever Strobe may have been installed; quiet about agents that are not here
        return [(agent, agent.is_installed(machine)) for agent in AGENTS]
    return [(agent, True) for agent in AGENTS if agent.is_installed(machine)]


def _shown(machine: Machine, edit: Edit) -> str:
    path = str(edit.path)
    home = str(machine.home)
    return "~" + path[len(home):] if path.startswith(home + "/") else path


def _diff(edit: Edit, name: str) -> list[str]:
    lines = list(difflib.unified_diff((edit.before or "").splitlines(), (edit.after or "").splitlines(),
                                      f"{name} (now)", f"{name} (after)", lineterm="", n=1))
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"... ({len(lines) - MAX_DIFF_LINES} more diff lines)"]
    return lines


def run_install(machine: Machine, options: InstallOptions, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    selected = _selected(machine, options)
    if not selected and not options.uninstall:
        names = ", ".join(f"{agent.name} ({agent.title})" for agent in AGENTS)
        print("strobe install: no coding agent found on this machine (none of their configuration directories "
              f"exists and none of their commands is on PATH). Name one with --agent NAME: {names}.", file=out)
        return 1
    verb = "uninstall" if options.uninstall else "install"
    if options.dry_run:
        print(f"Dry run of strobe {verb} ({options.scope} scope): nothing is written.", file=out)
    failed = False
    changed = 0
    for agent, always in selected:
        plan = plan_agent(agent, machine, options)
        if not always and not plan.changes and not plan.errors:
            continue
        print(f"{agent.title} ({options.scope} scope):", file=out)
        if plan.note:
            print(f"  nothing to do: {plan.note}.", file=out)
            failed = failed or (bool(options.agents) and not options.uninstall)
        for error in plan.errors:
            print(f"  refused: {error}", file=out)
        failed = failed or bool(plan.errors)
        if plan.errors:
            continue
        for edit in plan.edits:
            shown = _shown(machine, edit)
            prefix = "would be " if options.dry_run and edit.changed else ""
            print(f"  {shown}: {prefix}{edit.summary}", file=out)
            if options.dry_run and edit.changed and edit.show_diff:
                for line in _diff(edit, shown):
                    print(f"    {line}", file=out)
        if not options.dry_run:
            for edit in plan.changes:
                apply_edit(edit)
        changed += len(plan.changes)
    _summary(options, changed, out)
    return 1 if failed else 0


def _summary(options: InstallOptions, changed: int, out: TextIO) -> None:
    if options.dry_run:
        print(f"Dry run: {changed} file(s) would change; nothing was written.", file=out)
    elif changed == 0:
        print("Nothing changed: " + ("Strobe was not installed there." if options.uninstall
                                     else "Strobe is already configured."), file=out)
    elif options.uninstall:
        print(f"Removed Strobe from {changed} file(s). Restart the agents to drop its MCP server.", file=out)
    else:
        print(f"Changed {changed} file(s). Restart the agents (or reload their MCP servers) to pick Strobe up; "
              f"`strobe doctor` checks that this machine can run it.", file=out)
