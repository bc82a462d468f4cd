"""The CModules' C (agent/src/native/tracer.c and fastpath.c) compiles with gcc without a warning, with the TSC
clock and without, exactly as the agent hands it to Frida: the #define prelude of layout.ts in front of the file
with its includes inlined; so does output capture's (agent/src/common/output.c). Frida's own headers are replaced
by stand-ins (agent/src/native/freestanding/glib.h, which the gcc build of fastpath.c uses too, and
tests/instrument/cstubs for gum's) declaring what the files use. The structs are checked against the prelude by the C
itself; a probe program prints the record layout as gcc lays it out, compared with the host's decoder
(records.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from tests.instrument.agent_ts import AGENT_SRC, TRACER_C, layout_facts

from strobe.instrument import records
from strobe.instrument.agent_build import inline_includes

STUBS = Path(__file__).with_name("cstubs")
GLIB = AGENT_SRC / "native" / "freestanding"
FASTPATH_C = TRACER_C.with_name("fastpath.c")
WARNINGS = ["-Wall", "-Wextra", "-Wshadow", "-Wstrict-prototypes", "-Wpointer-arith", "-Wcast-qual", "-Wundef",
            "-Werror"]
RECORD_FIELDS = ["ts", "tid", "func", "kind", "flags", "parent", "a"]


def gcc(source: str, tmp_path: Path, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    compiler = shutil.which("gcc")
    if compiler is None:
        pytest.fail("gcc is needed to check the agent's C: run scripts/bootstrap.sh")
    path = tmp_path / f"{name}.c"
    path.write_text(source)
    return subprocess.run(
        [compiler, "-std=gnu11", "-O2", *WARNINGS, f"-I{GLIB}", f"-I{STUBS}", *extra, str(path)],
        capture_output=True, text=True, timeout=120,
    )


def module_source(clock: str, c_file: Path = TRACER_C) -> str:
    """What cmodule.ts compiles: cPrelude(useTsc) + the C file (agent_build inlines tracer.h, recording.h)."""
    prelude: str = layout_facts()["prelude"][clock]
    return prelude + inline_includes(c_file)


@pytest.mark.parametrize("c_file", [TRACER_C, FASTPATH_C], ids=["tracer.c", "fastpath.c"])
@pytest.mark.parametrize("clock", ["tsc", "plain"])
def test_tracer_c_compiles_without_warnings(clock: str, c_file: Path, tmp_path: Path) -> None:
    source = module_source(clock, c_file)
    assert ("#define USE_TSC 1" in source) == (clock == "tsc")
    done = gcc(source, tmp_path, f"{c_file.stem}_{clock}", "-c", "-o", str(tmp_path / "module.o"))
    assert done.returncode == 0, f"{c_file.name} ({clock} clock) does not compile cleanly:\n{done.stderr}"


def test_output_c_compiles_without_warnings(tmp_path: Path) -> None:
    # output.ts hands output.c to CModule as it is (no prelude); the listeners it exports are what it attaches.
    source = inline_includes(AGENT_SRC / "common" / "output.c")
    done = gcc(source, tmp_path, "output", "-c", "-o", str(tmp_path / "output.o"))
    assert done.returncode == 0, f"output.c does not compile cleanly:\n{done.stderr}"
    symbols = subprocess.run(["nm", "--defined-only", str(tmp_path / "output.o")], capture_output=True, text=True,
                             check=True).stdout.split()
    assert {"write_enter", "write_leave", "writev_leave"} <= set(symbols)


def test_a_warning_fails_the_check(tmp_path: Path) -> None:
    source = module_source("plain").replace("guint32 t = shared.tail;", "guint32 t = shared.tail, unused;")
    done = gcc(source, tmp_path, "warning", "-c", "-o", str(tmp_path / "tracer.o"))
    assert done.returncode != 0 and "unused" in done.stderr and "tracer.c" in done.stderr


def test_a_layout_constant_the_structs_disagree_with_does_not_compile(tmp_path: Path) -> None:
    source = module_source("plain").replace("#define RECORD_PARENT 20u", "#define RECORD_PARENT 24u")
    done = gcc(source, tmp_path, "mismatch", "-fsyntax-only")
    assert done.returncode != 0 and "layout_record" in done.stderr


def test_the_c_needs_the_prelude(tmp_path: Path) -> None:
    done = gcc(inline_includes(TRACER_C), tmp_path, "bare", "-fsyntax-only")
    assert done.returncode != 0 and "cPrelude" in done.stderr


def test_record_layout_as_gcc_lays_it_out_is_what_the_host_decodes(tmp_path: Path) -> None:
    # tracer.h's declarations, and a main() printing "field offset bytes items" for each Record field.
    lines = ['  printf ("size %zu\\n", sizeof (Record));']
    for name in RECORD_FIELDS:
        item = f"((Record *) 0)->{name}" + ("[0]" if name == "a" else "")
        lines.append(
            f'  printf ("{name} %zu %zu %zu\\n", offsetof (Record, {name}), sizeof (((Record *) 0)->{name}), '
            f"sizeof (((Record *) 0)->{name}) / sizeof ({item}));"
        )
    probe = (
        layout_facts()["prelude"]["plain"]
        + "#include <stdio.h>\n#include <glib.h>\n#include <gum/guminterceptor.h>\n"
        + inline_includes(TRACER_C.with_name("tracer.h"))
        + "int main (void)\n{\n" + "\n".join(lines) + "\n  return 0;\n}\n"
    )
    binary = tmp_path / "probe"
    done = gcc(probe, tmp_path, "probe", "-o", str(binary))
    assert done.returncode == 0, done.stderr
    printed = subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout.splitlines()
    layout = {name: [int(v) for v in values] for name, *values in (line.split() for line in printed)}
    assert layout.pop("size") == [records.RECORD_SIZE] == [records.RECORD_DTYPE.itemsize]
    dtype_fields = records.RECORD_DTYPE.fields
    assert dtype_fields is not None and list(dtype_fields) == RECORD_FIELDS
    for name in RECORD_FIELDS:
        dtype, offset = dtype_fields[name][:2]
        count = dtype.shape[0] if dtype.shape else 1
        assert layout[name] == [offset, dtype.itemsize, count], (
            f"Record.{name}: gcc puts it at offset {layout[name][0]} ({layout[name][1]} bytes, {layout[name][2]} "
            f"items); records.RECORD_DTYPE at {offset} ({dtype.itemsize} bytes, {count} items)"
        )
