"""The Python function index against real code objects: each interpreter compiles the fixtures and lists every
code object it made (python_fixtures/code_objects.py); the index must hold exactly the functions among them,
with the same co_qualname, co_firstlineno, parameter names and async/generator flags. Then names, lookups,
module names, the tree walk, its limits and its cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from strobe.symbols.patterns import SearchableIndex
from strobe.symbols.python_index import (
    HOST_VERSION,
    PythonFunction,
    PythonIndex,
    SourceCache,
    index_file,
    index_source,
    index_tree,
)
from strobe.symbols.python_paths import MAX_FILE_BYTES, MAX_FILES, default_roots, module_name

FIXTURES = Path(__file__).parent / "python_fixtures"
ORACLE = FIXTURES / "code_objects.py"
SHAPES = FIXTURES / "shapes.py"
INTERPRETERS = (
    "/usr/bin/python3.11",
    "/root/.pyenv/versions/3.12.1/bin/python3",
    "/root/.pyenv/versions/3.13.0/bin/python3",
)
COMPREHENSIONS = {"<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"}
CO_NEWLOCALS, CO_GENERATOR, CO_COROUTINE, CO_ASYNC_GENERATOR = 0x2, 0x20, 0x80, 0x200

Key = tuple[str, int, tuple[str, ...], bool, bool]


def interpreter(path: str) -> str:
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} is not installed on this machine")
    return path


def code_objects(python: str, source: Path) -> tuple[tuple[int, int], list[dict[str, Any]]]:
    out = subprocess.run([python, "-I", str(ORACLE), str(source)], capture_output=True, text=True, check=True)
    found = json.loads(out.stdout)
    return (found["version"][0], found["version"][1]), found["code_objects"]


def functions_among(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Code objects of functions: new locals (class bodies have none), and not a comprehension."""
    return [o for o in objects if o["flags"] & CO_NEWLOCALS and o["name"] not in COMPREHENSIONS]


def oracle_key(o: dict[str, Any]) -> Key:
    flags = o["flags"]
    is_async = bool(flags & (CO_COROUTINE | CO_ASYNC_GENERATOR))
    is_generator = bool(flags & (CO_GENERATOR | CO_ASYNC_GENERATOR))
    return o["qualname"], o["first_line"], tuple(o["params"]), is_async, is_generator


def index_key(f: PythonFunction) -> Key:
    return f.qualname, f.first_line, f.params, f.is_async, f.is_generator


def line_of(text: str, path: Path = SHAPES) -> int:
    [line] = [n for n, content in enumerate(path.read_text().splitlines(), start=1) if text in content]
    return line


@pytest.mark.parametrize("python", INTERPRETERS)
@pytest.mark.parametrize("fixture", ["shapes.py", "future_annotations.py"])
def test_every_function_code_object_is_indexed_identically(python: str, fixture: str) -> None:
    version, objects = code_objects(interpreter(python), FIXTURES / fixture)
    warnings: list[str] = []
    indexed = index_file(str(FIXTURES / fixture), "fixture", python=version, warnings=warnings)
    expected = Counter(oracle_key(o) for o in functions_among(objects))
    got = Counter(index_key(f) for f in indexed)
    assert warnings == []
    assert expected - got == Counter(), f"code objects of Python {version} missing from the index"
    assert got - expected == Counter(), f"indexed functions Python {version} does not make"
    assert len(expected) >= 3


@pytest.mark.parametrize("python", INTERPRETERS)
def test_first_line_of_a_decorated_function_is_its_first_decorator(python: str) -> None:
    _, objects = code_objects(interpreter(python), SHAPES)
    first_lines = {o["qualname"]: o["first_line"] for o in objects}
    assert first_lines["stacked"] == line_of("@repeat(2)") != line_of("def stacked")
    assert first_lines["Outer.static"] == line_of("@staticmethod")
    # a decorator written across lines: the decorator expression's line, not the '@' line
    assert first_lines["decorator_expression_on_its_own_line"] == line_of("@(") + 1
    indexed = {f.qualname: f for f in index_file(str(SHAPES), "fixture")}
    assert indexed["stacked"].first_line == line_of("@repeat(2)") and indexed["stacked"].line == line_of("def stacked")


