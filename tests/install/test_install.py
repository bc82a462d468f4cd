"""`strobe install` end to end: the real executable against a temporary HOME and project, each agent's file parsed
back in its own format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.install.conftest import STROBE, Sandbox

COMMAND = str(STROBE.resolve())


# agent -> (user file relative to HOME, project file relative to the project or None, servers key, entry)
JSON_AGENTS: dict[str, tuple[str, str | None, str, dict[str, Any]]] = {
    "claude": (".claude.json", ".mcp.json", "mcpServers", {"type": "stdio", "command": COMMAND, "args": ["mcp"]}),
    "cursor": (".cursor/mcp.json", ".cursor/mcp.json", "mcpServers", {"command": COMMAND, "args": ["mcp"]}),
    "vscode": (".config/Code/User/mcp.json", ".vscode/mcp.json", "servers",
               {"type": "stdio", "command": COMMAND, "args": ["mcp"]}),
    "gemini": (".gemini/settings.json", ".gemini/settings.json", "mcpServers", {"command": COMMAND, "args": ["mcp"]}),
    "windsurf": (".codeium/windsurf/mcp_config.json", None, "mcpServers", {"command": COMMAND, "args": ["mcp"]}),
}
SCOPED = [(agent, scope) for agent, spec in JSON_AGENTS.items() for scope in ("user", "project")
          if scope == "user" or spec[1] is not None]


def _config(sandbox: Sandbox, agent: str, scope: str) -> Path:
    user, project, _, _ = JSON_AGENTS[agent]
    return sandbox.home / user if scope == "user" else sandbox.project / str(project)


@pytest.mark.parametrize(("agent", "scope"), SCOPED)
def test_json_agent_gets_its_entry_once(sandbox: Sandbox, agent: str, scope: str) -> None:
    first = sandbox.run("install", "--agent", agent, "--scope", scope)
    assert first.returncode == 0, first.stdout + first.stderr
    path = _config(sandbox, agent, scope)
    key, entry = JSON_AGENTS[agent][2], JSON_AGENTS[agent][3]
    assert json.loads(path.read_text()) == {key: {"strobe": entry}}
    assert path.read_text().startswith('{\n  "')  # 2-space indent
    written = sandbox.tree()

    second = sandbox.run("install", "--agent", agent, "--scope", scope)
    assert second.returncode == 0
    assert "already configured" in second.stdout
    assert sandbox.tree() == written


@pytest.mark.parametrize("agent", list(JSON_AGENTS))
def test_json_keeps_other_keys_and_uninstall_removes_only_strobe(sandbox: Sandbox, agent: str) -> None:
    path = _config(sandbox, agent, "user")
    key = JSON_AGENTS[agent][2]
    original = {"theme": "dark", key: {"other": {"command": "other-server", "args": ["-v"]}},
                "nested": {"list": [1, 2, {"a": None}]}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(original))

    assert sandbox.run("install", "--agent", agent).returncode == 0
    data = json.loads(path.read_text())
    assert data["theme"] == "dark" and data["nested"] == original["nested"]
    assert data[key]["other"] == original[key]["other"]
    assert data[key]["strobe"] == JSON_AGENTS[agent][3]

    removed = sandbox.run("install", "--agent", agent, "--uninstall")
    assert removed.returncode == 0, removed.stdout
    assert json.loads(path.read_text()) == original


def test_entry_keeps_what_the_user_added_and_is_updated_in_place(sandbox: Sandbox) -> None:
    path = sandbox.home / ".cursor" / "mcp.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"mcpServers": {"strobe": {"command": "/old/strobe", "args": ["mcp"],
                                                           "env": {"STROBE_HOME": "/x"}}}}))
    result = sandbox.run("install", "--agent", "cursor")
    assert "updated mcpServers.strobe" in result.stdout
    assert json.loads(path.read_text())["mcpServers"]["strobe"] == {
        "command": COMMAND, "args": ["mcp"], "env": {"STROBE_HOME": "/x"}}


def test_invalid_json_is_refused_untouched_and_other_agents_go_on(sandbox: Sandbox) -> None:
    path = sandbox.home / ".cursor" / "mcp.json"
    path.parent.mkdir()
    broken = '{\n  // my servers\n  "mcpServers": {},\n}\n'
    path.write_text(broken)
    result = sandbox.run("install", "--agent", "cursor", "--agent", "gemini")
    assert result.returncode == 1
    assert "not valid JSON" in result.stdout and str(path) in result.stdout and "untouched" in result.stdout
    assert path.read_text() == broken
    assert not (sandbox.home / ".cursor" / "mcp.json.strobe-tmp").exists()
    assert json.loads((sandbox.home / ".gemini" / "settings.json").read_text())["mcpServers"]["strobe"]


def test_dry_run_writes_nothing(sandbox: Sandbox) -> None:
    (sandbox.home / ".codex").mkdir()
    (sandbox.home / ".claude.json").write_text('{"numStartups": 3}\n')
    before = sandbox.tree()
    agents = [arg for name in (*JSON_AGENTS, "codex") for arg in ("--agent", name)]
    result = sandbox.run("install", *agents, "--dry-run")
    assert result.returncode == 0, result.stdout
    assert "would be added mcpServers.strobe" in result.stdout
    assert '+    "strobe": {' in result.stdout  # the diff of ~/.claude.json
    assert "nothing was written" in result.stdout
    assert sandbox.tree() == before
    assert sorted(p.name for p in sandbox.home.iterdir()) == [".claude.json", ".codex"]

    assert sandbox.run("install", *agents).returncode == 0
    installed = sandbox.tree()
    assert "would be removed" in sandbox.run("install", "--uninstall", "--dry-run").stdout
    assert sandbox.tree() == installed


CODEX_TEXT = """\
# Codex settings, by hand
model = "o3"  # the fast one

