"""resolve_command: the agent's command, args, cwd and projectRoot turned into a spawnable argv."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from strobe.errors import ErrorCode, ValidationError
from strobe.instrument.command import ResolvedCommand, resolve_command


def _which(name: str) -> str:
    found = shutil.which(name)
    assert found is not None, f"'{name}' must be on PATH for these tests"
    return found


TRUE_BIN = _which("true")
SH_BIN = _which("sh")


def make_binary(path: Path) -> Path:
    """A real ELF executable (a copy of `true`) at `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(TRUE_BIN).resolve(), path)
    path.chmod(0o755)
    return path


def make_script(path: Path, text: str, mode: int = 0o755) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    return project


def validation_error(command: str, args: list[str], cwd: str | None, project_root: str) -> str:
    with pytest.raises(ValidationError) as info:
        resolve_command(command, args, cwd, project_root)
    assert info.value.code == ErrorCode.VALIDATION_ERROR
    assert info.value.to_dict() == {"code": "VALIDATION_ERROR", "message": info.value.message}
    return info.value.message


# ---- finding the executable ----------------------------------------------------------------------


def test_absolute_path(root: Path) -> None:
    exe = make_binary(root / "build" / "app")
    resolved = resolve_command(str(exe), ["--port", "80"], None, str(root))
    assert resolved == ResolvedCommand(
        argv=[str(exe), "--port", "80"], binary_path=str(exe), cwd=str(exe.parent)
    )


def test_relative_to_cwd(root: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    exe = make_binary(work / "bin" / "app")
    make_binary(root / "bin" / "app")  # same relative path under projectRoot: cwd must win
    resolved = resolve_command("bin/app", [], str(work), str(root))
    assert resolved == ResolvedCommand(argv=[str(exe)], binary_path=str(exe), cwd=str(work))


def test_relative_to_project_root_when_cwd_omitted(root: Path) -> None:
    exe = make_binary(root / "target" / "debug" / "app")
    resolved = resolve_command("./target/debug/app", [], None, str(root))
    assert resolved.argv == [str(exe)]
    assert resolved.binary_path == str(exe)
    assert resolved.cwd == str(exe.parent)


def test_relative_path_is_normalised(root: Path) -> None:
    exe = make_binary(root / "app")
    (root / "sub").mkdir()
    resolved = resolve_command("sub/../app", [], None, str(root))
    assert resolved.binary_path == str(exe)


def test_bare_name_found_on_path(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    exe = make_binary(bin_dir / "mytool")
    make_binary(root / "mytool")  # PATH wins over projectRoot for a bare name
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    resolved = resolve_command("mytool", ["x"], None, str(root))
    assert resolved == ResolvedCommand(argv=[str(exe), "x"], binary_path=str(exe), cwd=str(bin_dir))


def test_bare_system_command(root: Path) -> None:
    resolved = resolve_command("true", [], None, str(root))
    expected = os.path.abspath(TRUE_BIN)
    assert resolved.argv == [expected]
    assert resolved.cwd == os.path.dirname(expected)


def test_bare_name_not_on_path_found_in_project_root(root: Path) -> None:
    exe = make_binary(root / "strobe-test-local-only-tool")
    resolved = resolve_command("strobe-test-local-only-tool", [], None, str(root))
    assert resolved.argv == [str(exe)]


def test_explicit_cwd_is_kept(root: Path, tmp_path: Path) -> None:
    exe = make_binary(root / "app")
    work = tmp_path / "elsewhere"
    work.mkdir()
    assert resolve_command(str(exe), [], str(work), str(root)).cwd == str(work)


# ---- errors --------------------------------------------------------------------------------------


def test_nonexistent_path(root: Path) -> None:
    message = validation_error("./build/app", [], None, str(root))
    assert "does not exist" in message
    assert str(root / "build" / "app") in message  # where it looked
    assert "build the program first" in message


def test_bare_name_not_found(root: Path) -> None:
    message = validation_error("strobe-test-no-such-program", [], None, str(root))
    assert "not found on PATH" in message and str(root) in message
    assert "Pass an absolute path" in message


def test_directory(root: Path) -> None:
    (root / "build").mkdir()
    message = validation_error("build", [], None, str(root))
    assert "is a directory" in message
    assert "Pass the path of the program inside it" in message


def test_directory_by_absolute_path(root: Path) -> None:
    message = validation_error(str(root), [], None, str(root))
    assert "is a directory" in message


def test_non_executable_file(root: Path) -> None:
    make_script(root / "tool.sh", "#!/bin/sh\necho hi\n", mode=0o644)
    message = validation_error("./tool.sh", [], None, str(root))
    assert "is not executable" in message
    assert f"chmod +x {root / 'tool.sh'}" in message


def test_relative_project_root(root: Path) -> None:
    message = validation_error("true", [], None, "project")
    assert "projectRoot must be an absolute path" in message and "'project'" in message


def test_nonexistent_project_root(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    message = validation_error("true", [], None, str(missing))
    assert f"projectRoot '{missing}' is not an existing directory" in message
    assert "Pass the directory that exists" in message


def test_project_root_is_a_file(root: Path) -> None:
    exe = make_binary(root / "app")
    message = validation_error(str(exe), [], None, str(exe))
    assert "projectRoot" in message and "not an existing directory" in message


def test_nonexistent_cwd(root: Path, tmp_path: Path) -> None:
    exe = make_binary(root / "app")
    message = validation_error(str(exe), [], str(tmp_path / "nope"), str(root))
    assert "cwd" in message and "not an existing directory" in message


def test_relative_cwd(root: Path) -> None:
    exe = make_binary(root / "app")
    message = validation_error(str(exe), [], "sub", str(root))
    assert "cwd must be an absolute path" in message


@pytest.mark.parametrize("command", ["", "   "])
def test_empty_command(root: Path, command: str) -> None:
    message = validation_error(command, [], None, str(root))
    assert "command is empty" in message and "pass the path of the executable" in message


# ---- shebang scripts -----------------------------------------------------------------------------


def test_plain_shebang(root: Path) -> None:
    script = make_script(root / "run.sh", "#!/bin/sh\necho hi\n")
    resolved = resolve_command(str(script), ["a", "b"], None, str(root))
    assert resolved.argv == [str(Path("/bin/sh").resolve()), str(script), "a", "b"]
    assert resolved.binary_path == str(script)
    assert resolved.cwd == str(root)


def test_shebang_with_argument(root: Path) -> None:
    script = make_script(root / "run.sh", "#!/bin/sh -e\necho hi\n")
    resolved = resolve_command(str(script), ["x"], None, str(root))
    assert resolved.argv == [str(Path("/bin/sh").resolve()), "-e", str(script), "x"]


def test_env_shebang_resolved_through_path(root: Path) -> None:
    script = make_script(root / "run.sh", "#!/usr/bin/env sh\necho hi\n")
    resolved = resolve_command(str(script), [], None, str(root))
    assert resolved.argv == [str(Path(SH_BIN).resolve()), str(script)]


def test_env_shebang_uses_path_order(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    interp = make_binary(bin_dir / "myinterp")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    script = make_script(root / "run", "#!/usr/bin/env -S myinterp -u\nprint()\n")
    resolved = resolve_command(str(script), ["arg"], None, str(root))
    assert resolved.argv == [str(interp.resolve()), "-u", str(script), "arg"]


def test_env_shebang_interpreter_not_on_path(root: Path) -> None:
    script = make_script(root / "run", "#!/usr/bin/env strobe-test-no-such-interp\n")
    message = validation_error(str(script), [], None, str(root))
    assert "strobe-test-no-such-interp" in message and "not on PATH" in message


def test_env_shebang_without_interpreter(root: Path) -> None:
    script = make_script(root / "run", "#!/usr/bin/env\n")
    message = validation_error(str(script), [], None, str(root))
    assert "without naming an interpreter" in message


def test_empty_shebang(root: Path) -> None:
    script = make_script(root / "run", "#!\necho\n")
    message = validation_error(str(script), [], None, str(root))
    assert "empty '#!' line" in message


def test_interpreter_symlink_is_resolved(root: Path, tmp_path: Path) -> None:
    link = tmp_path / "links" / "mysh"
    link.parent.mkdir()
    link.symlink_to(Path("/bin/sh").resolve())
    script = make_script(root / "run", f"#!{link}\n")
    resolved = resolve_command(str(script), [], None, str(root))
    assert resolved.argv == [str(Path("/bin/sh").resolve()), str(script)]


def test_interpreter_that_is_a_script(root: Path, tmp_path: Path) -> None:
    shim = make_script(tmp_path / "shims" / "python3", '#!/bin/sh\nexec /usr/bin/python3 "$@"\n')
    script = make_script(root / "tool.py", f"#!{shim}\nprint('hi')\n")
    message = validation_error(str(script), [], None, str(root))
    assert "is itself a script" in message
    assert "Pass the real interpreter binary as command" in message


def test_missing_interpreter(root: Path, tmp_path: Path) -> None:
    script = make_script(root / "tool", f"#!{tmp_path / 'no-such-interp'}\n")
    message = validation_error(str(script), [], None, str(root))
    assert "cannot be read" in message


def test_elf_binary_has_no_prefix(root: Path) -> None:
    exe = make_binary(root / "app")
    assert resolve_command(str(exe), [], None, str(root)).argv == [str(exe)]


def test_executable_without_shebang_has_no_prefix(root: Path) -> None:
    exe = make_script(root / "data", "just text\n")
    assert stat.S_IMODE(exe.stat().st_mode) & 0o111
    assert resolve_command(str(exe), [], None, str(root)).argv == [str(exe)]


# ---- pyenv shims ---------------------------------------------------------------------------------


def fake_pyenv(tmp_path: Path, target: Path) -> Path:
    """A pyenv root whose `pyenv which NAME` prints `target` where a .python-version file is (like pyenv, which
    reads it from the current directory up), and fails elsewhere; returns its python3 shim, written the way pyenv
    writes shims."""
    pyenv_root = tmp_path / "pyenv"
    make_script(pyenv_root / "libexec" / "pyenv",
                '#!/bin/sh\n[ "$1" = which ] || exit 2\n'
                f'[ -f .python-version ] && echo {target} && exit 0\n'
                'echo "pyenv: $2: command not found" >&2\nexit 127\n')
    return make_script(pyenv_root / "shims" / "python3",
                       '#!/usr/bin/env bash\nset -e\nprogram="${0##*/}"\n'
                       f'export PYENV_ROOT="{pyenv_root}"\n'
                       f'exec "{pyenv_root}/libexec/pyenv" exec "$program" "$@"\n')


def test_pyenv_shim_command_runs_what_it_selects(root: Path, tmp_path: Path) -> None:
    interpreter = make_binary(tmp_path / "versions" / "3.12.1" / "bin" / "python3")
    shim = fake_pyenv(tmp_path, interpreter)
    (root / ".python-version").write_text("3.12.1\n")
    resolved = resolve_command(str(shim), ["app.py", "-v"], str(root), str(root))
    assert resolved == ResolvedCommand([str(interpreter), "app.py", "-v"], str(interpreter), str(root))


def test_pyenv_shim_in_a_shebang(root: Path, tmp_path: Path) -> None:
    interpreter = make_binary(tmp_path / "versions" / "3.12.1" / "bin" / "python3")
    shim = fake_pyenv(tmp_path, interpreter)
    (root / ".python-version").write_text("3.12.1\n")
    script = make_script(root / "tool.py", f"#!{shim} -u\nprint('hi')\n")
    assert resolve_command(str(script), [], None, str(root)).argv == [str(interpreter), "-u", str(script)]


def test_pyenv_shim_that_selects_nothing(root: Path, tmp_path: Path) -> None:
    shim = fake_pyenv(tmp_path, make_binary(tmp_path / "versions" / "3.12.1" / "bin" / "python3"))
    message = validation_error(str(shim), [], str(root), str(root))
    assert "is a pyenv shim that runs nothing" in message and "python3: command not found" in message
    assert "pyenv local" in message and "pass the real interpreter" in message
