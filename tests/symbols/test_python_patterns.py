"""Python trace patterns: "."-separated globs over PythonFunction names, @usercode outside virtualenvs and
installed packages, @file:, and invalid patterns that say what is supported."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from strobe.errors import ErrorCode, InvalidPattern
from strobe.symbols.patterns import parse_pattern, parse_python_pattern
from strobe.symbols.python_index import SourceCache, index_tree


@dataclass(frozen=True)
class Fn:
    name: str
    file: str | None = None


@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        ("app.jobs.run", ["app.jobs.run"], ["app.jobs.run2", "x.app.jobs.run", "app.jobs.run.inner", "app_jobs_run"]),
        ("app.jobs.Worker.run", ["app.jobs.Worker.run"], ["app.jobs.Worker.running"]),
        ("app.*", ["app.jobs", "app.main"], ["app.jobs.run", "app", "apple.jobs"]),
        ("app.**", ["app.jobs", "app.jobs.run", "app.jobs.Worker.run"], ["app", "apple.jobs", "other.app.x"]),
        ("*.validate", ["auth.validate", "forms.validate"], ["auth.user.validate", "validate", "auth.validated"]),
        ("**.validate", ["validate", "auth.validate", "auth.user.Form.validate"], ["auth.revalidate"]),
        ("app.**.validate", ["app.validate", "app.user.validate", "app.a.b.validate"], ["lib.validate", "app.x"]),
        ("app.jobs.parse_*", ["app.jobs.parse_line", "app.jobs.parse_"], ["app.jobs.x.parse_line"]),
        ("app.*.run", ["app.jobs.run", "app.Worker.run"], ["app.jobs.Worker.run", "app.run"]),
        ("app.jobs.run.<lambda:12>", ["app.jobs.run.<lambda:12>"], ["app.jobs.run.<lambda:12:2>"]),
        ("app.jobs.run.<lambda*>", ["app.jobs.run.<lambda:12>", "app.jobs.run.<lambda:12:2>"],
         ["app.jobs.run.inner", "app.jobs.run.inner.<lambda:3>"]),
        ("app.*.<lambda:5>", ["app.mod.<lambda:5>"], ["app.<lambda:5>"]),
        ("tool-script.main", ["tool-script.main"], ["tool.main"]),
    ],
)
def test_python_globs(pattern: str, matching: list[str], not_matching: list[str]) -> None:
    compiled = parse_python_pattern(pattern, None)
    for name in matching:
        assert compiled.matches(Fn(name)), (pattern, name)
    for name in not_matching:
        assert not compiled.matches(Fn(name)), (pattern, name)


def test_a_native_pattern_keeps_its_separator() -> None:
    assert parse_pattern("a.*", None).matches(Fn("a.b.c"))  # "." is an ordinary character in native names
    assert not parse_python_pattern("a.*", None).matches(Fn("a.b.c"))
    assert parse_pattern("a::*", None).matches(Fn("a::b.c"))


_PARTS = st.lists(st.sampled_from(["a", "b", "ab", "*", "**"]), min_size=1, max_size=4)


@given(glob=_PARTS, name=st.lists(st.sampled_from(["a", "b", "ab", "ba"]), min_size=1, max_size=4))
def test_both_flavours_are_one_translation_with_another_separator(glob: list[str], name: list[str]) -> None:
    """A glob and a name written with "." for Python and "::" for native code give the same answer."""
    native, python = parse_pattern("::".join(glob), None), parse_python_pattern(".".join(glob), None)
    assert native.matches(Fn("::".join(name))) == python.matches(Fn(".".join(name)))


def test_file_pattern_is_a_path_substring() -> None:
    by_file = parse_python_pattern("@file:app/jobs.py", None)
    assert by_file.matches(Fn("app.jobs.run", "/home/me/proj/app/jobs.py"))
    assert not by_file.matches(Fn("app.main.run", "/home/me/proj/app/main.py"))
    assert not by_file.matches(Fn("x", None))


def write(path: Path, text: str = "def f():\n    pass\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_usercode_leaves_out_virtualenvs_and_installed_packages(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    write(project / "app" / "main.py")
    write(project / "main.py")
    write(project / ".venv" / "pyvenv.cfg", "home = /usr/bin\n")
    write(project / ".venv" / "lib" / "python3.11" / "site-packages" / "requests" / "api.py")
    write(project / ".venv" / "bin" / "tool.py")
    write(project / "deps" / "pyvenv.cfg", "home = /usr/bin\n")  # a virtualenv by any name
    write(project / "deps" / "lib" / "x.py")
    write(project / "vendor" / "site-packages" / "pkg" / "mod.py")
    write(project / "vendor" / "dist-packages" / "pkg" / "mod.py")
    write(project / "web" / "node_modules" / "gyp" / "x.py")
    write(project / "app" / "__pycache__" / "x.py")
    (tmp_path / "link").symlink_to(project / "app")
    usercode = parse_python_pattern("@usercode", str(project))
    assert usercode.matches(Fn("app.main.f", str(project / "app" / "main.py")))
    assert usercode.matches(Fn("main.f", str(project / "main.py")))
    assert usercode.matches(Fn("app.main.f", str(tmp_path / "link" / "main.py")))  # through a symlink
    for outside in [
        project / ".venv" / "lib" / "python3.11" / "site-packages" / "requests" / "api.py",
        project / ".venv" / "bin" / "tool.py",
        project / "deps" / "lib" / "x.py",
        project / "vendor" / "site-packages" / "pkg" / "mod.py",
        project / "vendor" / "dist-packages" / "pkg" / "mod.py",
        project / "web" / "node_modules" / "gyp" / "x.py",
        project / "app" / "__pycache__" / "x.py",
        tmp_path / "proj-other" / "x.py",  # a sibling sharing the prefix
        Path("/usr/lib/python3.11/json/__init__.py"),
    ]:
        assert not usercode.matches(Fn("x", str(outside))), outside
    assert not usercode.matches(Fn("x", None))


def test_usercode_and_index_agree_on_a_tree(tmp_path: Path) -> None:
    """Over a real index (which indexes a virtualenv only when asked to, here by rooting it inside one),
    positions() and matches() select the same functions."""
    write(tmp_path / "pyvenv.cfg", "home = /usr/bin\n")
    write(tmp_path / "lib" / "site-packages" / "dep.py", "def dep():\n    pass\n")
    jobs = "def run():\n    return lambda: 1\nclass W:\n    def run(self):\n        pass\n"
    write(tmp_path / "proj" / "app" / "jobs.py", jobs)
    write(tmp_path / "proj" / "tests" / "test_jobs.py", "def test_run():\n    pass\n")
    index = index_tree(str(tmp_path / "lib"), cache=SourceCache())
    assert [f.name for f in index.functions] == []  # site-packages is skipped even below the root
    index = index_tree(str(tmp_path), [str(tmp_path), str(tmp_path / "proj")], cache=SourceCache())
    assert [f.name for f in index.functions] == ["app.jobs.run", "app.jobs.run.<lambda:2>", "app.jobs.W.run",
                                                 "tests.test_jobs.test_run"]
    for text in ("**", "app.**", "*.*.run", "**.run", "app.jobs.run.*", "tests.*", "nope", "@usercode",
                 "@file:jobs.py", "@file:proj/"):
        pattern = parse_python_pattern(text, str(tmp_path / "proj"))
        expected = [i for i, f in enumerate(index.functions) if pattern.matches(f)]
        assert pattern.positions(index) == expected, text
    assert parse_python_pattern("**.run", None).positions(index) == [0, 2]
    assert parse_python_pattern("@usercode", str(tmp_path)).positions(index) == [0, 1, 2, 3]
    assert parse_python_pattern("@usercode", str(tmp_path / "proj" / "app")).positions(index) == [0, 1, 2]


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("", "empty"),
        (" app.run", "whitespace"),
        ("@foo", "unknown directive"),
        ("@file:", "'@file:app.py'"),
        ("app.***", "ambiguous"),
        ("app::jobs::run", "Did you mean 'app.jobs.run'?"),
        ("app/jobs.py", "'@file:app/jobs.py'"),
        ("app.jobs:run", "e.g. 'app.jobs.run'"),
        (".app", "'.' must separate"),
        ("app.", "'.' must separate"),
        ("app..run", "'.' must separate"),
        ("app.run()", "'pkg.mod.Class.method'"),
        ("app.run x", "'pkg.*' (direct children)"),
        ("x" * 600, "longer than"),
    ],
)
def test_invalid_python_patterns_say_what_is_supported(pattern: str, fragment: str) -> None:
    with pytest.raises(InvalidPattern) as error:
        parse_python_pattern(pattern, "/tmp")
    assert error.value.code is ErrorCode.INVALID_PATTERN
    assert fragment in error.value.message, error.value.message


def test_python_usercode_needs_a_project_root() -> None:
    with pytest.raises(InvalidPattern, match="projectRoot"):
        parse_python_pattern("@usercode", None)
