"""What debug_launch {pid} says when the kernel refuses the attach (instrument/launcher.py, ptrace_refusal) and which
processes it refuses itself (daemon/launching.py, attachable_program)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from strobe.daemon.launching import attachable_program, command_line
from strobe.errors import ValidationError
from strobe.instrument.launcher import ptrace_refusal


@pytest.mark.parametrize(("scope", "says"), [
    ("1", "only a process's parent may attach"),
    ("2", "only a process with CAP_SYS_PTRACE"),
])
def test_yama_scopes_name_the_sysctl_fix(tmp_path: Path, scope: str, says: str) -> None:
    setting = tmp_path / "ptrace_scope"
    setting.write_text(f"{scope}\n")
    message = ptrace_refusal(42, "permission denied", str(setting))
    assert f"ptrace_scope is {scope}" in message and says in message
    assert "sudo sysctl -w kernel.yama.ptrace_scope=0" in message and "debug_launch {command}" in message


def test_scope_3_and_no_yama(tmp_path: Path) -> None:
    setting = tmp_path / "ptrace_scope"
    setting.write_text("3\n")
    assert "forbids attaching to any process until reboot" in ptrace_refusal(42, "denied", str(setting))
    without = ptrace_refusal(42, "denied", str(tmp_path / "absent"))
    assert "processes of its own user" in without and "kernel.yama.ptrace_scope=0" in without


def test_attachable_program_and_command_line() -> None:
    child = subprocess.Popen(["sleep", "30"])
    try:
        assert attachable_program(child.pid, set()) == os.path.realpath(
            subprocess.run(["sh", "-c", "command -v sleep"], capture_output=True, text=True).stdout.strip())
        assert command_line(child.pid) == ["sleep", "30"]
        with pytest.raises(ValidationError, match="Strobe's own daemon"):
            attachable_program(child.pid, {child.pid})
    finally:
        child.kill()
        child.wait()
    with pytest.raises(ValidationError, match=r"has exited|No process"):
        attachable_program(child.pid, set())
