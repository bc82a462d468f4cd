"""debug_read on a live session: resolving variables against its debug info, one-shot reads and polls sampled
into the timeline (of the launched process)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from typing import Any

from strobe.daemon.memory import READ_TIMEOUT_S, PreparedRead, pair_results, prepare_variable, result_of
from strobe.daemon.python_reads import evaluate, is_python_chain, prepare_python, run_poll
from strobe.daemon.registry import LiveSessions
from strobe.daemon.runtimes import RuntimeKind
from strobe.daemon.services import Services
from strobe.errors import FridaAttachFailed, ProcessExited, ValidationError
from strobe.instrument.handle import AgentTimeout, ProcessGone
from strobe.instrument.protocol import ReadResult


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
            return {e: prepare_variable(modules, e, depth) for e in dict.fromkeys(expressions)}

        native = await asyncio.to_thread(resolve)
        if live.image.kind is RuntimeKind.CPYTHON:
            native = {e: _python_hint(read) for e, read in native.items()}
        return native | python

    async def read_memory(self, session_id: str, targets: list[PreparedRead]) -> list[dict[str, Any]]:
        """Read every target once (5 s at most); per-target errors never fail the others."""
        live = await self._sessions.require_live(session_id, "reading memory")
        handle = live.root.handle
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


def _python_hint(read: PreparedRead) -> PreparedRead:
    """A native variable that could not be resolved in a Python process: say how Python state is named."""
    if read.error is None:
        return read
    hint = (" In a Python program, read a module global or an attribute chain by its dotted name: "
            "'app.config.timeout', '__main__.counter'.")
    return dataclasses.replace(read, error=read.error + hint)
