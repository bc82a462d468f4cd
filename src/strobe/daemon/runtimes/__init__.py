"""The runtime registry: which runtimes Strobe can trace, and what a process runs.

`RUNTIMES` maps a RuntimeKind to its Runtime (daemon/runtimes/base.py): native code, CPython (cpython.py) and
Node and Bun (node.py), each interpreter's runtime tracing the interpreter's native code too. `detect_kind` also
recognises Deno; until a kind has an entry here its processes are traced as native code (their interpreter's own
functions).

To add a runtime: write its host module next to native.py (a Runtime subclass) and its agent folder
(agent/src/<kind>/, registered in agent/src/runtimes.ts), then add one entry to RUNTIMES below. Nothing in
session orchestration changes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from strobe.daemon.runtimes.base import Runtime, RuntimeKind, ValueRenderer
from strobe.daemon.runtimes.cpython import CPythonRuntime
from strobe.daemon.runtimes.native import NativeRuntime
from strobe.daemon.runtimes.node import BunRuntime, NodeRuntime
from strobe.instrument.protocol import ModuleInfo

RUNTIMES: dict[RuntimeKind, Runtime] = {
    RuntimeKind.NATIVE: NativeRuntime(),
    RuntimeKind.CPYTHON: CPythonRuntime(),
    RuntimeKind.NODE: NodeRuntime(),
    RuntimeKind.BUN: BunRuntime(),
}

_PYTHON = re.compile(r"^(python\d*(\.\d+)?[a-z]*|libpython\d.*\.so.*)$")
_NODE = re.compile(r"^(node(js)?|libnode\.so.*)$")
_BUN = re.compile(r"^bun(-profile)?(\.exe)?$")  # npm's bun package names its binary bun.exe
_DENO = re.compile(r"^deno$")

UNTRACED_JAVASCRIPT = frozenset({RuntimeKind.DENO})
"""Kinds that run JavaScript whose functions Strobe cannot trace yet (Node's and Bun's can)."""


def untraced_javascript(kind: RuntimeKind) -> str:
    """What a pattern on a Deno program can and cannot select."""
    return ("Deno runs this program: its JavaScript functions cannot be traced (Node's and Bun's can: run it with "
            "node, through tsx for TypeScript, or with bun). Its output and crashes are captured, and native "
            "functions with debug info can be traced.")


def detect_kind(binary: str, modules: Sequence[ModuleInfo]) -> RuntimeKind:
    """What a process image runs, from its loaded modules' names (the first is the executable the kernel mapped:
    a script named `python` run by bash is bash), or from the binary's name when the modules are not known yet."""
    names = [module.name for module in modules] if modules else [os.path.basename(binary)]
    for pattern, kind in ((_PYTHON, RuntimeKind.CPYTHON), (_NODE, RuntimeKind.NODE), (_BUN, RuntimeKind.BUN),
                          (_DENO, RuntimeKind.DENO)):
        if any(pattern.match(name) for name in names):
            return kind
    return RuntimeKind.NATIVE


def runtime_for(kind: RuntimeKind) -> Runtime:
    """The runtime that traces a process of this kind: its own if registered, otherwise native."""
    return RUNTIMES.get(kind) or RUNTIMES[RuntimeKind.NATIVE]


def values_for(kind: RuntimeKind = RuntimeKind.NATIVE) -> ValueRenderer:
    return runtime_for(kind).values


__all__ = ["RUNTIMES", "UNTRACED_JAVASCRIPT", "Runtime", "RuntimeKind", "ValueRenderer", "detect_kind", "runtime_for",
           "untraced_javascript", "values_for"]
