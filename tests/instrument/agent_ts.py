"""What the agent's TypeScript says, read by the TypeScript compiler (agent_ts.cjs under node), for the tests
that hold the agent, its C and the host to one contract.

    protocol_facts()["interfaces"]["HooksRequest"]["action"] == {"optional": False, "type": {...}}
    layout_facts()["constants"]["RECORD_SIZE"] == 72
    layout_facts()["prelude"]["tsc"]   # the #define lines the agent puts in front of tracer.c

The typescript package is pinned in tests/toolchains/package.json (scripts/bootstrap.sh installs it). Without
it these tests fail rather than skip: a contract nobody checks is no contract.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
AGENT_SRC = REPO / "agent" / "src"
# The agent's side of the wire protocol: its messages (and PROTOCOL_VERSION), then the host's requests.
PROTOCOL_TS = (AGENT_SRC / "common" / "protocol.ts", AGENT_SRC / "common" / "requests.ts")
LAYOUT_TS = AGENT_SRC / "native" / "layout.ts"
TRACER_C = AGENT_SRC / "native" / "tracer.c"
SCRIPT = Path(__file__).with_name("agent_ts.cjs")
TYPESCRIPT = REPO / "tests" / "toolchains" / "node_modules" / "typescript"


def run_node(command: str, *files: Path) -> Any:
    node = shutil.which("node")
    if node is None or not (TYPESCRIPT / "package.json").is_file():
        pytest.fail(f"node and {TYPESCRIPT} are needed to read the agent's TypeScript: run scripts/bootstrap.sh")
    done = subprocess.run([node, str(SCRIPT), command, *map(str, files)], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        pytest.fail(f"agent_ts.cjs {command} {' '.join(f.name for f in files)} failed:\n{done.stderr}")
    return json.loads(done.stdout)


@functools.cache
def protocol_facts() -> dict[str, Any]:
    facts: dict[str, Any] = run_node("protocol", *PROTOCOL_TS)
    return facts


@functools.cache
def layout_facts() -> dict[str, Any]:
    facts: dict[str, Any] = run_node("layout", LAYOUT_TS)
    return facts
