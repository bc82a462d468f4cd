"""debug_read on a live session: resolving variables against its debug info, one-shot reads and polls sampled
into the timeline (of the launched process).

Go names its globals by package path (`main.counter`, `runtime.ncpu`, `github.com/x/y.Var`): an expression that does
not resolve as C's `root.field` is tried as such a name followed by steps (`main.config.limits[2]`, longest name
first), in `go_global`."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from typing import Any

from strobe.daemon.breakpoint_state import PausedThread
from strobe.daemon.frame_reads import (
    PausedStack,
    VariableRef,
    choose_paused,
    frame_error,
    local_hint,
    local_target,
    read_paused_stack,
    shadowing_local,
)
from strobe.daemon.go_abi import is_go_module
from strobe.daemon.live import LiveSession
from strobe.daemon.memory import (
    READ_TIMEOUT_S,
    PreparedRead,
    pair_results,
    prepare_recipe,
    prepare_variable,
    result_of,
)
from strobe.daemon.python_reads import evaluate, is_python_chain, prepare_python, python_frame_target, run_poll
from strobe.daemon.registry import LiveSessions
from strobe.daemon.runtimes import RuntimeKind
from strobe.daemon.services import Services
from strobe.errors import FridaAttachFailed, ProcessExited, StrobeError, ValidationError
from strobe.instrument.handle import AgentTimeout, ProcessGone
from strobe.instrument.protocol import ReadResult
from strobe.symbols.expressions import resolve_at
from strobe.symbols.variables import variable_index


class SessionReads:
    def __init__(self, services: Services, sessions: LiveSessions) -> None:
        self._services, self._sessions = services, sessions

    async def resolve_variables(self, session_id: str, expressions: list[str], depth: int) -> dict[str, PreparedRead]:
        """Resolve variable expressions against the session's debug info (per-target errors, never raised)."""
        live = await self._sessions.require_live(session_id, "reading memory")
        python: dict[str, PreparedRead] = {}
        if live.image.kind is RuntimeKind.CPYTHON:  # dotted names are Python's; others a C extension's
            python = {e: prepare_python(e) for e in expressions if is_python_chain(e)}
            expressions = [e for e in expressions if e not in python]
            if not expressions:
                return python
        symbols = await live.image.symbols
        main = os.path.realpath(symbols.main_binary)
        modules = sorted(((m.path, m.slide) for m in symbols.indexes), key=lambda m: os.path.realpath(m[0]) != main)
        if not any(os.path.realpath(path) == main for path, _ in modules):
            modules.insert(0, (symbols.main_binary, 0))  # reports why it has no variables

        def resolve() -> dict[str, PreparedRead]:
            found = {e: prepare_variable(modules, e, depth) for e in dict.fromkeys(expressions)}
            return {e: go_global(modules, e, depth) or read if read.error else read for e, read in found.items()}

        native = await asyncio.to_thread(resolve)
        if live.image.kind is RuntimeKind.CPYTHON:
            native = {e: _python_hint(read) for e, read in native.items()}
        return native | python

    async def resolve_targets(self, session_id: str, refs: list[VariableRef], depth: int
                              ) -> dict[VariableRef, PreparedRead]:
        """Resolve debug_read's and debug_write's variables: globals, and the locals of paused threads' frames
        (daemon/frame_reads.py). Per-target errors, never raised."""
        live = await self._sessions.require_live(session_id, "reading memory")
        everyone = paused_threads(live)
        paused = [p for p in everyone if not p.python]  # threads stopped in Python code show their locals in events
        bare = [ref.expression for ref in refs if not ref.pinned]
        found = await self.resolve_variables(session_id, bare, depth) if bare else {}
        stacks: dict[tuple[int, int], PausedStack] = {}

        async def stack_of(thread: PausedThread) -> PausedStack:
            key = (thread.pid, thread.tid)
            if key not in stacks:
                stacks[key] = await read_paused_stack(self._services.worker.run, live, thread)
            return stacks[key]

        out: dict[VariableRef, PreparedRead] = {}
        for ref in dict.fromkeys(refs):
            in_python = python_frame_target(everyone, ref, session_id)
            if in_python is not None:
                out[ref] = in_python
                continue
            if ref.pinned:
                chosen = choose_paused(paused, ref.thread, session_id)
                if isinstance(chosen, str):
                    out[ref] = PreparedRead(ref.expression, "?", 0, error=chosen)
                else:
                    stack = await stack_of(chosen)
                    out[ref] = await asyncio.to_thread(local_target, stack, ref.frame or 0, ref.expression, depth)
                continue
            if len(paused) == 1:  # the innermost frame's names hide the globals', as in the source
                stack = await stack_of(paused[0])
                local = await asyncio.to_thread(shadowing_local, stack, ref.expression, depth)
                if local is not None:
                    out[ref] = local
                    continue
            target = found[ref.expression]
            if target.error is not None and target.python is None and paused:
                known = [await stack_of(thread) for thread in paused]
                hint = await asyncio.to_thread(local_hint, known, ref.expression)
                if hint is not None:
                    target = dataclasses.replace(target, error=f"{target.error} {hint}")
            out[ref] = target
        return out

    async def read_memory(self, session_id: str, targets: list[PreparedRead]) -> list[dict[str, Any]]:
        """Read every target once (5 s at most); per-target errors never fail the others."""
        live = await self._sessions.require_live(session_id, "reading memory")
        handle = live.root.handle
        targets = still_paused(live, targets)  # checked as the read is queued: it runs before any resume
        recipes = [t.recipe for t in targets if t.recipe is not None]
        answers: list[ReadResult] = []
        data = b""
        if recipes:
            try:
                reply, data = await self._services.worker.run(lambda: handle.read_memory(recipes, READ_TIMEOUT_S))
            except AgentTimeout as exc:
                raise FridaAttachFailed(
                    f"Memory read timed out ({READ_TIMEOUT_S:.0f}s): {exc.message} Retry, or read fewer targets."
                ) from exc
            except ProcessGone as exc:
                raise ProcessExited(
                    f"Process exited — session '{session_id}' is still queryable but reads are unavailable ({exc})."
                ) from exc
            answers = reply.results
        python = [t for t in targets if t.python is not None]
        try:
            evaluated = await evaluate(self._services.worker.run, handle, python) if python else {}
        except ProcessGone as exc:
            raise ProcessExited(
                f"Process exited — session '{session_id}' is still queryable but reads are unavailable ({exc})."
            ) from exc
        return [evaluated[t.label] if t.python is not None
                else result_of(t, r, data, bytes_dir=self._services.paths.reads_dir, session_id=session_id)
                for t, r in pair_results(targets, answers)]

    async def start_poll(
        self, session_id: str, targets: list[PreparedRead], interval_ms: int, duration_ms: int, max_polls: int
    ) -> tuple[int, int]:
        """Start sampling the targets into the timeline; returns (poll id, expected samples) at once."""
        live = await self._sessions.require_live(session_id, "reading memory")
        handle = live.root.handle
        if live.polls.running() >= max_polls:
            raise ValidationError(
                f"Session '{session_id}' already runs {max_polls} polls, the most at once; wait for one to end "
                "(debug_query shows their state under 'polls')."
            )
        if any(t.frame is not None for t in targets):
            raise ValidationError(
                "A paused frame's locals are read once, not polled: the frame goes away when its thread goes on. "
                "Read them without `poll`, or poll globals."
            )
        python = [t for t in targets if t.python is not None]
        if python:
            if len(python) != len([t for t in targets if t.error is None]):
                raise ValidationError(
                    "A poll reads either Python values or native memory, not both: start one poll for the Python "
                    "targets and another for the others."
                )
            poll = live.polls.add(python, interval_ms, duration_ms)
            self._services.spawn(run_poll(live, self._services.worker.run, poll))
            return poll.poll_id, poll.expected
        readable = [t for t in targets if t.recipe is not None]
        poll = live.polls.add(readable, interval_ms, duration_ms)
        recipes = [t.recipe for t in readable if t.recipe is not None]
        try:
            await self._services.worker.run(
                lambda: handle.read_memory(recipes, READ_TIMEOUT_S, (poll.poll_id, interval_ms, duration_ms))
            )
        except (AgentTimeout, ProcessGone) as exc:
            live.polls.process_gone()
            raise ProcessExited(
                f"Process exited — session '{session_id}' is still queryable but reads are unavailable ({exc})."
            ) from exc
        return poll.poll_id, poll.expected


