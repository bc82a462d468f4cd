"""Every test framework adapter, found by scanning this package: a module that defines a TestAdapter
subclass is registered by existing (no list to edit)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from functools import cache
from pathlib import Path

from strobe.errors import ValidationError
from strobe.testing.adapters.base import TestAdapter


@cache
def all_adapters() -> tuple[TestAdapter, ...]:
    found: list[TestAdapter] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name == "base" or info.name.startswith("_"):  # helpers (e.g. a runner script), not adapters
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, TestAdapter) and not inspect.isabstract(cls) and cls.__module__ == module.__name__:
                found.append(cls())
    return tuple(found)


def by_name(name: str) -> TestAdapter:
    for adapter in all_adapters():
        if adapter.name == name.lower():
            return adapter
    known = ", ".join(sorted(a.name for a in all_adapters()))
    raise ValidationError(f"Unknown test framework '{name}'. Use one of: {known}; or omit `framework` to detect it.")


def detect(project_root: Path, command: str | None) -> tuple[TestAdapter, int]:
    """The most confident adapter for a project (the generic one, at least)."""
    scored = [(adapter.detect(project_root, command), adapter) for adapter in all_adapters()]
    score, adapter = max(scored, key=lambda pair: pair[0])
    return adapter, score
