"""A breakpoint's `allThreads`: the other threads of the process whose thread paused, held stopped by
instrument/thread_stops.py's helper until a paused thread of that process is resumed or steps, or the process ends.

    held = await hold_others(live, pid, report)   # the pause event's otherThreads: {stopped, notStopped?}
    await release_holds(live, pid)                 # they run again (nothing when none are held)
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from strobe.daemon.live import LiveSession
from strobe.errors import StrobeError
from strobe.instrument.protocol import PauseReport
from strobe.instrument.thread_stops import ThreadHold

log = logging.getLogger(__name__)


async def hold_others(live: LiveSession, pid: int, report: PauseReport) -> dict[str, Any]:
    """A stop of every thread: the program's other threads (`report.others`, Frida's own left out) are stopped
    with ptrace by a helper process (instrument/thread_stops.py) until the paused thread is resumed. What the
    pause event says of them: how many were stopped, and which could not be and why."""
    state = live.breakpoints
    await release_holds(live, pid)  # one hold per process: the newest stop's
    others = [tid for tid in report.others or [] if tid != report.tid]
    try:
        hold = await asyncio.to_thread(ThreadHold.start, pid, others)
    except (StrobeError, OSError, ValueError) as exc:
        why = exc.message if isinstance(exc, StrobeError) else f"{type(exc).__name__}: {exc}"
        log.warning("session %s: pid %d: other threads not stopped: %s", live.record.id, pid, why)
        return {"stopped": 0, "notStopped": f"the other threads run on: {why}"}
    if hold.active:
        state.holds[pid] = hold
    result = hold.result
    out: dict[str, Any] = {"stopped": len(result.held)}
    if result.failed:
        out["notStopped"] = {str(tid): why for tid, why in result.failed.items()}
    return out


async def release_holds(live: LiveSession, pid: int) -> None:
    """The threads a stop of every thread held in `pid` run again (nothing when none are held)."""
    hold = live.breakpoints.holds.pop(pid, None)
    if hold is not None:
        await asyncio.to_thread(hold.release)