def go_global(modules: list[tuple[str, int]], text: str, depth: int) -> PreparedRead | None:
    """`text` as a Go global named by its package path and then steps ('.field', '[index]'), in the first module
    (path, slide) that has a variable of that exact name, the longest such name first; None when there is none."""
    head = text.split("[", 1)[0]
    if "." not in head or any(c.isspace() for c in head):
        return None
    cuts = sorted({i for i, c in enumerate(text) if c in ".[" and i > head.rfind("/")} | {len(text)}, reverse=True)
    for path, slide in modules:
        try:
            index = variable_index(path)
            for cut in cuts:
                name = text[:cut]
                exact = [v for v in index.find(name) if v.name == name]
                if len(exact) != 1 or exact[0].address is None or "." not in name:
                    continue
                # The steps are resolved from the name's last part, which is an identifier the parser accepts.
                root = name.rsplit(".", 1)[1]
                recipe = resolve_at(index, root + text[cut:], exact[0].address + slide, index.type_of(exact[0]).die,
                                    depth)
                return prepare_recipe(text, recipe, 0)
        except StrobeError as exc:
            return PreparedRead(text, "?", 0, error=exc.message)
    main = modules[0][0] if modules else ""
    if not is_go_module(main):
        return None
    try:
        close = variable_index(main).close_names(head)
    except StrobeError:
        close = []
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return PreparedRead(text, "?", 0, error=(
        f"No Go global matches '{text}' in the debug symbols of {os.path.basename(main)}.{hint} Go globals are read by "
        "their package path and name ('main.counter', 'github.com/x/y.Var'), then '.field' or '[index]'; the linker "
        "leaves out globals the program never uses, and locals can only be seen in a paused frame."))


def _python_hint(read: PreparedRead) -> PreparedRead:
    """A native variable that could not be resolved in a Python process: say how Python state is named."""
    if read.error is None:
        return read
    hint = (" In a Python program, read a module global or an attribute chain by its dotted name: "
            "'app.config.timeout', '__main__.counter'.")
    return dataclasses.replace(read, error=read.error + hint)


def paused_threads(live: LiveSession) -> list[PausedThread]:
    """The session's threads paused at a breakpoint, in processes still running."""
    return [p for p in live.breakpoints.paused.values()
            if (process := live.processes.get(p.pid)) is not None and not process.ended]


def still_paused(live: LiveSession, targets: list[PreparedRead]) -> list[PreparedRead]:
    """The targets, those in a frame whose thread went on since they were resolved turned into errors."""
    out: list[PreparedRead] = []
    for target in targets:
        frame = target.frame
        if frame is not None and target.error is None and live.breakpoints.paused.get((frame.pid, frame.thread)) \
                is not frame.pause:
            target = frame_error(target, f"Thread {frame.thread} went on since its frame {frame.frame} was found: "
                                         "the frame is gone. Pause it again (debug_breakpoint) to read its locals.")
        out.append(target)
    return out
