"""`strobe doctor`: the real command against a temporary STROBE_HOME, and each check fed fake answers."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from strobe import cli
from strobe.install import doctor
from strobe.install.doctor import AgentInfo, FridaInfo, Probe, Status
from strobe.paths import StrobePaths
from tests.install.conftest import Sandbox

NAMES = ["ptrace", "frida", "agent", "home", "disk", "compilers", "stack tools", "daemon"]


def test_doctor_reports_every_check(sandbox: Sandbox) -> None:
    text = sandbox.run("doctor")
    for name in NAMES:
        assert f"  {name} " in text.stdout
    assert f"STROBE_HOME={sandbox.strobe_home}" in text.stdout
    as_json = sandbox.run("doctor", "--json")
    report = json.loads(as_json.stdout)
    assert [check["name"] for check in report["checks"]] == NAMES
    assert all(check["status"] in ("ok", "warn", "fail") for check in report["checks"])
    failed = any(check["status"] == "fail" for check in report["checks"])
    assert report["ok"] is not failed
    assert (as_json.returncode, text.returncode) == (int(failed), int(failed))
    by_name = {check["name"]: check for check in report["checks"]}
    assert by_name["compilers"]["status"] == "warn" and "gcc" in by_name["compilers"]["detail"]  # empty PATH
    assert by_name["daemon"]["detail"].startswith("not running")
    assert not sandbox.strobe_home.exists()  # doctor creates nothing


def test_failing_ptrace_check_prints_the_fix_and_exits_1(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    monkeypatch.setenv("STROBE_HOME", str(tmp_path / "sh"))
    monkeypatch.setattr(doctor, "read_ptrace_scope", lambda: 2)
    monkeypatch.setattr(doctor, "ptrace_privilege", lambda: "")
    assert cli.main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "  fail  ptrace" in out and "ptrace_scope=2" in out
    assert "fix: sudo sysctl kernel.yama.ptrace_scope=0" in out


def test_missing_agent_fails_with_the_fix(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    monkeypatch.setenv("STROBE_HOME", str(tmp_path / "sh"))
    monkeypatch.setattr(doctor, "probe_agent", lambda: AgentInfo(None, None, has_compiler=True))
    assert cli.main(["doctor", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    agent = next(check for check in report["checks"] if check["name"] == "agent")
    assert agent["status"] == "fail" and "no agent" in agent["detail"] and "reinstall" in agent["fix"]
    assert report["ok"] is False


def _probe(tmp_path: Path) -> Probe:
    """Every answer healthy; each test changes one."""
    return Probe(
        paths=StrobePaths(tmp_path / "sh"), ptrace_scope=lambda: 0, privileged=lambda: "",
        frida=lambda: FridaInfo("17.2.0", "", 12, 0.01), agent=lambda: AgentInfo(tmp_path / "agent.js", None),
        which=lambda name: f"/usr/bin/{name}", free_bytes=lambda path: 50 << 30,
        daemon_pid=lambda paths: None, socket_answers=lambda path: False)


def _status(probe: Probe, name: str) -> doctor.CheckResult:
    return next(result for result in doctor.run_checks(probe) if result.name == name)


def test_healthy_probe_passes(tmp_path: Path) -> None:
    assert {result.status for result in doctor.run_checks(_probe(tmp_path))} == {Status.OK}
    assert doctor.run_doctor(_probe(tmp_path), out=io.StringIO()) == 0


@pytest.mark.parametrize(("scope", "who", "status"), [
    (None, "", Status.OK), (1, "", Status.WARN), (1, "root", Status.OK), (2, "", Status.FAIL),
    (2, "CAP_SYS_PTRACE", Status.OK), (3, "root", Status.FAIL)])
def test_ptrace_scopes(tmp_path: Path, scope: int | None, who: str, status: Status) -> None:
    probe = dataclasses.replace(_probe(tmp_path), ptrace_scope=lambda: scope, privileged=lambda: who)
    result = _status(probe, "ptrace")
    assert result.status is status
    if status is not Status.OK:
        assert result.fix


def test_frida_problems(tmp_path: Path) -> None:
    broken = dataclasses.replace(_probe(tmp_path), frida=lambda: FridaInfo(None, "ImportError: no frida"))
    assert _status(broken, "frida").status is Status.FAIL and "pip install" in _status(broken, "frida").fix
    slow = dataclasses.replace(_probe(tmp_path), frida=lambda: FridaInfo("17.2.0", "", 12, 5.0))
    assert _status(slow, "frida").status is Status.WARN


def test_agent_from_sources_needs_the_compiler(tmp_path: Path) -> None:
    source = tmp_path / "agent"
    source.mkdir()
    (source / "tsconfig.json").write_text("{}")
    ok = dataclasses.replace(_probe(tmp_path), agent=lambda: AgentInfo(None, source, has_compiler=True))
    assert _status(ok, "agent").status is Status.OK and "frida.Compiler" in _status(ok, "agent").detail
    no_compiler = dataclasses.replace(_probe(tmp_path), agent=lambda: AgentInfo(None, source))
    assert _status(no_compiler, "agent").status is Status.FAIL


def test_low_disk_missing_tools_warn(tmp_path: Path) -> None:
    probe = dataclasses.replace(_probe(tmp_path), free_bytes=lambda path: 200 << 20,
                                which=lambda name: "/usr/bin/gcc" if name == "gcc" else None)
    assert _status(probe, "disk").status is Status.WARN
    compilers = _status(probe, "compilers")
    assert compilers.status is Status.WARN and compilers.fix == "sudo apt-get install g++ cargo golang nodejs"
    assert _status(probe, "stack tools").status is Status.WARN
    assert doctor.run_doctor(probe, out=io.StringIO()) == 0  # warnings only


def test_unsafe_home_fails(tmp_path: Path) -> None:
    home = tmp_path / "sh"
    home.mkdir()
    os.chmod(home, 0o777)
    result = _status(_probe(tmp_path), "home")
    assert result.status is Status.FAIL and "chmod 700" in result.detail


def test_daemon_running_found_through_its_lock(tmp_path: Path) -> None:
    """A stand-in daemon (holds strobe.lock, names itself in strobe.pid, listens on strobe.sock) is reported
    running by the real probe functions; after it exits, not running."""
    paths = StrobePaths(tmp_path / "sh")
    paths.home.mkdir(mode=0o700)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, socket, sys\n"
        f"fd = os.open({str(paths.lock_file)!r}, os.O_RDWR | os.O_CREAT, 0o600)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        f"s = socket.socket(socket.AF_UNIX); s.bind({str(paths.socket)!r}); s.listen()\n"
        f"open({str(paths.pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "ready\n"
        probe = dataclasses.replace(Probe.real(paths), frida=lambda: FridaInfo("17.2.0", "", 1, 0.0))
        result = _status(probe, "daemon")
        assert result.status is Status.OK and f"running (pid {holder.pid})" in result.detail
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=10)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _status(probe, "daemon").detail.startswith("running"):
        time.sleep(0.05)
    assert _status(probe, "daemon").detail.startswith("not running")
    with socket.socket(socket.AF_UNIX) as sock:
        assert sock.connect_ex(str(paths.socket)) != 0
