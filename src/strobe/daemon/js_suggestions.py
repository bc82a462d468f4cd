"""Which of a JavaScript test failure's suggested trace patterns select a function of the project.

The adapters guess from the failure's stack and the test's failing line (testing/adapters/_node.suggest): the
functions it names, what the line calls, their files. A guess can select nothing (a test file made only of
anonymous callbacks, a method of the assertion library called on the failing line); given back as tracePatterns
it would trace nothing. Here each guess is read as a JavaScript pattern and kept only if it selects something
in the project's index (or in an installed package it names), the same index a traced run hooks from.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from strobe.daemon.runtimes.node import JsScripts
from strobe.daemon.tracing import parse_for
from strobe.errors import InvalidPattern
from strobe.symbols.js_project import index_project

log = logging.getLogger(__name__)


def keep_selecting(failures: Iterable[dict[str, Any]], project_root: Path) -> None:
    """Drop from each failure's `suggestedTraces` the patterns that select no function of the project (in place).
    Indexes the project once: call it off the event loop."""
    failures = [f for f in failures if f.get("suggestedTraces")]
    if not failures:
        return
    scripts = JsScripts(index_project(project_root), project_root)
    selects: dict[str, bool] = {}
    for failure in failures:
        kept = []
        for text in failure["suggestedTraces"]:
            if text not in selects:
                selects[text] = _selects(scripts, text, project_root)
            if selects[text]:
                kept.append(text)
        failure["suggestedTraces"] = kept
    dropped = sorted(text for text, ok in selects.items() if not ok)
    if dropped:
        log.info("suggested traces selecting nothing in %s, not suggested: %s", project_root, ", ".join(dropped))


def _selects(scripts: JsScripts, text: str, project_root: Path) -> bool:
    try:
        pattern = parse_for(text, "javascript", str(project_root))
    except InvalidPattern:
        return False
    return bool(scripts.positions(pattern))
