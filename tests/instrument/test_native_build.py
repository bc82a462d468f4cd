"""The fast path's gcc build (instrument/native_build.py): the #define prelude it computes from layout.ts is the one
the agent gives TinyCC (cPrelude, run by node), and the shared object it builds is freestanding: it imports only
what cmodule.ts hands it, and exports the fast path's entry points. A stray libc call (memcpy from a struct copy,
say) would make the build refuse the object, and the agent would fall back to TinyCC without a word in a test."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from tests.instrument.agent_ts import AGENT_SRC, LAYOUT_TS, layout_facts

from strobe.instrument.agent_build import inline_includes
from strobe.instrument.native_build import (
    ALLOWED_IMPORTS,
    FREESTANDING,
    build_shared_object,
    c_prelude,
    undefined_symbols,
)

NATIVE = AGENT_SRC / "native"
EXPORTS = {"fast_enter", "fast_exit", "fast_config", "shadow_restore", "shadow_rehook"}


@pytest.mark.parametrize("clock", ["tsc", "plain"])
def test_the_prelude_is_layout_ts_cprelude(clock: str) -> None:
    assert c_prelude(LAYOUT_TS, clock == "tsc") == layout_facts()["prelude"][clock]


@pytest.mark.parametrize("clock", ["tsc", "plain"])
def test_the_gcc_build_is_freestanding(clock: str, tmp_path: Path) -> None:
    source = c_prelude(LAYOUT_TS, clock == "tsc") + inline_includes(NATIVE / "fastpath.c")
    built = build_shared_object(source, NATIVE / FREESTANDING)
    assert built is not None, "gcc did not build fastpath.c (see the log)"
    so_file = tmp_path / "fastpath.so"
    so_file.write_bytes(built)
    imports = undefined_symbols(so_file)
    assert imports is not None and imports <= ALLOWED_IMPORTS and "shared" in imports
    exported = subprocess.run(["nm", "-D", "--defined-only", str(so_file)], capture_output=True, text=True,
                              check=True).stdout.split()
    assert set(exported) >= EXPORTS


def test_an_object_needing_another_symbol_is_refused() -> None:
    source = c_prelude(LAYOUT_TS, True) + inline_includes(NATIVE / "fastpath.c") + (
        "\nextern void * memcpy (void * d, const void * s, unsigned long n);\n"
        "void * copy_it (void * d, const void * s) { return memcpy (d, s, 3); }\n"
    )
    assert build_shared_object(source, NATIVE / FREESTANDING) is None
