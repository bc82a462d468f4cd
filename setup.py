"""Wheel build hook: every built wheel carries the compiled agent as package data, strobe/_agent/agent.js.

The TypeScript agent in agent/ is compiled by strobe.instrument.agent_build.compile_agent, imported from
this source tree (so frida is a build requirement, see pyproject.toml), and the JS is written into the
build directory only: never into src/, never committed. Editable installs skip it, since they run from
the source tree, whose daemon compiles the agent itself and caches it by source hash.

Everything else about the package is declared in pyproject.toml.
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
AGENT_PROJECT = ROOT / "agent"
PACKAGED_AGENT = Path("strobe", "_agent", "agent.js")  # relative to the build directory


def compile_agent_from_source_tree() -> str:
    if not (AGENT_PROJECT / "src" / "index.ts").is_file():
        raise SystemExit(
            f"strobe build: the agent sources are missing ({AGENT_PROJECT}/src/index.ts); "
            "an sdist must carry agent/ (see MANIFEST.in)"
        )
    source = ROOT / "src"
    sys.path.insert(0, str(source))
    try:
        from strobe.instrument import agent_build
    finally:
        sys.path.remove(str(source))
    imported = Path(agent_build.__file__).resolve()
    if not imported.is_relative_to(source):
        raise SystemExit(f"strobe build: agent_build was imported from {imported}, not from {source}")
    return agent_build.compile_agent(AGENT_PROJECT)


class BuildPyWithAgent(build_py):
    """build_py, then the compiled agent next to the copied modules (regular builds only)."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        target = Path(self.build_lib) / PACKAGED_AGENT
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(compile_agent_from_source_tree(), encoding="utf-8")

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = list(super().get_outputs(include_bytecode))
        if not self.editable_mode:
            outputs.append(str(Path(self.build_lib) / PACKAGED_AGENT))
        return outputs


setup(cmdclass={"build_py": BuildPyWithAgent})
