"""What the host injects: source() is the modules in order, they share one namespace without clashing, and at run
time they import only the standard library (imports under `if TYPE_CHECKING:` are for mypy only)."""

from __future__ import annotations

import ast
import sys

from strobe.instrument.pytracer import MODULE_NAME, SOURCE_PATH, SOURCE_PATHS, source


def runtime_nodes(tree: ast.Module) -> list[ast.stmt]:
    return [node for node in tree.body
            if not (isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")]


def test_source_is_the_modules_in_order_ending_with_install() -> None:
    text = source()
    positions = [text.index(path.read_text()) for path in SOURCE_PATHS]
    assert positions == sorted(positions) and SOURCE_PATHS[-1] == SOURCE_PATH
    namespace: dict[str, object] = {"__name__": MODULE_NAME}
    exec(compile(text, "<strobe-tracer>", "exec"), namespace)  # defines, installs nothing
    assert callable(namespace["install"])


def test_no_top_level_name_is_defined_by_two_modules() -> None:
    owners: dict[str, str] = {}
    clashes = []
    for path in SOURCE_PATHS:
        for node in runtime_nodes(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.FunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            for name in names:
                if name != "TYPE_CHECKING" and owners.setdefault(name, path.name) != path.name:
                    clashes.append((name, owners[name], path.name))
    assert clashes == []


def test_runtime_imports_are_stdlib_only() -> None:
    imported = set()
    for path in SOURCE_PATHS:
        for top in runtime_nodes(ast.parse(path.read_text())):
            for node in ast.walk(top):
                if isinstance(node, ast.Import):
                    imported |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom):
                    assert node.level == 0 and node.module, f"{path.name}: a relative import runs in the target"
                    imported.add(node.module.split(".")[0])
    assert imported and imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)
