"""The live sessions of this daemon by id, and what is kept of one once it ends (its polls' final state, its
tracers' notes)."""

from __future__ import annotations

import dataclasses

from strobe.daemon.live import LiveSession
from strobe.daemon.memory import PollState
from strobe.daemon.services import Services
from strobe.daemon.tracing import tracer_warnings
from strobe.errors import ProcessExited, SessionNotFound
from strobe.store import sessions as store_sessions
from strobe.store.sessions import SessionRecord

MAX_ENDED_KEPT = 200  # ended sessions whose tracer notes are kept (the newest)


class LiveSessions:
    def __init__(self, services: Services) -> None:
        self._services = services
        self._live: dict[str, LiveSession] = {}
        self._ended_polls: dict[str, list[PollState]] = {}
        self._ended_notes: dict[str, list[str]] = {}  # the session's SlotTable.notes: a last batch may still add

    def add(self, live: LiveSession) -> None:
        self._live[live.record.id] = live

    def remove(self, live: LiveSession) -> None:
        self._live.pop(live.record.id, None)
        live.polls.process_gone()
        if live.polls.polls:
            self._ended_polls[live.record.id] = live.polls.states()
        if live.trace.table.notes or live.trace.table.slots:
            self._ended_notes[live.record.id] = live.trace.table.notes
            for oldest in list(self._ended_notes)[:-MAX_ENDED_KEPT]:
                del self._ended_notes[oldest]

    def get(self, session_id: str) -> LiveSession | None:
        return self._live.get(session_id)

    def all(self) -> list[LiveSession]:
        return list(self._live.values())

    def running(self, binary_path: str) -> LiveSession | None:
        return next((live for live in self._live.values() if live.record.binary_path == binary_path), None)

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, session_id: str) -> bool:
        return session_id in self._live

    def polls(self, session_id: str) -> list[PollState]:
        """The state of each poll of a session (a running one's, or as it was when its process ended)."""
        live = self._live.get(session_id)
        return live.polls.states() if live is not None else self._ended_polls.get(session_id, [])

    def tracer_notes(self, session_id: str) -> list[str]:
        """What the session's in-process tracers reported (a file they ran untraced, and why), while it runs and
        after."""
        live = self._live.get(session_id)
        return tracer_warnings(live.trace.table.notes if live is not None else self._ended_notes.get(session_id, []))

    def forget_ended(self, session_id: str) -> None:
        self._ended_polls.pop(session_id, None)
        self._ended_notes.pop(session_id, None)

    async def record(self, session_id: str) -> SessionRecord:
        record = await self._services.read(lambda c: store_sessions.get_session(c, session_id))
        if record is None:
            raise SessionNotFound(session_id)
        return self.with_unsaved_losses(record)

    def with_unsaved_losses(self, record: SessionRecord) -> SessionRecord:
        """The record with the events lost to writes that failed since its `lost` count was last stored (while the
        disk is full, nothing can be stored, the count included)."""
        unsaved = self._services.writer.unsaved_losses(record.key)
        return dataclasses.replace(record, lost=record.lost + unsaved) if unsaved else record

    async def require_live(self, session_id: str, doing: str) -> LiveSession:
        """The live session, or SESSION_NOT_FOUND / PROCESS_EXITED saying what still works."""
        live = self._live.get(session_id)
        if live is not None and live.processes:
            return live
        record = await self.record(session_id)
        code = "unknown" if record.exit_code is None else record.exit_code
        raise ProcessExited(
            f"Process exited (code: {code}) — session '{session_id}' is still queryable with debug_query but "
            f"{doing} is unavailable. Launch the program again to {doing} a new run."
        )