[mcp_servers.github]
command = "gh-mcp"
args = ["--read-only"]

# profiles below
[profiles.work]
model = "gpt-5"
"""


def test_codex_toml_keeps_every_other_line_and_round_trips(sandbox: Sandbox) -> None:
    path = sandbox.home / ".codex" / "config.toml"
    path.parent.mkdir()
    path.write_text(CODEX_TEXT)
    result = sandbox.run("install", "--agent", "codex")
    assert result.returncode == 0, result.stdout
    text = path.read_text()
    assert text.startswith(CODEX_TEXT)  # every original line, comments included, untouched
    data = tomllib.loads(text)
    assert data["mcp_servers"]["strobe"] == {"command": COMMAND, "args": ["mcp"]}
    assert data["mcp_servers"]["github"] == {"command": "gh-mcp", "args": ["--read-only"]}
    assert data["profiles"] == {"work": {"model": "gpt-5"}}

    again = sandbox.run("install", "--agent", "codex")
    assert "already configured" in again.stdout and path.read_text() == text

    assert sandbox.run("install", "--agent", "codex", "--uninstall").returncode == 0
    assert path.read_text() == CODEX_TEXT


def test_codex_table_updated_in_place_with_its_env(sandbox: Sandbox) -> None:
    path = sandbox.home / ".codex" / "config.toml"
    path.parent.mkdir()
    original = ('[mcp_servers.strobe]\ncommand = "/old/strobe"  # moved since\nargs = ["mcp"]\n\n'
                '[mcp_servers.strobe.env]\nSTROBE_HOME = "/data/strobe"\n\n# next\n[other]\nx = 1\n')
    path.write_text(original)
    assert "updated [mcp_servers.strobe]" in sandbox.run("install", "--agent", "codex").stdout
    data = tomllib.loads(path.read_text())
    assert data["mcp_servers"]["strobe"] == {"command": COMMAND, "args": ["mcp"],
                                             "env": {"STROBE_HOME": "/data/strobe"}}
    assert data["other"] == {"x": 1} and "# next\n[other]" in path.read_text()

    assert sandbox.run("install", "--agent", "codex", "--uninstall").returncode == 0
    assert path.read_text() == "# next\n[other]\nx = 1\n"


def test_codex_inline_table_is_refused_untouched(sandbox: Sandbox) -> None:
    path = sandbox.home / ".codex" / "config.toml"
    path.parent.mkdir()
    original = 'mcp_servers = { strobe = { command = "/old", args = [] } }\n'
    path.write_text(original)
    result = sandbox.run("install", "--agent", "codex")
    assert result.returncode == 1 and "Edit it by hand" in result.stdout
    assert path.read_text() == original


def test_codex_home_and_project_scope(sandbox: Sandbox, tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    env = {**sandbox.env(), "CODEX_HOME": str(codex_home)}
    subprocess.run([str(STROBE), "install", "--agent", "codex"], env=env, cwd=sandbox.project, check=True,
                   capture_output=True)
    assert tomllib.loads((codex_home / "config.toml").read_text())["mcp_servers"]["strobe"]["args"] == ["mcp"]
    assert not (sandbox.home / ".codex").exists()
    assert sandbox.run("install", "--agent", "codex", "--scope", "project").returncode == 0
    assert tomllib.loads((sandbox.project / ".codex" / "config.toml").read_text())["mcp_servers"]["strobe"]


def test_claude_skill_written_and_removed(sandbox: Sandbox) -> None:
    assert sandbox.run("install", "--agent", "claude").returncode == 0
    skill = sandbox.home / ".claude" / "skills" / "strobe" / "SKILL.md"
    text = skill.read_text()
    front, body = text.split("---\n", 2)[1:]
    fields = dict(line.split(": ", 1) for line in front.splitlines())
    assert fields["name"] == "strobe" and "debug" in json.loads(fields["description"])
    for tool in ("debug_launch", "debug_query", "debug_trace", "debug_breakpoint", "debug_continue", "debug_test",
                 "debug_stop"):
        assert tool in body
    assert sandbox.run("install", "--agent", "claude", "--uninstall").returncode == 0
    assert not skill.parent.exists()
    assert sandbox.run("install", "--agent", "claude", "--scope", "project").returncode == 0
    assert (sandbox.project / ".claude" / "skills" / "strobe" / "SKILL.md").read_text() == text


def test_user_file_at_our_path_is_not_replaced(sandbox: Sandbox) -> None:
    skill = sandbox.home / ".claude" / "skills" / "strobe" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("my own notes\n")
    result = sandbox.run("install", "--agent", "claude")
    assert result.returncode == 1 and "was not written by `strobe install`" in result.stdout
    assert skill.read_text() == "my own notes\n"
    assert not (sandbox.home / ".claude.json").exists()  # nothing of that agent is written when one file refuses
    sandbox.run("install", "--agent", "claude", "--uninstall")
    assert skill.read_text() == "my own notes\n"


@pytest.mark.parametrize(("agent", "user_file", "project_file"), [
    ("codex", ".codex/AGENTS.md", "AGENTS.md"), ("gemini", ".gemini/GEMINI.md", "GEMINI.md")])
def test_shared_instructions_file_gets_a_block_removed_exactly(sandbox: Sandbox, agent: str, user_file: str,
                                                             project_file: str) -> None:
    mine = "# House rules\n\nRun `make check` before committing.\n"
    for path in (sandbox.home / user_file, sandbox.project / project_file):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(mine)
    for scope in ("user", "project"):
        assert sandbox.run("install", "--agent", agent, "--scope", scope).returncode == 0
    for path in (sandbox.home / user_file, sandbox.project / project_file):
        text = path.read_text()
        assert text.startswith(mine) and "<!-- strobe:begin" in text and "<!-- strobe:end -->" in text
        assert "debug_launch" in text
    assert "already written" in sandbox.run("install", "--agent", agent).stdout
    for scope in ("user", "project"):
        assert sandbox.run("install", "--agent", agent, "--scope", scope, "--uninstall").returncode == 0
    assert (sandbox.home / user_file).read_text() == mine
    assert (sandbox.project / project_file).read_text() == mine


def test_project_rules_files_for_cursor_and_vscode(sandbox: Sandbox) -> None:
    assert sandbox.run("install", "--agent", "cursor", "--agent", "vscode", "--scope", "project").returncode == 0
    rule = sandbox.project / ".cursor" / "rules" / "strobe.mdc"
    instructions = sandbox.project / ".github" / "instructions" / "strobe.instructions.md"
    assert "alwaysApply: false" in rule.read_text() and "debug_test" in rule.read_text()
    assert 'applyTo: "**"' in instructions.read_text()
    sandbox.run("install", "--agent", "cursor", "--agent", "vscode", "--scope", "project", "--uninstall")
    assert not rule.exists() and not instructions.exists()
    assert not (sandbox.project / ".vscode" / "mcp.json").exists()  # it held only Strobe: deleted


def test_agents_found_by_directory_or_path(sandbox: Sandbox) -> None:
    (sandbox.home / ".cursor").mkdir()
    sandbox.fake_executable("gemini")
    result = sandbox.run("install")
    assert result.returncode == 0, result.stdout
    assert "Cursor (user scope)" in result.stdout and "Gemini CLI (user scope)" in result.stdout
    assert "Claude" not in result.stdout and not (sandbox.home / ".claude.json").exists()
    assert (sandbox.home / ".cursor" / "mcp.json").exists() and (sandbox.home / ".gemini" / "settings.json").exists()


def test_no_agent_found_says_how_to_name_one(sandbox: Sandbox) -> None:
    result = sandbox.run("install")
    assert result.returncode == 1
    assert "no coding agent found" in result.stdout and "--agent NAME" in result.stdout
    assert sandbox.tree() == {}


def test_agent_without_project_scope_says_so(sandbox: Sandbox) -> None:
    result = sandbox.run("install", "--agent", "windsurf", "--scope", "project")
    assert result.returncode == 1
    assert "Windsurf reads MCP servers only from ~/.codeium/windsurf/mcp_config.json" in result.stdout
    assert sandbox.tree() == {}


def test_symlinked_config_stays_a_link_and_keeps_its_mode(sandbox: Sandbox, tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "claude.json"
    real.parent.mkdir()
    real.write_text('{"userID": "u"}\n')
    os.chmod(real, 0o600)
    (sandbox.home / ".claude.json").symlink_to(real)
    assert sandbox.run("install", "--agent", "claude").returncode == 0
    assert (sandbox.home / ".claude.json").is_symlink()
    assert json.loads(real.read_text())["mcpServers"]["strobe"]["command"] == COMMAND
    assert real.stat().st_mode & 0o777 == 0o600


def test_run_as_a_module_uses_this_interpreter(sandbox: Sandbox) -> None:
    subprocess.run([sys.executable, "-m", "strobe", "install", "--agent", "gemini"], env=sandbox.env(),
                   cwd=sandbox.project, check=True, capture_output=True)
    entry = json.loads((sandbox.home / ".gemini" / "settings.json").read_text())["mcpServers"]["strobe"]
    assert entry == {"command": sys.executable, "args": ["-m", "strobe", "mcp"]}
