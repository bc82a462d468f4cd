"""Compile the TypeScript agent with frida.Compiler (type-checked) and cache the JS by source hash."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import frida

from strobe.errors import InternalError


def agent_source_dir() -> Path:
    """The agent's project directory: packaged next to the module, or the repository's agent/."""
    packaged = Path(__file__).resolve().parent.parent / "_agent"
    if (packaged / "src" / "index.ts").is_file():
        return packaged
    repo = Path(__file__).resolve().parents[3] / "agent"
    if (repo / "src" / "index.ts").is_file():
        return repo
    raise InternalError(f"The agent sources are missing (looked in {packaged} and {repo}); reinstall strobe.")


def source_hash(root: Path) -> str:
    digest = hashlib.sha256()
    files = [*sorted((root / "src").rglob("*.ts")), root / "tsconfig.json"]
    for path in files:
        digest.update(str(path.relative_to(root)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    digest.update(frida.__version__.encode())
    return digest.hexdigest()[:20]


class AgentCompileError(InternalError):
    pass


def compile_agent(root: Path) -> str:
    """Build src/index.ts with full type checking; a type error raises with the compiler's diagnostics."""
    compiler: Any = frida.Compiler()  # type: ignore[no-untyped-call]
    diagnostics: list[str] = []

    def on_diagnostics(items: list[dict[str, Any]]) -> None:
        for item in items:
            where = item.get("file", {})
            diagnostics.append(
                f"{where.get('path', '?')}:{where.get('line', '?')}:{where.get('character', '?')}: "
                f"{item.get('category', 'error')} TS{item.get('code', '?')}: {item.get('text', '')}"
            )

    compiler.on("diagnostics", on_diagnostics)
    try:
        return str(compiler.build("src/index.ts", project_root=str(root), type_check="full"))
    except frida.InvalidArgumentError as exc:
        raise AgentCompileError("Agent compilation failed:\n" + "\n".join(diagnostics or [str(exc)])) from exc


class AgentCache:
    """The compiled agent, built once per source hash and kept under `cache_dir`."""

    def __init__(self, cache_dir: Path, root: Path | None = None) -> None:
        self._cache_dir = cache_dir
        self._root = root
        self._lock = threading.Lock()
        self._js: tuple[str, str] | None = None

    def get(self) -> str:
        with self._lock:
            root = self._root or agent_source_dir()
            key = source_hash(root)
            if self._js is not None and self._js[0] == key:
                return self._js[1]
            path = self._cache_dir / f"agent-{key}.js"
            if path.is_file():
                js = path.read_text(encoding="utf-8")
            else:
                js = compile_agent(root)
                self._cache_dir.mkdir(parents=True, exist_ok=True)
                tmp = path.with_suffix(f".{os.getpid()}.tmp")
                tmp.write_text(js, encoding="utf-8")
                tmp.replace(path)
            self._js = (key, js)
            return js