@pytest.mark.parametrize("python", INTERPRETERS)
def test_lambdas_in_comprehensions_follow_the_target_version(python: str) -> None:
    version, objects = code_objects(interpreter(python), SHAPES)
    line = line_of("listed = [lambda: i for i in items]")
    [qualname] = [o["qualname"] for o in objects if o["first_line"] == line and o["name"] == "<lambda>"]
    [function] = [f for f in index_file(str(SHAPES), "m", python=version) if f.first_line == line]
    assert function.qualname == qualname
    assert function.name == f"m.comprehensions.<lambda:{line}>"  # the same name on every version
    inlined = version >= (3, 12)  # PEP 709
    assert qualname == "comprehensions.<locals>." + ("<lambda>" if inlined else "<listcomp>.<lambda>")


def test_names_are_what_users_write() -> None:
    names = {f.name for f in index_file(str(SHAPES), "pkg.shapes")}
    pair, twins = line_of("pair = (lambda: 1, lambda: 2)"), line_of("twins = lambda")
    for expected in [
        "pkg.shapes.plain",
        "pkg.shapes.Outer.method",
        "pkg.shapes.Outer.Inner.method",
        "pkg.shapes.Outer.Inner.Deepest.deep_async",
        "pkg.shapes.outer.inner.innermost",
        "pkg.shapes.outer.Local.method",
        "pkg.shapes.repeat.decorate.wrapper",
        f"pkg.shapes.outer.<lambda:{pair}>",
        f"pkg.shapes.outer.<lambda:{pair}:2>",
        f"pkg.shapes.<lambda:{twins}>",
        f"pkg.shapes.<lambda:{twins}:2>",
        f"pkg.shapes.<lambda:{line_of('def lambda_default')}>",  # a default is evaluated where the def is
        f"pkg.shapes.Outer.<lambda:{line_of('attribute = lambda')}>",
        "pkg.shapes.made_global",  # `global made_global` inside make_global: a module attribute
        "pkg.shapes.GlobalClass.method",
    ]:
        assert expected in names, expected
    assert not any("<locals>" in name or "<listcomp>" in name or "<genexpr>" in name for name in names)
    by_name = {f.name: f for f in index_file(str(SHAPES), "pkg.shapes")}
    plain = by_name["pkg.shapes.plain"]
    assert (plain.module, plain.file, plain.line, plain.end_line) == (
        "pkg.shapes", str(SHAPES), line_of("def plain"), line_of("def plain") + 1)
    assert plain.params == ("a", "b", "c", "d", "args", "kwargs")  # CPython puts keyword-only before *args
    assert by_name["pkg.shapes.async_generator"].is_async and by_name["pkg.shapes.async_generator"].is_generator
    assert not by_name["pkg.shapes.not_a_generator"].is_generator


def test_lookup_finds_each_code_object() -> None:
    version, objects = code_objects(sys.executable, SHAPES)
    index = PythonIndex(tuple(index_file(str(SHAPES), "m", python=version)))
    for o in functions_among(objects):
        found = index.lookup(str(SHAPES), o["first_line"], o["qualname"])
        assert oracle_key(o) in {index_key(f) for f in found}, o
    twins = index.lookup(str(SHAPES), line_of("twins = lambda"), "<lambda>")
    assert [f.name for f in twins] == [f"m.<lambda:{twins[0].line}>", f"m.<lambda:{twins[0].line}:2>"]
    relative = os.path.relpath(SHAPES)
    assert index.lookup(relative, line_of("def plain"), "plain")[0].name == "m.plain"
    assert index.lookup(str(SHAPES), line_of("def plain"), "nope") == ()
    assert index.lookup("/elsewhere.py", 1, "plain") == ()


