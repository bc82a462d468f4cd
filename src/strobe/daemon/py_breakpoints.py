"""Breakpoints and logpoints in Python code: where they go (a function's code object, or a source line of a .py
file), what the tracer inside the interpreter is told (instrument/pytracer/breaks.py does the stopping, the
conditions and the stepping), and how its pause reports become pause events.

    sites = python_line_sites(scripts, "app/orders.py", 42)     # ValidationError: no such file, no code there
    specs = python_specs(bp)                                     # the tracer's `breakpoints` command entries
    event = python_pause_event(report)                           # a pause event's fields, from the tracer's report
    await record_python_pause(services, live, pid, report)       # stored, and the thread listed as paused

In Python a condition and a message's {expressions} are Python, evaluated in the frame that hits it (its locals
and globals). A thread stops alone, waiting in the interpreter with its GIL released; `resume` commands continue
or step it (over, into, out: at the next line start of the frame, of any frame, of the caller).
"""

from __future__ import annotations

import ast
import logging
import os
import time
from collections.abc import Iterable
from types import CodeType
from typing import Any

from strobe.daemon.breakpoint_state import Breakpoint, PausedThread, Site
from strobe.daemon.crashes import crash_row
from strobe.daemon.live import LiveSession
from strobe.daemon.process import TracedProcess
from strobe.daemon.runtimes.cpython import CPYTHON, CPythonRuntime, PythonScripts
from strobe.daemon.services import Services
from strobe.daemon.symbols import SessionSymbols, TraceableFunction
from strobe.errors import ValidationError
from strobe.store.schema import EventKind

log = logging.getLogger(__name__)

MAX_FRAMES_SHOWN = 16


def python_scripts(symbols: SessionSymbols) -> PythonScripts | None:
    """The session's Python functions (None when it runs no Python indexed from a project)."""
    return next((s for s in symbols.sources if isinstance(s, PythonScripts)), None)


def is_python_file(file: str) -> bool:
    return file.endswith((".py", ".pyw"))


def python_entry_sites(functions: Iterable[TraceableFunction]) -> list[Site]:
    """A function breakpoint's Python functions: each at its code object's start (file, first line, qualname)."""
    return [Site("entry", f.runtime_address, f.name, f.module, f.info.line, f, runtime=CPYTHON) for f in functions
            if f.runtime == CPYTHON]


def python_line_sites(scripts: PythonScripts | None, file: str, line: int, project_root: str | None) -> list[Site]:
    """The site of `file`:`line` in Python code: the file (absolute, or a path suffix of one of the project's
    indexed files) and a line that starts code. ValidationError saying why not, with the next lines with code."""
    path = _python_file(scripts, file, project_root)
    try:
        source = open(path, "rb").read()  # noqa: SIM115 - read once, closed by the GC at once
        code = compile(source, path, "exec", dont_inherit=True)
    except (OSError, SyntaxError, ValueError) as exc:
        raise ValidationError(f"{path} cannot be read as Python ({type(exc).__name__}: {exc}): no breakpoint can "
                              "be set in it.") from None
    lines = _code_lines(code)
    if line not in lines:
        later = sorted(n for n in lines if n > line)[:3]
        after = f" The next lines with code: {', '.join(map(str, later))}." if later else ""
        raise ValidationError(f"Line {line} of {path} has no code (a comment, a blank line, a docstring's inside, "
                              f"a line an expression continues).{after}")
    return [Site("line", line, _function_at(source, line), path, line, runtime=CPYTHON)]


def _python_file(scripts: PythonScripts | None, file: str, project_root: str | None) -> str:
    if os.path.isabs(file):
        if not os.path.isfile(file):
            raise ValidationError(f"No file {file}: give the path of a Python source file of the program.")
        return os.path.realpath(file)
    known = set(scripts.index.file_names()) if scripts is not None else set()
    if project_root is not None and os.path.isfile(os.path.join(project_root, file)):
        return os.path.realpath(os.path.join(project_root, file))
    suffix = "/" + file.lstrip("./")
    found = sorted(f for f in known if f.endswith(suffix) or f == file)
    if not found:
        raise ValidationError(f"No Python file named '{file}' among the project's {len(known)} indexed files "
                              f"(under {project_root or 'the project root'}): give it as a path from the project "
                              "root ('app/orders.py') or absolute.")
    if len(found) > 1:
        raise ValidationError(f"'{file}' names {len(found)} files: {', '.join(found[:5])}. Give more of its path.")
    return found[0]


def _code_lines(code: CodeType) -> set[int]:
    """The lines a code object and those nested in it start instructions at (where a line event can happen)."""
    lines: set[int] = set()
    stack = [code]
    while stack:
        current = stack.pop()
        lines.update(line for _, _, line in current.co_lines() if line is not None)
        stack.extend(c for c in current.co_consts if isinstance(c, CodeType))
    return lines


