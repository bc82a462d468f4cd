"""The agent is compiled with full type checking and cached by source hash."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from strobe.instrument.agent_build import AgentCache, AgentCompileError, agent_source_dir, compile_agent, source_hash


def copy_agent(tmp_path: Path) -> Path:
    root = tmp_path / "agent"
    shutil.copytree(agent_source_dir(), root, ignore=shutil.ignore_patterns("node_modules", "dist"))
    return root


def test_agent_compiles_with_type_checking() -> None:
    js = compile_agent(agent_source_dir())
    assert "agent_loaded" in js and "process_exit" in js


def test_a_type_error_fails_the_build_with_its_location(tmp_path: Path) -> None:
    root = copy_agent(tmp_path)
    index = root / "src" / "index.ts"
    index.write_text(index.read_text() + "\nconst wrong: number = 'text';\nexport { wrong };\n")
    with pytest.raises(AgentCompileError) as error:
        compile_agent(root)
    assert "src/index.ts" in error.value.message and "TS2322" in error.value.message


def test_cache_is_keyed_by_source_hash(tmp_path: Path) -> None:
    root = copy_agent(tmp_path)
    cache_dir = tmp_path / "cache"
    cache = AgentCache(cache_dir, root)
    first = cache.get()
    key = source_hash(root)
    cached = cache_dir / f"agent-{key}.js"
    assert cached.read_text() == first
    # A fresh cache object reuses the file instead of compiling again.
    cached.write_text(first + "\n// from cache\n")
    assert AgentCache(cache_dir, root).get().endswith("// from cache\n")
    # Editing the source changes the key and rebuilds.
    (root / "src" / "index.ts").write_text((root / "src" / "index.ts").read_text() + "\n// edited\n")
    assert source_hash(root) != key
    rebuilt = cache.get()
    assert not rebuilt.endswith("// from cache\n")
    assert len(list(cache_dir.glob("agent-*.js"))) == 2