def test_lookup_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "app.py").write_text("def f():\n    pass\n")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    index = index_tree(str(tmp_path / "real"), cache=SourceCache())
    assert index.lookup(str(tmp_path / "link" / "app.py"), 1, "f")[0].name == "app.f"


def test_deep_nesting_needs_no_recursion() -> None:
    depth = 60  # CPython's own parser limits how deep a source can nest; the index walks without recursion
    source = "".join(f"{'    ' * level}def f{level}():\n" for level in range(depth)) + "    " * depth + "pass\n"
    [*_, deepest] = index_source(source, "deep.py", "deep")
    code = compile(source, "deep.py", "exec")
    while code.co_name != f"f{depth - 1}":
        [code] = [c for c in code.co_consts if hasattr(c, "co_qualname")]
    assert deepest.qualname == code.co_qualname and deepest.first_line == code.co_firstlineno == depth
    assert deepest.name == "deep." + ".".join(f"f{level}" for level in range(depth))


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        (b"def f(:\n    pass\n", "cannot parse it"),
        (b"x = '\xff\xfe'\n", "not valid source text"),
        (b"# -*- coding: nonexistent -*-\nx = 1\n", "not valid source text"),
        (b"x = 1\x00\n", "not"),
    ],
)
def test_broken_sources_are_reported_not_raised(source: bytes, fragment: str) -> None:
    warnings: list[str] = []
    assert index_source(source, "/p/broken.py", "broken", warnings=warnings) == []
    [warning] = warnings
    assert warning.startswith("/p/broken.py") and fragment in warning
    assert index_source(source, "/p/broken.py", "broken") == []  # no collector: still nothing raised


def test_source_encodings_are_honoured(tmp_path: Path) -> None:
    path = tmp_path / "latin.py"
    path.write_bytes("# -*- coding: latin-1 -*-\ndef caf\xe9():\n    return '\xe9'\n".encode("latin-1"))
    [function] = index_file(str(path), "latin")
    assert function.name == "latin.café"
    warnings: list[str] = []
    assert index_file(str(tmp_path / "missing.py"), "missing", warnings=warnings) == []
    assert "cannot be read" in warnings[0]


def test_module_names(tmp_path: Path) -> None:
    root = str(tmp_path)
    src = str(tmp_path / "src")
    assert module_name(f"{root}/app/models/user.py", [root]) == "app.models.user"  # a namespace package
    assert module_name(f"{root}/app/__init__.py", [root]) == "app"
    assert module_name(f"{root}/top.py", [root]) == "top"
    assert module_name(f"{src}/lib/core.py", [root, src]) == "lib.core"  # the longest root wins
    assert module_name(f"{src}/lib/core.py", [src, root]) == "lib.core"
    assert module_name(f"{src}/lib/core.py", [root]) == "src.lib.core"
    assert module_name(f"{root}/scripts-dir/tool.py", [root]) == "tool"  # not importable under root: a script
    assert module_name("/elsewhere/run.py", [root]) == "run"
    assert module_name(f"{root}/data.txt", [root]) is None
    assert module_name(f"{root}/app/models/user.py", [f"{root}/"]) == "app.models.user"
    (tmp_path / "src").mkdir()
    assert default_roots(root) == (root, src)
    (tmp_path / "src" / "__init__.py").write_text("")
    assert default_roots(root) == (root,)  # src/ is a package here, not a src-layout


