"""load_index: served from cache_dir/symbols.db by build id, rebuilt for a new build, safe when concurrent."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from strobe.symbols import FunctionIndex, build_index, load_index
from strobe.symbols import index as index_module
from tests.symbols.conftest import Programs


def compile_c(path: Path, source: str, *flags: str) -> Path:
    src = path.with_suffix(".c")
    src.write_text(source)
    subprocess.run(["gcc", "-g", "-O0", *flags, "-o", str(path), str(src)], check=True)
    return path


def names(index: FunctionIndex) -> set[str]:
    return {f.name for f in index.functions}


def forbid_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(path: object) -> FunctionIndex:
        raise AssertionError(f"build_index({path}) called: the cache was not used")

    monkeypatch.setattr(index_module, "build_index", fail)


def test_second_load_is_served_from_the_cache(
    programs: Programs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = programs.build("cxx")
    first = load_index(binary, tmp_path)
    assert (tmp_path / "symbols.db").is_file()
    with sqlite3.connect(tmp_path / "symbols.db") as db:
        assert db.execute("PRAGMA page_size").fetchone() == (65536,)  # big pages: the payload reads faster
    db.close()
    assert first == build_index(binary)
    forbid_builds(monkeypatch)
    second = load_index(binary, tmp_path)
    assert second == first and second.functions == first.functions
    assert second.by_address(second.functions[-1].address) is not None


def test_same_build_elsewhere_reuses_the_entry_with_its_own_path(
    programs: Programs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = programs.build("c")
    load_index(binary, tmp_path / "cache")
    copy = tmp_path / "copy-of-c"
    copy.write_bytes(binary.read_bytes())
    forbid_builds(monkeypatch)
    index = load_index(copy, tmp_path / "cache")
    assert index.elf.path == str(copy) and "process_command" in names(index)


def test_rebuilt_binary_gets_a_fresh_index(tmp_path: Path) -> None:
    binary = tmp_path / "app"
    compile_c(binary, "int alpha(void) { return 1; }\nint main(void) { return alpha(); }\n", "-Wl,--build-id")
    first = load_index(binary, tmp_path)
    compile_c(binary, "int beta(void) { return 2; }\nint main(void) { return beta(); }\n", "-Wl,--build-id")
    second = load_index(binary, tmp_path)
    assert first.elf.build_id != second.elf.build_id
    assert "alpha" in names(first) and "beta" not in names(first)
    assert "beta" in names(second) and "alpha" not in names(second)


def test_without_build_id_the_key_is_path_size_and_mtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    binary = tmp_path / "app"
    compile_c(binary, "int alpha(void) { return 1; }\nint main(void) { return alpha(); }\n", "-Wl,--build-id=none")
    first = load_index(binary, tmp_path)
    assert first.elf.build_id is None
    with monkeypatch.context() as patch:
        forbid_builds(patch)
        assert load_index(binary, tmp_path) == first
    compile_c(binary, "int gamma(void) { return 3; }\nint main(void) { return gamma(); }\n", "-Wl,--build-id=none")
    assert "gamma" in names(load_index(binary, tmp_path))


def test_concurrent_loads_from_threads_build_once(
    programs: Programs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = programs.build("cxx")
    expected = build_index(binary)
    calls = []
    lock = threading.Lock()
    real = index_module.build_index

    def counting(path: object) -> FunctionIndex:
        with lock:
            calls.append(path)
        return real(path)  # type: ignore[arg-type]

    monkeypatch.setattr(index_module, "build_index", counting)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: load_index(binary, tmp_path), range(8)))
    assert all(result == expected for result in results)
    assert len(calls) == 1


def test_concurrent_loads_from_processes(programs: Programs, tmp_path: Path) -> None:
    binary = programs.build("c")
    script = (
        "import sys; from pathlib import Path; from strobe.symbols import load_index; "
        "print(len(load_index(sys.argv[1], Path(sys.argv[2])).functions))"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    workers = [
        subprocess.Popen([sys.executable, "-c", script, str(binary), str(tmp_path)], stdout=subprocess.PIPE, env=env)
        for _ in range(3)
    ]
    outputs = [worker.communicate(timeout=60)[0] for worker in workers]
    assert all(worker.returncode == 0 for worker in workers)
    assert {int(out) for out in outputs} == {len(build_index(binary).functions)}


def test_damaged_database_is_rebuilt_not_fatal(programs: Programs, tmp_path: Path) -> None:
    (tmp_path / "symbols.db").write_bytes(b"this is not a database" * 100)
    binary = programs.build("c")
    assert load_index(binary, tmp_path) == build_index(binary)


def test_stale_format_rows_are_ignored(programs: Programs, tmp_path: Path) -> None:
    binary = programs.build("c")
    expected = load_index(binary, tmp_path)
    with sqlite3.connect(tmp_path / "symbols.db") as db:
        db.execute("UPDATE function_indexes SET format = format - 1, payload = x'00'")
    db.close()
    assert load_index(binary, tmp_path) == expected


def test_stripped_copy_with_the_same_build_id_is_not_confused(programs: Programs, tmp_path: Path) -> None:
    binary = programs.build("c")
    stripped = tmp_path / "stripped"
    subprocess.run(["strip", "-o", str(stripped), str(binary)], check=True)
    full, bare = load_index(binary, tmp_path), load_index(stripped, tmp_path)
    assert full.elf.build_id == bare.elf.build_id
    assert "process_command" in names(full) and bare.functions == ()
    assert load_index(binary, tmp_path) == full


def test_unusable_cache_dir_still_returns_the_index(programs: Programs, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    binary = programs.build("c")
    assert load_index(binary, blocker / "cache") == build_index(binary)
