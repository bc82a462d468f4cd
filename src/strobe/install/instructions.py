"""The short "how to debug with Strobe" text, and where each agent reads such a text.

Two kinds of place (`InstructionPlace`):
- a file of Strobe's own, written whole and deleted on uninstall (a Claude Code skill, a Cursor rule, a VS Code
  instructions file), recognised by its `OWN_FILE_MARK` so that a user's file of the same name is never replaced;
- a file the user writes too (Codex's AGENTS.md, Gemini's GEMINI.md), where Strobe keeps a block between
  `<!-- strobe:begin … -->` and `<!-- strobe:end -->` and removes only that block.

    for place in instruction_places(agent, scope, machine):
        text, summary = place.install(read_text(place.path))
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from strobe.install.agents import AgentSpec, Machine, Scope
from strobe.install.config_files import OWN_FILE_MARK, own_file, with_block, without_block, without_own_file

DESCRIPTION = (
    "Debug a program at runtime with Strobe's debug_* MCP tools: launch it, read its output, trace functions, "
    "stop at breakpoints, run tests. Use when a program crashes, hangs, prints the wrong thing or a test fails, "
    "instead of adding print statements or rerunning it in a shell.")

BODY = """\
# Debugging with Strobe

Strobe runs the program under Frida and records what it does; you ask through the `debug_*` MCP tools
instead of adding log lines, recompiling or rerunning it in a shell.

The loop that works:

1. `debug_launch` the program with no tracing. It answers at once with a `sessionId`; stdout and stderr
   are always captured.
2. Read the output before anything else: `debug_query` with `eventType` `stderr` (then `stdout`). An error
   message, or the last lines before a crash, usually says where to look.
3. Only then trace, narrowly: `debug_trace` with a few patterns for the functions you suspect
   (`parse_config`, `auth::*`, `@file:cart.c`; Python `shop.cart.*`), never everything. Patterns can be
   added to the running program.
4. `debug_query` the function events: arguments, return values, durations, crashes. Adjust the patterns
   and query again.
5. When one moment matters (the call whose argument is wrong) and the program should wait there, set a
   `debug_breakpoint` on the function or a file and line, with a condition if needed; look at the pause's
   locals and backtrace, step with `debug_continue` (`step-over`, `step-into`, `step-out`), or continue.
6. Run tests with `debug_test`, not in a shell: it runs them in the background, and `debug_test_status`
   gives each failure with its file and line, and a hung test with every thread's stack.
7. `debug_stop` the session at the end; it kills the program if it still runs.

A program that hangs or goes silent: `debug_stacks` gives every thread's stack and says deadlock, busy loop,
waiting on I/O or sleeping. One already running: `debug_launch` with its `pid` attaches (`debug_stop` detaches).
One that reads input: `debug_launch` with `stdin`, more later with `debug_input`. `debug_read` reads globals or
memory of the running program; `debug_export` writes a run as a Perfetto trace or an HTML timeline for the user.
"""


def _with_front_matter(fields: list[tuple[str, str]]) -> str:
    """YAML front matter (values as given, already YAML), the mark, then the text."""
    lines = "".join(f"{key}: {value}".rstrip() + "\n" for key, value in fields)
    return f"---\n{lines}---\n{OWN_FILE_MARK}\n\n{BODY}"


_QUOTED_DESCRIPTION = json.dumps(DESCRIPTION)  # a JSON string is a valid YAML double-quoted one (": " inside)


def skill_text() -> str:
    """Claude Code's SKILL.md: front matter with the skill's name and when to use it."""
    return _with_front_matter([("name", "strobe"), ("description", _QUOTED_DESCRIPTION)])


def cursor_rule_text() -> str:
    """A Cursor rule (.mdc), pulled in by the agent when its description fits the task."""
    return _with_front_matter([("description", _QUOTED_DESCRIPTION), ("globs", ""), ("alwaysApply", "false")])


def vscode_instructions_text() -> str:
    """A VS Code (Copilot) .instructions.md file, applied to every request in the workspace."""
    return _with_front_matter([("description", _QUOTED_DESCRIPTION), ("applyTo", '"**"')])


@dataclass(frozen=True)
class InstructionPlace:
    path: Path
    shared: bool  # a file others write too: Strobe's block only
    content: str  # the whole file (own) or the block's body (shared)
    prune_dir: Path | None = None  # a directory of Strobe's own holding the file

    def install(self, text: str | None) -> tuple[str | None, str]:
        if self.shared:
            return with_block(text, self.path, self.content)
        return own_file(text, self.path, self.content)

    def uninstall(self, text: str | None) -> tuple[str | None, str]:
        if self.shared:
            return without_block(text, self.path)
        return without_own_file(text, self.path)


def _own(path: Path, content: Callable[[], str], prune: bool = False) -> InstructionPlace:
    return InstructionPlace(path, False, content(), path.parent if prune else None)


def instruction_places(agent: AgentSpec, scope: Scope, machine: Machine) -> list[InstructionPlace]:
    """Where `agent` reads Strobe's instructions in `scope`; empty when it has no such file."""
    user = scope is Scope.USER
    base = machine.home if user else machine.project
    if agent.name == "claude":
        return [_own(base / ".claude" / "skills" / "strobe" / "SKILL.md", skill_text, prune=True)]
    if agent.name == "cursor" and not user:  # Cursor's user rules live in its settings, not in a file
        return [_own(base / ".cursor" / "rules" / "strobe.mdc", cursor_rule_text)]
    if agent.name == "vscode" and not user:
        return [_own(base / ".github" / "instructions" / "strobe.instructions.md", vscode_instructions_text)]
    if agent.name == "codex":
        return [InstructionPlace((machine.codex_home() if user else base) / "AGENTS.md", True, BODY)]
    if agent.name == "gemini":
        return [InstructionPlace((base / ".gemini" if user else base) / "GEMINI.md", True, BODY)]
    return []
