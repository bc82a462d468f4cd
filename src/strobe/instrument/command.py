"""Turn the agent's `command` into an argv Frida can spawn, with errors that say how to fix it.

Frida neither searches PATH nor runs shebang scripts, so both are resolved here.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from strobe.errors import ValidationError

_ELF_MAGIC = b"\x7fELF"
_PYENV_EXEC = re.compile(r'^exec "([^"]+/libexec/pyenv)" exec ', re.MULTILINE)  # the line every pyenv shim ends with
_SHIM_MAX_BYTES = 4096
_SHIM_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class ResolvedCommand:
    argv: list[str]
    binary_path: str  # the program the user asked for (the script for interpreted programs)
    cwd: str


def _check_dir(label: str, value: str) -> Path:
    path = Path(value)
    if not path.is_absolute():
        raise ValidationError(f"{label} must be an absolute path, got '{value}'.")
    if not path.is_dir():
        raise ValidationError(f"{label} '{value}' is not an existing directory. Pass the directory that exists.")
    return path


def resolve_command(command: str, args: list[str], cwd: str | None, project_root: str) -> ResolvedCommand:
    root = _check_dir("projectRoot", project_root)
    work_dir = _check_dir("cwd", cwd) if cwd is not None else None
    if not command.strip():
        raise ValidationError("command is empty: pass the path of the executable to launch.")
    path = _find_executable(command, work_dir or root)
    run_dir = work_dir or path.parent
    shimmed = pyenv_target(path, run_dir)
    if shimmed is not None:  # the shim's own helpers (bash, pyenv, ...) are skipped, not followed
        return ResolvedCommand(argv=[str(shimmed), *args], binary_path=str(shimmed), cwd=str(run_dir))
    argv = [*_interpreter_prefix(path, run_dir), str(path), *args]
    return ResolvedCommand(argv=argv, binary_path=str(path), cwd=str(run_dir))


def _find_executable(command: str, base: Path) -> Path:
    if "/" not in command:
        found = shutil.which(command)
        if found is None:
            local = base / command
            if local.exists():
                return _check_executable(local, command)
            raise ValidationError(
                f"Executable '{command}' was not found on PATH or in {base}. Pass an absolute path, or a "
                "path relative to cwd (or projectRoot when cwd is omitted); build the program first if needed."
            )
        return _check_executable(Path(found), command)
    path = Path(command)
    if not path.is_absolute():
        path = base / path
    return _check_executable(path, command)


def _check_executable(path: Path, command: str) -> Path:
    path = Path(os.path.abspath(path))
    if not path.exists():
        raise ValidationError(
            f"Executable '{command}' does not exist (resolved to {path}). Check the path, or build the program "
            "first (e.g. `make`, `cargo build`) and pass the path of the output binary."
        )
    if path.is_dir():
        raise ValidationError(
            f"'{command}' is a directory ({path}), not an executable. Pass the path of the program inside it."
        )
    if not os.access(path, os.X_OK):
        raise ValidationError(
            f"'{command}' ({path}) is not executable. Make it executable (`chmod +x {path}`) or pass the "
            "program that runs it as command, with this file in args."
        )
    return path


def pyenv_target(path: Path, cwd: Path) -> Path | None:
    """What a pyenv shim runs from `cwd` (its .python-version, else pyenv's global version), as `pyenv which`
    says; None when `path` is not a pyenv shim. A shim is a bash script that execs several helpers before the
    interpreter: following each of them costs seconds."""
    try:
        if path.stat().st_size > _SHIM_MAX_BYTES:
            return None
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = _PYENV_EXEC.search(text)
    if found is None:
        return None
    pyenv = found.group(1)
    env = {**os.environ, "PYENV_ROOT": str(Path(pyenv).parent.parent)}
    try:
        result = subprocess.run([pyenv, "which", path.name], cwd=cwd, capture_output=True, text=True,
                                timeout=_SHIM_TIMEOUT_S, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ValidationError(f"{path} is a pyenv shim, and `{pyenv} which {path.name}` failed: {exc}. Pass the "
                              "real interpreter (e.g. ~/.pyenv/versions/3.12.1/bin/python3.12) as command.") from exc
    target = result.stdout.strip()
    if result.returncode != 0 or not target:
        said = " ".join(result.stderr.split())[:400]
        raise ValidationError(f"{path} is a pyenv shim that runs nothing from {cwd}: pyenv says \"{said}\". Select a "
                              "version (a .python-version file, `pyenv local`/`pyenv global`) or pass the real "
                              "interpreter as command.")
    return Path(target)


def _interpreter_prefix(path: Path, cwd: Path) -> list[str]:
    """`#!/usr/bin/env python3 -u` scripts run through their interpreter, resolved to a real binary."""
    try:
        with path.open("rb") as handle:
            head = handle.read(256)
    except OSError as exc:
        raise ValidationError(f"'{path}' cannot be read: {exc.strerror}.") from exc
    if head.startswith(_ELF_MAGIC) or not head.startswith(b"#!"):
        return []
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", errors="replace").strip()
    parts = shlex.split(line)
    if not parts:
        raise ValidationError(f"'{path}' starts with an empty '#!' line; fix the script's interpreter line.")
    if Path(parts[0]).name == "env":
        parts = [p for p in parts[1:] if p != "-S"]
        if not parts:
            raise ValidationError(f"'{path}' uses '#!/usr/bin/env' without naming an interpreter.")
        found = shutil.which(parts[0])
        if found is None:
            raise ValidationError(f"The interpreter '{parts[0]}' named by {path}'s '#!' line is not on PATH.")
        parts[0] = found
    return [str(_real_interpreter(Path(parts[0]), cwd)), *parts[1:]]


def _real_interpreter(path: Path, cwd: Path) -> Path:
    """A script's interpreter as a binary: a pyenv shim is followed to what it runs."""
    shimmed = pyenv_target(path, cwd)
    if shimmed is not None:
        return shimmed
    resolved = path.resolve()
    try:
        with resolved.open("rb") as handle:
            if handle.read(4) == _ELF_MAGIC:
                return resolved
    except OSError as exc:
        raise ValidationError(f"The interpreter {path} cannot be read: {exc.strerror}.") from exc
    raise ValidationError(
        f"The interpreter {path} is itself a script (a version-manager shim?). Pass the real interpreter "
        "binary as command and the script in args."
    )
