"""debug_read on a live session: resolving variables against its debug info, one-shot reads and polls sampled
into the timeline. A part of SessionManager (its base class), kept apart because it is its own tool."""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any

from strobe.daemon.memory import READ_TIMEOUT_S, PreparedRead, pair_results, prepare_variable, result_of
from strobe.errors import FridaAttachFailed, ProcessExited, ValidationError
from strobe.instrument.launcher import AgentTimeout, ProcessGone
from strobe.instrument.protocol import ReadResult
from strobe.instrument.worker import FridaWorker
from strobe.paths import StrobePaths
from strobe.store.sessions import SessionRecord

if TYPE_CHECKING:
    from strobe.daemon.sessions import LiveSession


class SessionReads:
    _live: dict[str, LiveSession]
    _ended_polls: dict[str, list[dict[str, Any]]]
    worker: FridaWorker
    paths: StrobePaths

    async def get_record(self, session_id: str) -> SessionRecord:
        raise NotImplementedError

    async def require_live(self, session_id: str, doing: str) -> LiveSession:
        """The live session, or SESSION_NOT_FOUND / PROCESS_EXITED saying what still works."""
        live = self._live.get(session_id)
        if live is not None and live.handle is not None:
            return live
        record = await self.get_record(session_id)
        code = "unknown" if record.exit_code is None else record.exit_code
        raise ProcessExited(
            f"Process exited (code: {code}) — session '{session_id}' is still queryable with debug_query but "
            f"{doing} is unavailable. Launch the program again to {doing} a new run."
        )

    async def resolve_variables(self, session_id: str, expressions: list[str], depth: int) -> dict[str, PreparedRead]:
        """Resolve variable expressions against the session's debug info (per-target errors, never raised)."""
        live = await self.require_live(session_id, "reading memory")
        assert live.symbols is not None
        symbols = await live.symbols
        main = os.path.realpath(symbols.main_binary)
        modules = sorted(((m.path, m.slide) for m in symbols.indexes), key=lambda m: os.path.realpath(m[0]) != main)
        if not any(os.path.realpath(path) == main for path, _ in modules):
            modules.insert(0, (symbols.main_binary, 0))  # reports why it has no variables

        def resolve() -> dict[str, PreparedRead]:
            return {e: prepare_variable(modules, e, depth) for e in dict.fromkeys(expressions)}

        return await asyncio.to_thread(resolve)

    async def read_memory(self, session_id: str, targets: list[PreparedRead]) -> list[dict[str, Any]]:
        """Read every target once (5 s at most); per-target errors never fail the others."""
        live = await self.require_live(session_id, "reading memory")
        handle = live.handle
        assert handle is not None
        recipes = [t.recipe for t in targets if t.recipe is not None]
        answers: list[ReadResult] = []
        data = b""
        if recipes:
            try:
                reply, data = await self.worker.run(lambda: handle.read_memory(recipes, READ_TIMEOUT_S))
            except AgentTimeout as exc:
                raise FridaAttachFailed(
                    f"Memory read timed out ({READ_TIMEOUT_S:.0f}s): {exc.message} Retry, or read fewer targets."
                ) from exc
            except ProcessGone as exc:
                raise ProcessExited(
                    f"Process exited — session '{session_id}' is still queryable but reads are unavailable ({exc})."
                ) from exc
            answers = reply.results
        return [result_of(t, r, data, bytes_dir=self.paths.reads_dir, session_id=session_id)
                for t, r in pair_results(targets, answers)]

    async def start_poll(
        self, session_id: str, targets: list[PreparedRead], interval_ms: int, duration_ms: int, max_polls: int
    ) -> tuple[int, int]:
        """Start sampling the targets into the timeline; returns (poll id, expected samples) at once."""
        live = await self.require_live(session_id, "reading memory")
        handle = live.handle
        assert handle is not None
        if live.polls.running() >= max_polls:
            raise ValidationError(
                f"Session '{session_id}' already runs {max_polls} polls, the most at once; wait for one to end "
                "(debug_query shows their state under 'polls')."
            )
        readable = [t for t in targets if t.recipe is not None]
        poll = live.polls.add(readable, interval_ms, duration_ms)
        recipes = [t.recipe for t in readable if t.recipe is not None]
        try:
            await self.worker.run(
                lambda: handle.read_memory(recipes, READ_TIMEOUT_S, (poll.poll_id, interval_ms, duration_ms))
            )
        except (AgentTimeout, ProcessGone) as exc:
            live.polls.process_gone()
            raise ProcessExited(
                f"Process exited — session '{session_id}' is still queryable but reads are unavailable ({exc})."
            ) from exc
        return poll.poll_id, poll.expected

    def polls(self, session_id: str) -> list[dict[str, Any]]:
        """The state of each poll of a session (a running one's, or as it was when its process ended)."""
        live = self._live.get(session_id)
        return live.polls.describe() if live is not None else self._ended_polls.get(session_id, [])
