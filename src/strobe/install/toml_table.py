"""One `[<prefix>.<name>]` table in a TOML file (Codex's `[mcp_servers.strobe]`), edited as text so that every
other line — comments, tables, formatting — stays byte for byte what it was. No TOML writer is needed:

    text, summary = toml_with_server(read_text(path), path, "mcp_servers", "strobe", "/usr/bin/strobe", ["mcp"])

A new table is appended at the end of the file; an existing one has its `command` and `args` lines rewritten in
place; uninstalling removes the table's lines (and its sub-tables, such as `[mcp_servers.strobe.env]`). Each result
is parsed back with tomllib and compared with the original: anything other than our table changed, or our table
not as intended (it was written as an inline table or with dotted keys, say), and the edit is refused with a
ConfigError instead of written.
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
from pathlib import Path
from typing import Any

from strobe.install.config_files import ConfigError

_ANY_HEADER = re.compile(r"^\s*\[")
_KEY_LINE = re.compile(r"^\s*(command|args)\s*=")


def _header(prefix: str, name: str, sub: bool) -> re.Pattern[str]:
    part = rf"""(?:{re.escape(name)}|"{re.escape(name)}"|'{re.escape(name)}')"""
    tail = r"\s*\.[^\]]*" if sub else ""
    return re.compile(rf"^\s*\[\s*{re.escape(prefix)}\s*\.\s*{part}{tail}\s*\]\s*(?:#.*)?$")


def _quote(value: str) -> str:
    """A TOML basic string: JSON's escapes (\\" \\\\ \\n \\uXXXX ...) are all valid TOML escapes."""
    return json.dumps(value, ensure_ascii=False)


def _parse(text: str | None, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text or "")
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); Strobe left it untouched. Fix it and run again.") \
            from None


def _server(data: dict[str, Any], prefix: str, name: str) -> Any:
    servers = data.get(prefix)
    return servers.get(name) if isinstance(servers, dict) else None


def _without(data: dict[str, Any], prefix: str, name: str) -> dict[str, Any]:
    rest = copy.deepcopy(data)
    servers = rest.get(prefix)
    if isinstance(servers, dict):
        servers.pop(name, None)
        if not servers:
            del rest[prefix]
    return rest


def _checked(path: Path, before: dict[str, Any], text: str, prefix: str, name: str,
             expected: dict[str, Any] | None) -> str:
    """`text` if parsing it gives `before` with only our table changed to `expected` (None: absent)."""
    try:
        after = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        after = None
    if after is not None and _without(after, prefix, name) == _without(before, prefix, name):
        server = _server(after, prefix, name)
        got = None if server is None else {key: server.get(key) for key in (expected or {})}
        if got == expected:
            return text
    raise _refusal(path, prefix, name, expected)


def _refusal(path: Path, prefix: str, name: str, expected: dict[str, Any] | None) -> ConfigError:
    todo = f"set its command and args to {json.dumps(expected)}" if expected else "remove it"
    return ConfigError(
        f"{path}: Strobe could not edit [{prefix}.{name}] without touching the rest of the file (it may be "
        f"written as an inline table or with dotted keys); the file was left untouched. Edit it by hand: {todo}.")


def _section(lines: list[str], prefix: str, name: str) -> tuple[int, int] | None:
    """(header line, end) of our table's own lines, its sub-tables included; None without such a header."""
    own, sub = _header(prefix, name, False), _header(prefix, name, True)
    start = next((i for i, line in enumerate(lines) if own.match(line)), None)
    if start is None:
        return None
    end = start + 1
    while end < len(lines) and (not _ANY_HEADER.match(lines[end]) or sub.match(lines[end])):
        end += 1
    return start, end


def toml_with_server(text: str | None, path: Path, prefix: str, name: str, command: str,
                     args: list[str]) -> tuple[str | None, str]:
    data = _parse(text, path)
    expected: dict[str, Any] = {"command": command, "args": list(args)}
    current = _server(data, prefix, name)
    if isinstance(current, dict) and all(current.get(key) == value for key, value in expected.items()):
        return text, "already configured"
    values = {"command": _quote(command), "args": "[" + ", ".join(_quote(arg) for arg in args) + "]"}
    original = text or ""
    if current is None:
        block = f"[{prefix}.{name}]\n" + "".join(f"{key} = {value}\n" for key, value in values.items())
        separator = "" if not original.strip() else ("\n" if original.endswith("\n") else "\n\n")
        updated = (original if original.strip() else "") + separator + block
        return _checked(path, data, updated, prefix, name, expected), f"added [{prefix}.{name}]"
    lines = original.splitlines(keepends=True)
    span = _section(lines, prefix, name)
    if span is None:
        raise _refusal(path, prefix, name, expected)
    start, end = span
    own_end = next((i for i in range(start + 1, end) if _ANY_HEADER.match(lines[i])), end)
    missing = dict(values)
    for i in range(start + 1, own_end):
        match = _KEY_LINE.match(lines[i])
        if match:
            lines[i] = f"{match.group(1)} = {missing.pop(match.group(1))}\n"
    lines[start + 1:start + 1] = [f"{key} = {value}\n" for key, value in missing.items()]
    updated = "".join(lines)
    return _checked(path, data, updated, prefix, name, expected), f"updated [{prefix}.{name}]"


def toml_without_server(text: str | None, path: Path, prefix: str, name: str) -> tuple[str | None, str]:
    data = _parse(text, path)
    if _server(data, prefix, name) is None:
        return text, "not configured"
    lines = (text or "").splitlines(keepends=True)
    span = _section(lines, prefix, name)
    if span is None:
        raise _refusal(path, prefix, name, None)
    start, section_end = span
    # Comments at the end of the section belong to what follows (a comment above the next table): the table ends
    # at its last value, with the blank lines after it.
    end = section_end
    while end > start + 1 and (not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")):
        end -= 1
    while end < section_end and not lines[end].strip():
        end += 1
    follows_blank = end == len(lines) or not lines[end].strip()
    if start > 0 and not lines[start - 1].strip() and follows_blank:
        start -= 1  # the blank line put before the table when it was appended
    rest = "".join(lines[:start] + lines[end:])
    checked = _checked(path, data, rest, prefix, name, None)
    return (checked if checked.strip() else None), f"removed [{prefix}.{name}]"
