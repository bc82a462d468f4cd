"""The runtime registry: native is its one entry; the language runtimes are recognised at spawn/exec/attach and
traced as native code until their runtime is registered."""

from __future__ import annotations

import pytest

from strobe.daemon.runtimes import RUNTIMES, RuntimeKind, detect_kind, runtime_for, values_for
from strobe.instrument.protocol import ModuleInfo


def modules(*names: str) -> list[ModuleInfo]:
    return [ModuleInfo(name=n, path=f"/usr/lib/{n}", base="0x1000", size=1) for n in names]


@pytest.mark.parametrize(("binary", "loaded", "kind"), [
    ("/home/me/app/build/server", ["libc.so.6"], RuntimeKind.NATIVE),
    ("/usr/bin/python3.11", ["libc.so.6"], RuntimeKind.CPYTHON),
    ("/home/me/.pyenv/versions/3.13.1/bin/python3.13", [], RuntimeKind.CPYTHON),
    ("/opt/app/embedder", ["libpython3.12.so.1.0"], RuntimeKind.CPYTHON),
    ("/usr/bin/node", ["libc.so.6"], RuntimeKind.NODE),
    ("/opt/app/electron-like", ["libnode.so.115"], RuntimeKind.NODE),
    ("/home/me/node_modules/@oven/bun-linux-x64/bin/bun", [], RuntimeKind.BUN),
    ("/usr/bin/pythonic-tool", [], RuntimeKind.NATIVE),
])
def test_detect_kind(binary: str, loaded: list[str], kind: RuntimeKind) -> None:
    assert detect_kind(binary, modules(*loaded)) is kind


def test_native_is_the_one_entry_and_traces_what_has_no_runtime_yet() -> None:
    assert list(RUNTIMES) == [RuntimeKind.NATIVE]
    for kind in RuntimeKind:
        assert runtime_for(kind) is RUNTIMES[RuntimeKind.NATIVE]


def test_native_values_render_raw_registers() -> None:
    values = values_for()
    assert values.arguments((7).to_bytes(8, "little") + (1 << 40).to_bytes(8, "little")) == [7, hex(1 << 40)]
    assert values.return_type(1 << 40) == "pointer" and values.return_type(None) == "null"
    assert values.return_value('{"a": 1}') == {"a": 1}
