"""daemon/go_abi.py: which functions are Go code (never hooked) in a real Go build of tests/targets/go_values and a
cgo build of tests/targets/go_lines, against C next to them; the static-build refusal (instrument/launcher.py) and
Go globals by package path (daemon/reads.py, go_global) on the same binaries."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from strobe.daemon.go_abi import GO_HOOK_REFUSAL, go_functions, go_text, is_go_function, is_go_module, is_go_name
from strobe.daemon.reads import go_global
from strobe.daemon.symbols import TraceableFunction
from strobe.instrument.launcher import static_executable_refusal
from strobe.symbols.index import load_index


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory, go_target: Callable[..., Path]) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("go")
    c_source = directory / "plain.c"
    c_source.write_text("int twice(int x) { return 2 * x; }\nint main(void) { return twice(0); }\n")
    subprocess.run(["gcc", "-g", "-O0", "-o", str(directory / "plain"), str(c_source)], check=True)
    return {
        "dynamic": go_target("go_values"),
        "static": go_target("go_values", static=True),
        "cgo": go_target("go_lines"),
        "c": directory / "plain",
    }


def _functions(binary: Path) -> dict[str, TraceableFunction]:
    index = load_index(str(binary), binary.parent / "cache")
    return {f.name: TraceableFunction(f, str(binary), f.address) for f in index.functions if not f.inlined_only}


def test_names() -> None:
    for go in ("main.add", "sync.(*WaitGroup).Add", "github.com/x/y.F", "runtime.memmove", "type:.eq.main.T"):
        assert is_go_name(go), go
    for c in ("one", "x_cgo_init", "helper.part.0", "big.cold", "f.isra.0.constprop.1", "_start"):
        assert not is_go_name(c), c


def test_go_code_against_cgo_c(builds: dict[str, Path]) -> None:
    functions = _functions(builds["cgo"])
    go = ["main.main", "runtime.mallocgc", "sync.(*Mutex).Lock", "gogo", "cmpbody", "debugCall32", "crosscall2"]
    c = ["x_cgo_init", "x_cgo_thread_start", "threadentry", "_start"]
    assert all(is_go_function(functions[name]) for name in go if name in functions)
    assert {"main.main", "gogo", "debugCall32"} <= set(functions)
    assert not any(is_go_function(functions[name]) for name in c)
    keyed = [(name, functions[name]) for name in go + c if name in functions]
    assert set(go_functions(keyed)) == {name for name in go if name in functions}
    assert set(go_functions(keyed).values()) == {GO_HOOK_REFUSAL}


def test_modules(builds: dict[str, Path]) -> None:
    for kind in ("dynamic", "static", "cgo"):
        text = go_text(str(builds[kind]))
        assert text is not None and text[0] < text[1], kind
    assert not is_go_module(str(builds["c"])) and not is_go_module("/nonexistent")
    assert not any(is_go_function(f) for f in _functions(builds["c"]).values())


def test_static_executables_are_refused_with_what_to_do(builds: dict[str, Path]) -> None:
    refusal = static_executable_refusal(str(builds["static"]))
    assert refusal is not None and "statically linked" in refusal and "-linkmode=external" in refusal
    assert static_executable_refusal(str(builds["dynamic"])) is None
    assert static_executable_refusal(str(builds["c"])) is None
    assert static_executable_refusal(__file__) is None  # not ELF: Frida's own error applies


def test_globals_by_package_path(builds: dict[str, Path]) -> None:
    modules = [(str(builds["dynamic"]), 0)]
    counter = go_global(modules, "main.counter", 1)
    assert counter is not None and counter.error is None and counter.type_name == "int64" and counter.size == 8
    length = go_global(modules, "main.label.len", 1)
    assert length is not None and length.error is None and length.type_name == "int"
    slashed = go_global(modules, "internal/runtime/cgroup.errEOF", 1)
    assert slashed is not None and slashed.error is None and slashed.type_name == "error"
    missing = go_global(modules, "main.nope", 1)
    assert missing is not None and missing.error is not None and "main.counter" in missing.error
    assert go_global([(str(builds["c"]), 0)], "g.x", 1) is None  # not Go: the C error stands
    assert go_global(modules, "counter", 1) is None  # no package path
