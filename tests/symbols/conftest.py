"""Test programs for the symbol index, compiled once per session into a private temp dir.

C sources are copied next to their binary and compiled with relative paths (so decl files must be joined
with DW_AT_comp_dir); C++ and Rust sources are compiled from their absolute paths in programs/.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PROGRAMS = Path(__file__).parent / "programs"
C_SOURCES = ("cprog_main.c", "cprog_util.c", "cprog_util.h")
CXX_SOURCES = ("cxxprog.cpp", "cxxprog_b.cpp")

# variant -> (toolchain, flags)
VARIANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "c": ("c", ("-g", "-O0")),
    "c-dwarf4": ("c", ("-gdwarf-4", "-O0")),
    "c-gz": ("c", ("-g", "-O0", "-gz")),  # SHF_COMPRESSED sections
    "c-gz-gnu": ("c", ("-g", "-O0", "-gz=zlib-gnu")),  # legacy .zdebug_* sections
    "c-O2": ("c", ("-g", "-O2")),
    "c-O2-dwarf4": ("c", ("-gdwarf-4", "-O2")),
    "c-nopie": ("c", ("-g", "-O0", "-no-pie")),
    "c-nodebug": ("c", ("-O0",)),
    "c-stripped": ("c", ("-O0", "-s")),
    "c-no-build-id": ("c", ("-g", "-O0", "-Wl,--build-id=none")),
    "cxx": ("cxx", ("-g", "-O0")),
    "cxx-dwarf4": ("cxx", ("-gdwarf-4", "-O0")),
    "cxx-gz": ("cxx", ("-g", "-O0", "-gz")),
    "cxx-O2": ("cxx", ("-g", "-O2")),
    "rust-legacy": ("rust", ("-g", "-C", "opt-level=0")),
    "rust-v0": ("rust", ("-g", "-C", "opt-level=0", "-C", "symbol-mangling-version=v0")),
}


def line_of(source: str, marker: str) -> int:
    """1-based line of `LINE <marker>` in programs/<source>."""
    pattern = re.compile(rf"LINE {re.escape(marker)}(?:\s|\*/|$)")
    for number, text in enumerate((PROGRAMS / source).read_text().splitlines(), start=1):
        if pattern.search(text):
            return number
    raise AssertionError(f"no 'LINE {marker}' marker in {source}")


@dataclass
class Programs:
    root: Path
    built: dict[str, Path] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def c_dir(self) -> Path:
        return self.root / "c-src"

    def build(self, variant: str) -> Path:
        with self.lock:
            if variant not in self.built:
                self.built[variant] = self._compile(variant)
            return self.built[variant]

    def _compile(self, variant: str) -> Path:
        toolchain, flags = VARIANTS[variant]
        out = self.root / variant
        if toolchain == "c":
            self.c_dir.mkdir(exist_ok=True)
            for name in C_SOURCES:
                shutil.copy(PROGRAMS / name, self.c_dir / name)
            cmd = ["gcc", *flags, "-Wl,--build-id", "-o", str(out), "cprog_main.c", "cprog_util.c"]
            if "--build-id=none" in " ".join(flags):
                cmd.remove("-Wl,--build-id")
            _run(cmd, cwd=self.c_dir)
        elif toolchain == "cxx":
            _run(["g++", *flags, "-Wl,--build-id", "-o", str(out), *(str(PROGRAMS / s) for s in CXX_SOURCES)])
        else:
            if shutil.which("rustc") is None:
                pytest.skip("rustc is not installed")
            _run(["rustc", *flags, "-o", str(out), str(PROGRAMS / "rsprog.rs")], cwd=self.root)
        return out


def _run(cmd: list[str], cwd: Path | None = None) -> None:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{done.stderr}")


@pytest.fixture(scope="session")
def programs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Programs]:
    yield Programs(tmp_path_factory.mktemp("symbol-programs"))
