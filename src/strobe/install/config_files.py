"""Careful edits of other programs' files: a JSON server entry, a delimited block in a shared Markdown file, a
file of our own. Each edit is pure (text in, text out, `None` meaning "no file"), so a dry run and the real run
compute the same thing; `apply_edit` then writes atomically (temp file + rename, the file's mode kept, through a
symlink to its target) or deletes.

    after, summary = json_with_server(read_text(path), path, "mcpServers", "strobe", entry)

Nothing here overwrites what it cannot parse: an invalid JSON file, a block marker without its end, or a file of
ours that someone else wrote raise ConfigError with what to do, and the file is left as it was.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BLOCK_BEGIN = "<!-- strobe:begin (added by `strobe install`; `strobe install --uninstall` removes this block) -->"
BLOCK_BEGIN_PREFIX = "<!-- strobe:begin"
BLOCK_END = "<!-- strobe:end -->"
OWN_FILE_MARK = "<!-- strobe:managed (written by `strobe install`; `strobe install --uninstall` removes it) -->"


class ConfigError(Exception):
    """A file Strobe will not edit; the message names it, says why and what to do. The file was not touched."""


@dataclass(frozen=True)
class Edit:
    """What one file becomes. `before`/`after` None: the file does not exist / is to be deleted. `prune_dir`: a
    directory of Strobe's own removed too when deleting the file leaves it empty."""

    path: Path
    before: str | None
    after: str | None
    summary: str
    prune_dir: Path | None = None
    show_diff: bool = True  # a dry run shows the diff (not for the instructions text: it is long and ours)

    @property
    def changed(self) -> bool:
        return self.before != self.after


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path} is not UTF-8 text ({exc.reason}); Strobe left it untouched.") from None


# JSON: {"<key>": {"strobe": {...}}} inside whatever else the file holds.

def _load_json_object(text: str | None, path: Path, key: str) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); Strobe left it "
            f"untouched. Fix it (comments and trailing commas are not JSON) and run again, or add Strobe under "
            f'"{key}" yourself.') from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} holds a JSON {type(data).__name__}, not an object; Strobe left it untouched.")
    servers = data.get(key)
    if servers is not None and not isinstance(servers, dict):
        raise ConfigError(f'{path}: "{key}" is a {type(servers).__name__}, not an object of servers; Strobe left '
                          f"the file untouched.")
    return data


def _dump_json(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def json_with_server(text: str | None, path: Path, key: str, name: str,
                     entry: dict[str, Any]) -> tuple[str | None, str]:
    """The file with `key.name` set to `entry` (keys the user added to an existing entry, such as "env", are
    kept), and what changed. Unchanged text when the entry is already there."""
    data = _load_json_object(text, path, key)
    servers = data.setdefault(key, {})
    current = servers.get(name)
    merged = {**current, **entry} if isinstance(current, dict) else dict(entry)
    if current == merged:
        return text, "already configured"
    servers[name] = merged
    return _dump_json(data), f"{'updated' if current is not None else 'added'} {key}.{name}"


def json_without_server(text: str | None, path: Path, key: str, name: str) -> tuple[str | None, str]:
    """The file without `key.name`; an object left empty by that goes too, and a file left as `{}` is deleted."""
    data = _load_json_object(text, path, key)
    servers = data.get(key)
    if not isinstance(servers, dict) or name not in servers:
        return text, "not configured"
    del servers[name]
    if not servers:
        del data[key]
    return (_dump_json(data) if data else None), f"removed {key}.{name}"


# A delimited block in a Markdown file others write too (AGENTS.md, GEMINI.md).

def _block_span(text: str, path: Path) -> tuple[int, int] | None:
    begin = text.find(BLOCK_BEGIN_PREFIX)
    if begin < 0:
        return None
    end = text.find(BLOCK_END, begin)
    if end < 0:
        raise ConfigError(f"{path} has Strobe's begin marker but not its end ({BLOCK_END}); Strobe left it "
                          f"untouched. Remove the marker line (or restore the end) and run again.")
    end += len(BLOCK_END)
    if text.startswith("\n", end):
        end += 1
    return begin, end


def with_block(text: str | None, path: Path, body: str) -> tuple[str | None, str]:
    block = f"{BLOCK_BEGIN}\n{body.rstrip()}\n{BLOCK_END}\n"
    if text is None or not text.strip():
        return block, "written"
    span = _block_span(text, path)
    if span is not None:
        updated = text[:span[0]] + block + text[span[1]:]
        return updated, ("already written" if updated == text else "updated Strobe's block")
    separator = "\n" if text.endswith("\n") else "\n\n"
    return text + separator + block, "added Strobe's block"


def without_block(text: str | None, path: Path) -> tuple[str | None, str]:
    """The file without Strobe's block (and the blank line put before it); a file left blank is deleted."""
    if text is None:
        return None, "not present"
    span = _block_span(text, path)
    if span is None:
        return text, "no Strobe block"
    begin, end = span
    if text[:begin].endswith("\n\n"):
        begin -= 1
    rest = text[:begin] + text[end:]
    return (rest if rest.strip() else None), "removed Strobe's block"


# A file that is Strobe's own (a skill, a rules file), recognised by its mark.

def own_file(text: str | None, path: Path, content: str) -> tuple[str | None, str]:
    if text == content:
        return text, "already written"
    if text is not None and OWN_FILE_MARK not in text:
        raise ConfigError(f"{path} exists and was not written by `strobe install`; Strobe left it untouched. "
                          f"Move it away to let Strobe write its own.")
    return content, ("written" if text is None else "updated")


def without_own_file(text: str | None, path: Path) -> tuple[str | None, str]:
    if text is None:
        return None, "not present"
    if OWN_FILE_MARK not in text:
        return text, "not written by strobe install: left alone"
    return None, "removed"


def apply_edit(edit: Edit) -> None:
    if not edit.changed:
        return
    if edit.after is None:
        edit.path.unlink(missing_ok=True)
        if edit.prune_dir is not None:
            with contextlib.suppress(OSError):  # not empty (someone else's files) or already gone
                edit.prune_dir.rmdir()
        return
    write_atomically(edit.path, edit.after)


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text` in one rename: never a half-written file. A symlinked file (dotfile managers)
    is written at its target, so the link stays; an existing file keeps its mode."""
    target = path.resolve() if path.is_symlink() else path
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".strobe-tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
