"""The project walk over a directory tree (what is indexed, what is skipped and why, its limits) and the
index's selection by name, module-qualified name and file."""

from __future__ import annotations

import re
from pathlib import Path

from strobe.symbols.js_project import JsIndex, find_package, index_package, index_project


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


def test_index_project(tmp_path: Path) -> None:
    write(tmp_path, {
        "src/auth/index.ts": "export function login(user: string) {}",
        "src/util.mjs": "export const slug = (s) => s",
        "src/types.d.ts": "export declare function typed(): void;",
        "src/broken.js": "function (",
        "src/latin1.js": b"// caf\xe9\nfunction f() {}",
        "src/bom.js": "\ufefffunction withBom() {}",
        "dist/index.js": "exports.built = function () {}",
        "node_modules/dep/index.js": "function dependency() {}",
        ".cache/x.js": "function hidden() {}",
        "README.md": "function notCode() {}",
    })  # fmt: skip
    index = index_project(tmp_path)
    assert [(f.module, f.name) for f in index.functions] == [
        ("dist", "built"), ("bom", "withBom"), ("util", "slug"), ("auth", "login"),
    ]  # walk order: a directory's files by name, then its subdirectories
    assert index.files == 4
    skipped = dict(index.skipped)
    assert list(skipped) == [str(tmp_path / "src/broken.js"), str(tmp_path / "src/latin1.js")]
    assert "syntax error" in skipped[str(tmp_path / "src/broken.js")]
    assert "not UTF-8" in skipped[str(tmp_path / "src/latin1.js")]
    bom = index.functions[1]
    assert bom.body_start == len("function withBom() ")  # the BOM is dropped, as Node's require does
    assert index.notes == ()
    with_deps = index_project(tmp_path, include_node_modules=True)
    assert "dependency" in [f.name for f in with_deps.functions]
    assert index.matching(re.compile(r"log.*")) == [3]
    assert index.matching(re.compile(r"auth\.log.*")) == [3]  # module-qualified: the index file's directory
    assert index.matching(re.compile(r"util\.log.*")) == []
    assert index.matching_files(lambda file: file is not None and file.endswith(".mjs")) == [2]
    assert [f.name for f in index.at([0, 2])] == ["built", "slug"] and len(index) == 4


def test_index_project_limits(tmp_path: Path) -> None:
    write(tmp_path, {f"f{i}.js": f"function f{i}() {{}}" for i in range(5)})
    write(tmp_path, {"big.js": "// " + "x" * 2000 + "\nfunction big() {}"})
    index = index_project(tmp_path, max_files=3, max_file_bytes=1000)
    assert [f.name for f in index.functions] == ["f0", "f1"]  # big.js, f0.js, f1.js: the first three
    [(path, reason)] = index.skipped
    assert path == str(tmp_path / "big.js")
    assert reason == "2 KiB, over the 1 KiB limit: a bundle or generated code, not indexed"
    [note] = index.notes
    assert "first 3 source files" in note
    empty = index_project(tmp_path / "nothing-here")
    assert empty.functions == () and "No .js" in empty.notes[0]


def test_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "gone.js").symlink_to(tmp_path / "nowhere.js")  # unreadable even for root
    [(path, reason)] = index_project(tmp_path).skipped
    assert path == str(tmp_path / "gone.js") and "cannot be read (No such file or directory)" in reason


def test_index_type() -> None:
    assert len(JsIndex(())) == 0


def test_find_package_walks_up_and_resolves_links(tmp_path: Path) -> None:
    write(tmp_path, {
        "node_modules/dep/package.json": "{}",
        "node_modules/dep/lib/run.js": "function run() {}\nexports.go = () => run()",
        "node_modules/dep/node_modules/inner/index.js": "function inner() {}",
        "node_modules/notapackage/x.js": "function x() {}",
        "real/linked/package.json": "{}",
        "app/src/main.js": "",
    })  # fmt: skip
    (tmp_path / "app" / "node_modules").mkdir()
    (tmp_path / "app" / "node_modules" / "linked").symlink_to(tmp_path / "real" / "linked")
    app = tmp_path / "app"
    assert find_package(app, "dep") == tmp_path / "node_modules" / "dep"  # from a directory above
    assert find_package(app, "linked") == tmp_path / "real" / "linked"  # where Node runs its files
    assert find_package(app, "notapackage") is None  # no package.json
    assert find_package(app, "missing") is None
    assert find_package(app, "..") is None and find_package(app, "@scope") is None
    assert find_package(app, "@scope/../../etc") is None
    index = index_package(tmp_path / "node_modules" / "dep", "dep")
    assert [(f.module, f.name) for f in index.functions] == [("dep", "run"), ("dep", "go")]  # not its own deps
    assert index.matching(re.compile(r"dep\.run")) == [0]


def test_compiled_files_take_their_source_maps_lines(tmp_path: Path) -> None:
    write(tmp_path, {
        "dist/a.js": "\n\nfunction a() {}\n//# sourceMappingURL=a.js.map\n",
        "dist/a.js.map": '{"version": 3, "sources": ["../src/a.ts"], "mappings": ";;AAMA"}',
        "dist/b.js": "function b() {}\n//# sourceMappingURL=missing.map\n",
    })  # fmt: skip
    index = index_project(tmp_path)
    a, b = index.functions
    assert (a.source, a.source_line, a.line) == (str(tmp_path / "src/a.ts"), 7, 3)
    assert (b.source, b.source_line) == (None, None)
    [note] = index.notes
    assert note.startswith(str(tmp_path / "dist/b.js")) and "cannot be read" in note
    assert index.matching_files(lambda file: file is not None and file.endswith("src/a.ts")) == [0]