def write(path: Path, text: str = "def f():\n    pass\n") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_tree_skips_environments_and_build_output(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    write(project / "src" / "app" / "main.py", "def main():\n    pass\n")
    write(project / "src" / "app" / "util.py", "class Helper:\n    def run(self):\n        pass\n")
    write(project / "tools" / "cli.py")
    write(project / "anything-named" / "pyvenv.cfg", "home = /usr/bin\n")  # a virtualenv whatever its name
    write(project / "anything-named" / "lib" / "python3.11" / "site-packages" / "dep.py")
    write(project / "vendor" / "site-packages" / "x.py")
    write(project / "vendor" / "dist-packages" / "x.py")
    write(project / "web" / "node_modules" / "x.py")
    write(project / "src" / "app" / "__pycache__" / "x.py")
    for skipped in (".venv", ".git", ".tox", ".nox", ".hidden", "build", "dist"):
        write(project / skipped / "x.py")
    write(project / "env" / "ok.py")  # not a virtualenv: no pyvenv.cfg
    index = index_tree(str(project), cache=SourceCache())
    assert [f.name for f in index.functions] == ["env.ok.f", "app.main.main", "app.util.Helper.run", "tools.cli.f"]
    assert index.files == 4 and index.skipped_files == 0 and index.warnings == ()
    assert index.functions[1].file == str(project / "src" / "app" / "main.py")
    assert [f.name for f in index_tree(str(project), [str(project)], cache=SourceCache()).functions][1] == (
        "src.app.main.main")


def test_tree_limits_count_what_they_skip(tmp_path: Path) -> None:
    assert (MAX_FILES, MAX_FILE_BYTES) == (20_000, 2 * 1024 * 1024)
    for i in range(5):
        write(tmp_path / f"m{i}.py")
    write(tmp_path / "big.py", "def big():\n    pass\n" + "#" * MAX_FILE_BYTES)
    write(tmp_path / "broken.py", "def (:\n")
    index = index_tree(str(tmp_path), cache=SourceCache(), max_files=4)
    assert [f.module for f in index.functions] == ["m0", "m1", "m2"]  # big.py too large; broken.py, m0-m2 taken
    assert index.files == 4 and index.skipped_files == 1 + 2
    assert len(index.warnings) == 3
    assert "broken.py:1: not indexed" in index.warnings[0]
    assert "1 file(s) larger than 2048 KiB" in index.warnings[1] and "big.py" in index.warnings[1]
    assert "2 .py file(s) beyond the first 4" in index.warnings[2]


def test_an_unchanged_tree_is_not_parsed_again(tmp_path: Path) -> None:
    for i in range(2_000):
        write(tmp_path / f"pkg{i % 20}" / f"mod{i}.py", f"def f{i}(x):\n    return x\n")
    write(tmp_path / "broken.py", "def (:\n")
    cache = SourceCache()
    first = index_tree(str(tmp_path), cache=cache)
    assert cache.parses == 2_001 and len(first) == 2_000 and len(first.warnings) == 1
    again = index_tree(str(tmp_path), cache=cache)
    assert cache.parses == 2_001  # nothing read or parsed
    assert again.functions == first.functions and again.warnings == first.warnings  # warnings remembered too
    write(tmp_path / "pkg3" / "mod3.py", "def changed(x, y):\n    return x\n")
    third = index_tree(str(tmp_path), cache=cache)
    assert cache.parses == 2_002
    assert "pkg3.mod3.changed" in {f.name for f in third.functions}
    index_tree(str(tmp_path), cache=cache, python=(3, 11) if HOST_VERSION != (3, 11) else (3, 12))
    assert cache.parses == 2_002 + 2_001  # another target version: other qualnames, parsed again


def test_a_missing_root_is_a_warning() -> None:
    index = index_tree("/nonexistent/project", cache=SourceCache())
    [warning] = index.warnings
    assert len(index) == 0 and "could not be listed" in warning and "/nonexistent/project" in warning


def test_cache_drops_the_oldest_files(tmp_path: Path) -> None:
    for i in range(5):
        write(tmp_path / f"m{i}.py")
    cache = SourceCache(max_files=3)
    index_tree(str(tmp_path), cache=cache)
    assert len(cache) == 3 and cache.parses == 5


def test_index_is_searchable_like_a_native_index(tmp_path: Path) -> None:
    import re

    write(tmp_path / "a.py", "def f():\n    pass\ndef g():\n    pass\n")
    write(tmp_path / "b.py", "def f():\n    pass\n")
    index: SearchableIndex = index_tree(str(tmp_path), cache=SourceCache())
    assert index.matching(re.compile(r".*\.f")) == [0, 2]
    assert index.matching_files(lambda file: file is not None and file.endswith("b.py")) == [2]
