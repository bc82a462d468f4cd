"""Storing a crash report: a fatal signal in any process of a session becomes a crash event (after every trace
record sent before it, with the crashing thread's last calls), committed before the crashing thread may go on
to the signal's handler or its default action. Symbolization is daemon/crashes.py, and so is telling a crash inside
a hook Strobe made (a traced function's, a breakpoint's at a function's entry) from the program's own."""

from __future__ import annotations

import asyncio
import logging

from strobe.daemon.crashes import HookedAt, crash_row, describe_crash, hook_covering
from strobe.daemon.crashes import thread_name as crash_thread_name
from strobe.daemon.live import LiveSession
from strobe.daemon.services import Services
from strobe.daemon.symbols import TraceableFunction
from strobe.instrument.protocol import CrashReport
from strobe.store.recent import last_calls
from strobe.symbols.addresses import locate
from strobe.symbols.hook_safety import HOOK_SAFETY

log = logging.getLogger(__name__)

LAST_EVENTS = 20  # function events of the crashing thread listed in a crash event


class CrashStorage:
    def __init__(self, services: Services) -> None:
        self._services = services

    async def store(self, live: LiveSession, pid: int, report: CrashReport, stack: bytes) -> None:
        services = self._services
        task = asyncio.current_task()
        if task is not None:  # the session does not read as ended before its crash event is stored
            live.crash_reports.add(task)
            task.add_done_callback(live.crash_reports.discard)
        try:
            await services.ingest.barrier()
            await services.write(lambda c: None)  # the calls leading up to the crash are committed
            name = crash_thread_name(pid, report.tid)
            event = await asyncio.to_thread(describe_crash, report, stack, pid, locate, name, None,
                                            _hooked_at(live, pid))
            ts = report.sec * 1_000_000_000 + report.nsec - live.start_ns
            key, sid = live.record.key, live.record.id
            event["lastEvents"] = await services.read(lambda c: last_calls(c, key, sid, pid, report.tid, ts,
                                                                           LAST_EVENTS))
            services.writer.submit_rows([crash_row(key, pid, report.tid, ts, event)])
            await services.write(lambda c: None)  # committed before the process may die
            process = live.processes.get(pid)
            if process is not None:
                process.crash_signal = report.signal
            log.info("session %s: pid %d: %s", sid, pid, event["text"])
        except Exception:
            log.exception("session %s: the crash report could not be stored", live.record.id)
        finally:
            process = live.processes.get(pid)
            if process is not None:
                await services.worker.run(process.handle.ack_crash)


def _hooked_at(live: LiveSession, pid: int) -> HookedAt:
    """Which of the process's entry hooks (its traced functions; the launched process's breakpoints at a function's
    entry) overwrote the code at an address."""
    process = live.processes.get(pid)
    hooked: list[TraceableFunction] = list(process.hooked.values()) if process is not None else []
    if process is not None and process.is_root:
        hooked += [site.traceable for bp in live.breakpoints.breakpoints.values() for site in bp.sites
                   if site.kind == "entry" and site.traceable is not None]
    return lambda pc: hook_covering(pc, hooked, HOOK_SAFETY.span)