def _function_at(source: bytes, line: int) -> str | None:
    """The qualified name of the innermost function holding `line`, for the answer."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    best: str | None = None

    def visit(node: ast.AST, prefix: str) -> None:
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                end = child.end_lineno or child.lineno
                if child.lineno <= line <= end:
                    if not isinstance(child, ast.ClassDef):
                        best = name
                    visit(child, name + ("." if isinstance(child, ast.ClassDef) else ".<locals>."))
                    return

    visit(tree, "")
    return best or "<module>"


def python_specs(bp: Breakpoint) -> list[dict[str, Any]]:
    """The tracer's entries for `bp`'s sites (instrument/pytracer/breaks.py)."""
    specs: list[dict[str, Any]] = []
    for n, site in enumerate(bp.sites):
        spec: dict[str, Any] = {"id": f"{bp.id}#{n}", "kind": site.kind, "file": site.file, "line": site.address}
        if site.kind == "entry" and site.traceable is not None:
            spec["qualname"] = site.traceable.info.raw
        if bp.condition is not None:
            spec["condition"] = bp.condition
        if bp.hit_count is not None:
            spec["hitCount"] = bp.hit_count
        if bp.log is not None:
            spec["log"] = bp.log
        specs.append(spec)
    return specs


def python_pause_event(report: dict[str, Any]) -> dict[str, Any]:
    """A pause event's fields from the tracer's report: where, the innermost frame's locals (its arguments too at a
    function's start) and each frame of the Python stack with its own locals."""
    frames = [f for f in report.get("frames", []) if isinstance(f, dict)][:MAX_FRAMES_SHOWN]
    event: dict[str, Any] = {"threadId": report.get("tid"), "runtime": "python"}
    if report.get("thread"):
        event["threadName"] = report["thread"]
    event.update(function=report.get("function"), sourceFile=report.get("file"), line=report.get("line"))
    innermost = frames[0].get("locals", {}) if frames else {}
    event["arguments" if report.get("entry") else "locals"] = innermost
    event["backtrace"] = [{"function": f.get("function"), "file": f.get("file"), "line": f.get("line"),
                           "locals": f.get("locals", {})} for f in frames]
    if report.get("conditionError"):
        event["conditionError"] = report["conditionError"]
    return event


async def record_python_pause(services: Services, live: LiveSession, pid: int, report: dict[str, Any]) -> None:
    """A thread stopped in Python code by the interpreter's tracer: store its pause event, list it as paused."""
    tid = int(report.get("tid") or 0)
    bid = str(report.get("breakpoint") or "").split("#", 1)[0]
    try:
        await services.ingest.barrier()
        await services.write(lambda c: None)  # the calls leading up to the stop are committed before it
        event = python_pause_event(report)
        step = report.get("step")
        if bid:
            event.update(breakpointId=bid, hit=report.get("hit"))
        if step:
            event["step"] = step
        where = f"{event.get('function') or '?'} at {event.get('sourceFile')}:{event.get('line')}"
        why = f"stepped {step} to" if step else (f"paused at breakpoint {bid} in" if bid else "paused in")
        event["text"] = f"{why} {where}, thread {tid}"
        ts = int(report.get("ts") or 0) - live.start_ns
        services.writer.submit_rows([crash_row(live.record.key, pid, tid, ts, event, EventKind.PAUSE)])
        paused = PausedThread(pid, tid, bid, time.monotonic(), event, 0, bool(report.get("entry")), [],
                              python=True)
        live.breakpoints.paused[(pid, tid)] = paused
        waiter = live.breakpoints.waiters.pop((pid, tid), None)
        if waiter is not None and not waiter.done():
            waiter.set_result(paused)
        log.info("session %s: pid %d: %s", live.record.id, pid, event["text"])
    except Exception:
        log.exception("session %s: a Python pause could not be recorded; resuming thread %d", live.record.id,
                      tid)
        process = live.processes.get(pid)
        if process is not None:
            await resume_python(services, live, process, tid, "continue")


async def resume_python(services: Services, live: LiveSession, process: TracedProcess, tid: int, action: str) -> None:
    """Let a thread paused in Python code go on (`continue`) or step; logged when it cannot be."""
    runtime = live.image.runtime
    handle = process.handle
    if not isinstance(runtime, CPythonRuntime):
        return
    try:
        await runtime.resume_python(services.worker.run, handle, tid, action)
    except (ValueError, TimeoutError) as exc:
        log.info("pid %d: Python thread %d could not be resumed: %s", process.pid, tid, exc)
