"""The runtime registry: native and CPython; the other language runtimes are recognised at spawn/exec/attach and
traced as native code until their runtime is registered."""

from __future__ import annotations

import pytest

from strobe.daemon.runtimes import RUNTIMES, RuntimeKind, detect_kind, runtime_for, values_for
from strobe.daemon.runtimes.cpython import interpreter_version
from strobe.instrument.protocol import ModuleInfo


def modules(*names: str) -> list[ModuleInfo]:
    return [ModuleInfo(name=n, path=f"/usr/lib/{n}", base="0x1000", size=1) for n in names]


@pytest.mark.parametrize(("binary", "loaded", "kind"), [
    ("/home/me/app/build/server", ["server", "libc.so.6"], RuntimeKind.NATIVE),
    ("/usr/bin/python3.11", ["python3.11", "libc.so.6"], RuntimeKind.CPYTHON),
    ("/home/me/proj/.venv/bin/python", ["python3.11", "libc.so.6"], RuntimeKind.CPYTHON),  # a venv's symlink
    ("/home/me/.pyenv/versions/3.13.1/bin/python3.13", [], RuntimeKind.CPYTHON),  # before its modules are known
    ("/opt/app/embedder", ["embedder", "libpython3.12.so.1.0"], RuntimeKind.CPYTHON),
    ("/home/me/.pyenv/shims/python", ["bash", "libc.so.6"], RuntimeKind.NATIVE),  # a script named python
    ("/home/me/tool.py", ["python3.12", "libc.so.6"], RuntimeKind.CPYTHON),  # a #! script: its interpreter runs
    ("/usr/bin/node", ["node", "libc.so.6"], RuntimeKind.NODE),
    ("/opt/app/electron-like", ["electron-like", "libnode.so.115"], RuntimeKind.NODE),
    ("/home/me/node_modules/@oven/bun-linux-x64/bin/bun", [], RuntimeKind.BUN),
    ("/usr/bin/pythonic-tool", [], RuntimeKind.NATIVE),
])
def test_detect_kind(binary: str, loaded: list[str], kind: RuntimeKind) -> None:
    assert detect_kind(binary, modules(*loaded)) is kind


def test_registered_runtimes_and_native_for_the_others() -> None:
    assert list(RUNTIMES) == [RuntimeKind.NATIVE, RuntimeKind.CPYTHON]
    assert runtime_for(RuntimeKind.CPYTHON) is RUNTIMES[RuntimeKind.CPYTHON]
    for kind in (RuntimeKind.NATIVE, RuntimeKind.NODE, RuntimeKind.BUN):
        assert runtime_for(kind) is RUNTIMES[RuntimeKind.NATIVE]


@pytest.mark.parametrize(("binary", "loaded", "version"), [
    ("/usr/bin/python3.11", [], (3, 11)),
    ("/home/me/.pyenv/versions/3.13.1/bin/python3.13", [], (3, 13)),
    ("/opt/app/embedder", ["libc.so.6", "libpython3.12.so.1.0"], (3, 12)),
    ("/home/me/proj/.venv/bin/python", ["libc.so.6"], None),
])
def test_interpreter_version(binary: str, loaded: list[str], version: tuple[int, int] | None) -> None:
    assert interpreter_version(binary, modules(*loaded)) == version


def test_python_values_render_what_the_tracer_rendered() -> None:
    values = values_for(RuntimeKind.CPYTHON)
    args = '[["self",{"__type__":"shop.Cart","owner":"ann"}],["n",3]]'
    assert values.arguments(args) == [{"__type__": "shop.Cart", "owner": "ann"}, 3]
    assert values.argument_names(args) == ["self", "n"]
    assert values.return_value("[1,2]") == [1, 2] and values.return_type("[1,2]") == "list"
    assert values.return_type('{"__type__":"shop.Cart"}') == "shop.Cart"
    assert [values.return_type(v) for v in ("null", "true", "3", "2.5", '"s"', '{"a":1}')] == [
        "None", "bool", "int", "float", "str", "dict"]
    assert values_for().argument_names(b"\0" * 8) is None  # native arguments carry no names


def test_native_values_render_raw_registers() -> None:
    values = values_for()
    assert values.arguments((7).to_bytes(8, "little") + (1 << 40).to_bytes(8, "little")) == [7, hex(1 << 40)]
    assert values.return_type(1 << 40) == "pointer" and values.return_type(None) == "null"
    assert values.return_value('{"a": 1}') == {"a": 1}
