"""Breakpoints of a session's native code: which functions a breakpoint's pattern selects, the agent's
breakpoints (agent/src/native/breakpoints.ts) in the launched process, the threads paused at them, and their
pause events in the timeline.

A thread that hits a breakpoint stops alone; the agent reports it (registers, backtrace, stack) and waits until
`resume` posts `resume:<tid>` to it. The pause is stored as a `pause` event (the same details as a crash event:
function, file, line, backtrace, registers, the frame's memory and, where DWARF describes the frame, locals) and
the thread is listed as paused until it is resumed or the process goes away. Resuming every paused thread before
the daemon lets go of a process (stop, detach) is `release_all`; a thread the daemon never resumes goes on anyway
when the agent is unloaded (its wait throws).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
import weakref
from typing import Any

from strobe.daemon.break_sites import drop_unhookable_sites
from strobe.daemon.break_values import compile_sites, entry_arguments
from strobe.daemon.breakpoint_state import Breakpoint, PausedThread, SessionBreakpoints, Site
from strobe.daemon.crashes import crash_row, describe_thread, thread_name
from strobe.daemon.live import LiveSession
from strobe.daemon.memory import prepare_raw
from strobe.daemon.process import TracedProcess
from strobe.daemon.py_breakpoints import (
    is_python_file,
    python_entry_sites,
    python_line_sites,
    python_scripts,
    python_specs,
    resume_python,
)
from strobe.daemon.registry import LiveSessions
from strobe.daemon.runtimes.cpython import CPYTHON, CPythonRuntime
from strobe.daemon.services import Services
from strobe.daemon.step_plans import frame_address, module_of, step_plan
from strobe.daemon.symbols import ModuleSymbols, SessionSymbols
from strobe.daemon.thread_holds import hold_others, release_holds
from strobe.daemon.tracing import parse_patterns, plan_hooks
from strobe.errors import StrobeError, ValidationError
from strobe.instrument.protocol import PauseReport
from strobe.instrument.requests import BreakpointSpec, StepKind
from strobe.store.schema import EventKind
from strobe.symbols.addresses import line_sites, locate
from strobe.symbols.cfi import RETURN_ADDRESS_OFFSET

log = logging.getLogger(__name__)

MAX_BREAKPOINTS = 100  # per session
MAX_ADDRESSES = 64  # functions one breakpoint's pattern may select
MAX_CONDITION_CHARS = 1000
READ_TIMEOUT_S = 5.0
# Go: a line's breakpoint runs on the stopped thread's stack, in Go code a goroutine's (2 KiB at first, grown only by
# Go code); a paused Go thread holds up the garbage collector. (Rust's small alternate signal stacks, where Frida
# handles the trap, are replaced by the agent: agent/src/native/altstack.ts.)
_REFUSED_LINE_LANGUAGES = (".go",)


def _entry_details(symbols: SessionSymbols, report: PauseReport) -> dict[str, Any]:
    """What the pause event adds from the module's debug info: the arguments of a function stopped at its first
    instruction (from their registers), and the lines a step could not stop at."""
    module = module_of(report.frames, symbols)
    if module is None:
        return {}
    out: dict[str, Any] = {}
    if report.entry:
        pc = int(report.registers.get("pc", "0x0"), 16)
        out["arguments"] = entry_arguments(module.path, pc - module.slide, report.registers)
    lines = {where.line for a in report.skipped
             if (where := locate(module.path, int(a, 16) - module.slide)) is not None and where.line}
    if lines:
        out["skippedLines"] = sorted(lines)
    return out


class Breaking:
    """Sets breakpoints in a session's launched process and resumes its paused threads."""

    def __init__(self, services: Services, sessions: LiveSessions) -> None:
        self._services, self._sessions = services, sessions
        # Breakpoints and logpoints staged without a sessionId, per client connection, for its next launches.
        self._staged: weakref.WeakKeyDictionary[object, list[dict[str, Any]]] = weakref.WeakKeyDictionary()
        self._staged_ids = itertools.count(1)

    def staged(self, client: object) -> list[dict[str, Any]]:
        return list(self._staged.get(client, ()))

    def stage(self, client: object, add: list[dict[str, Any]], remove: list[str], project_root: str | None,
              logpoints: bool = False) -> dict[str, Any]:
        """Pending mode: breakpoints (logpoints) armed by `client`'s next launches before their first instruction.
        A function pattern is checked now; where it and a line are, once the program is known."""
        for request in add:
            if request.get("function"):
                parse_patterns([request["function"]], project_root)
        staged = self._staged.setdefault(client, [])
        mine = {entry["id"] for entry in staged if ("log" in entry) == logpoints}
        unknown = [sid for sid in remove if sid not in mine]
        if unknown:
            raise ValidationError(f"No staged {'logpoint' if logpoints else 'breakpoint'} {', '.join(unknown)}; "
                                  f"staged: {', '.join(sorted(mine)) or 'none'}.")
        staged[:] = [entry for entry in staged if entry["id"] not in remove]
        if len(staged) + len(add) > MAX_BREAKPOINTS:
            raise ValidationError(f"At most {MAX_BREAKPOINTS} breakpoints and logpoints can be staged.")
        for request in add:
            staged.append({**request, "id": f"{'lp' if logpoints else 'bp'}-s{next(self._staged_ids)}"})
        key = "logpoints" if logpoints else "breakpoints"
        return {"mode": "pending", key: [entry for entry in staged if ("log" in entry) == logpoints]}

    async def apply_staged(self, live: LiveSession, staged: list[dict[str, Any]]) -> list[str]:
        """Arm the staged breakpoints and logpoints in a just-launched process; warnings for those that could not."""
        warnings: list[str] = []
        for logpoints in (False, True):
            wanted = [entry for entry in staged if ("log" in entry) == logpoints]
            for entry in wanted:  # one at a time: one that selects nothing does not keep the others out
                request = {k: v for k, v in entry.items() if k != "id"}
                try:
                    warnings += (await self.update(live, [request], [], logpoints)).get("warnings", [])
                except StrobeError as exc:  # the launch goes on: the answer says which were not set
                    warnings.append(f"Staged {'logpoint' if logpoints else 'breakpoint'} not set: {exc.message}")
        return warnings

    async def set(self, session_id: str, add: list[dict[str, Any]], remove: list[str],
                  logpoints: bool = False) -> dict[str, Any]:
        """debug_breakpoint (debug_logpoint with `logpoints`) on a running session."""
        live = await self._sessions.require_live(session_id, "setting logpoints" if logpoints
                                                 else "setting breakpoints")
        async with live.trace_lock:
            return await self.update(live, add, remove, logpoints)

    async def continue_(self, session_id: str, thread: int | None) -> list[PausedThread]:
        """debug_continue: let a paused thread (or every one) go on; returns those resumed."""
        return await self.resume(await self._sessions.require_live(session_id, "continuing"), thread)

    def paused_threads(self, session_id: str) -> list[PausedThread]:
        """The session's threads stopped at a breakpoint, in the processes still running."""
        live = self._sessions.get(session_id)
        if live is None:
            return []
        return [p for p in live.breakpoints.paused.values()
                if (process := live.processes.get(p.pid)) is not None and not process.ended]

    async def update(self, live: LiveSession, add: list[dict[str, Any]], remove: list[str],
                     logpoints: bool = False) -> dict[str, Any]:
        """Add and remove breakpoints, or logpoints (each request has a `log` template): the answer lists the
        session's breakpoints (or logpoints)."""
        state = live.breakpoints
        word, key = ("logpoint", "logpoints") if logpoints else ("breakpoint", "breakpoints")
        mine = {bid for bid, bp in state.breakpoints.items() if (bp.log is not None) == logpoints}
        unknown = [bid for bid in remove if bid not in mine]
        if unknown:
            raise ValidationError(f"No {word} {', '.join(unknown)} in session {live.record.id}; the session's "
                                  f"{key} are: {', '.join(sorted(mine)) or 'none'}.")
        if len(state.breakpoints) - len(remove) + len(add) > MAX_BREAKPOINTS:
            raise ValidationError(f"A session holds at most {MAX_BREAKPOINTS} breakpoints; remove some first.")
        symbols = await live.image.symbols
        if add and not symbols.traceable:
            symbols.require_debug_info()
        warnings: list[str] = []
        # Off the event loop: a line's sites come from decoding every line program of the modules (cached after).
        made = await asyncio.to_thread(lambda: [self._resolve(live, request, symbols, state) for request in add])
        process = live.root
        warnings += await asyncio.to_thread(drop_unhookable_sites, made, list(process.hooked.values()))
        made = [bp for bp in made if bp.sites]
        in_python = [bp for bp in made if bp.python]
        specs: list[BreakpointSpec] = []
        for bp in made:
            if not bp.python:
                compiled, refused = await asyncio.to_thread(compile_sites, bp)
                warnings += refused
                specs += compiled
        made = [bp for bp in made if bp.sites]
        gone = [f"{bid}#{n}" for bid in remove for n in range(len(state.breakpoints[bid].sites))
                if not state.breakpoints[bid].python]
        handle = process.handle
        failed: dict[str, str] = {}
        if specs or gone:
            reply = await self._services.worker.run(lambda: handle.set_breakpoints(specs, gone))
            failed = {f.id: f.error for f in reply.failed}
        python_gone = [f"{bid}#{n}" for bid in remove for n in range(len(state.breakpoints[bid].sites))
                       if state.breakpoints[bid].python]
        if in_python or python_gone:
            runtime = live.image.runtime
            if not isinstance(runtime, CPythonRuntime):
                raise ValidationError("Python breakpoints need a session running CPython.")
            python_specs_ = [spec for bp in in_python for spec in python_specs(bp)]
            failed |= await runtime.set_python_breakpoints(self._services.worker.run, handle, python_specs_,
                                                           python_gone)
        for bid in remove:
            del state.breakpoints[bid]
        for bp in made:
            errors = [failed[f"{bp.id}#{n}"] for n in range(len(bp.sites)) if f"{bp.id}#{n}" in failed]
            if errors and len(errors) == len(bp.sites):
                warnings.append(f"Breakpoint on '{bp.target}' was not set: {errors[0]}")
                continue
            if errors:
                warnings.append(f"Breakpoint {bp.id} on '{bp.target}': {len(errors)} of its {len(bp.sites)} "
                                f"locations could not be armed ({errors[0]}).")
            state.breakpoints[bp.id] = bp
        answer: dict[str, Any] = {key: [bp.answer() for bp in state.breakpoints.values()
                                        if (bp.log is not None) == logpoints]}
        if warnings:
            answer["warnings"] = warnings
        return answer

    def _resolve(self, live: LiveSession, request: dict[str, Any], symbols: SessionSymbols,
                 state: SessionBreakpoints) -> Breakpoint:
        condition = request.get("condition")
        if condition is not None and len(condition) > MAX_CONDITION_CHARS:
            raise ValidationError(f"A condition is at most {MAX_CONDITION_CHARS} characters.")
        pattern, file, line = request.get("function"), request.get("file"), request.get("line")
        if pattern:
            target, sites = pattern, self._function_sites(live, pattern, symbols)
        elif file and line and is_python_file(file):
            sites = python_line_sites(python_scripts(symbols), file, line, live.record.project_root)
            target, file = f"{file}:{line}", sites[0].file
        elif file and line:
            target, (file, sites) = f"{file}:{line}", self._line_sites(symbols, file, line)
        else:
            raise ValidationError("A breakpoint needs `function` (a pattern) or `file` with `line`.")
        if len(sites) > MAX_ADDRESSES:
            raise ValidationError(f"'{target}' is at {len(sites)} places; a breakpoint takes at most {MAX_ADDRESSES}. "
                                  "Narrow it.")
        log = request.get("log")
        if request.get("allThreads") and sites and sites[0].runtime != "native":
            raise ValidationError("allThreads is for native code for now: in Python code a breakpoint stops the "
                                  "thread that hits it (the others run on). Leave allThreads out.")
        bid = f"{'lp' if log is not None else 'bp'}-{state.next_id}"
        state.next_id += 1
        return Breakpoint(bid, target, condition, request.get("hitCount"), sites, log=log,
                          function=pattern or None, file=None if pattern else file, line=None if pattern else line,
                          all_threads=bool(request.get("allThreads")) and log is None)

    @staticmethod
    def _function_sites(live: LiveSession, pattern: str, symbols: SessionSymbols) -> list[Site]:
        plan = plan_hooks([], [pattern], [], symbols.sources, live.record.project_root)
        python = sorted((f for f in plan.desired.values() if f.runtime == CPYTHON), key=lambda f: f.name)
        if python:  # a pattern in a Python program's dialect (app.orders.*): its Python functions
            return python_entry_sites(python)
        native = sorted((f for f in plan.desired.values() if f.runtime == "native"), key=lambda f: f.name)
        if not native:
            detail = plan.warnings[0] if plan.warnings else f"Pattern '{pattern}' matched no native function."
            raise ValidationError(f"No breakpoint set: {detail}")
        return [Site("entry", f.runtime_address, f.name, f.file, f.info.line, f) for f in native]

    @staticmethod
    def _line_sites(symbols: SessionSymbols, file: str, line: int) -> tuple[str, list[Site]]:
        """The loaded modules' code for `file`:`line` (DWARF line tables): each copy's first instruction."""
        modules = [m for m in symbols.sources if isinstance(m, ModuleSymbols)]
        named: set[str] = set()
        sites: list[Site] = []
        next_lines: set[int] = set()
        for module in modules:
            found = line_sites(module.path, file, line)
            if found is None:
                continue
            named.update(found.files)
            next_lines.update(found.next_lines)
            for static in found.addresses:
                where = locate(module.path, static)
                sites.append(Site("line", static + module.slide, where.function if where else None,
                                  where.file if where and where.file else found.files[0], line,
                                  module=module.path, slide=module.slide))
        if not named:
            raise ValidationError(f"No source file named '{file}' in the line tables of the program's "
                                  f"{len(modules)} module(s) with debug info: give the file as the program was "
                                  "built from it (a base name 'main.c', a path suffix 'src/main.c' or absolute).")
        if len(named) > 1:
            raise ValidationError(f"'{file}' names {len(named)} source files: {', '.join(sorted(named)[:5])}. "
                                  "Give more of its path.")
        source = next(iter(named))
        if source.endswith(_REFUSED_LINE_LANGUAGES):
            raise ValidationError(
                "Line breakpoints are not supported in Go code: a line's breakpoint runs on the thread's own stack "
                "(measured: 12 KiB of it), and Go code runs on goroutine stacks that start at 2 KiB and grow only when "
                "Go code asks; a stopped Go thread also holds up Go's garbage collector, so the whole program stops at "
                "its next collection (measured). Trace the function instead (debug_trace records its calls without "
                "stopping them).")
        if not sites:
            after = f" The next lines with code: {', '.join(map(str, sorted(next_lines)[:3]))}." if next_lines else ""
            raise ValidationError(f"Line {line} of {next(iter(named))} has no code (a comment, a declaration, a "
                                  f"blank line, or code the compiler removed).{after}")
        return next(iter(named)), sites

    async def on_paused(self, live: LiveSession, pid: int, report: PauseReport, stack: bytes) -> None:
        """Store the pause event and list the thread as paused (it waits for resume); a step waiting for it ends."""
        services = self._services
        bid = report.breakpointId.split("#", 1)[0]
        held = await hold_others(live, pid, report) if report.others is not None else None
        try:
            await services.ingest.barrier()
            await services.write(lambda c: None)  # the calls leading up to the stop are committed before it
            pc = report.registers.get("pc", "0x0")
            event: dict[str, Any] = {"threadId": report.tid}
            if (name := thread_name(pid, report.tid)) is not None:
                event["threadName"] = name
            # At a function's first instruction its frame does not exist yet (rbp is still the caller's): no locals
            # are read from it there, and its arguments are read from the registers they arrive in.
            event.update(await asyncio.to_thread(describe_thread, report.frames, report.registers, report.stackBase,
                                                 stack, locate, None if report.entry else pc))
            if bid:
                event.update(breakpointId=bid, hit=report.hit)
            if report.step is not None:
                event["step"] = report.step
            if report.entry or report.skipped:
                event.update(await asyncio.to_thread(_entry_details, await live.image.symbols, report))
            # The line it stopped in is not skipped: it stopped in its middle, after what ran in the hook's copy.
            if skipped := [n for n in event.pop("skippedLines", []) if n != event.get("line")]:
                event["skippedLines"] = skipped
            if report.conditionError is not None:
                event["conditionError"] = report.conditionError
            if report.stepError is not None:
                event["stepError"] = report.stepError
            if held is not None:
                event["otherThreads"] = held
            where = event.get("function") or "?"
            if event.get("sourceFile"):
                where += f" at {event['sourceFile']}:{event.get('line', '?')}"
            why = f"stepped {report.step} to" if report.step is not None and report.stepError is None else (
                f"paused at breakpoint {bid} in" if bid else "paused in")
            event["text"] = f"{why} {where}, thread {report.tid}"
            ts = report.sec * 1_000_000_000 + report.nsec - live.start_ns
            services.writer.submit_rows([crash_row(live.record.key, pid, report.tid, ts, event, EventKind.PAUSE)])
            paused = PausedThread(pid, report.tid, bid, time.monotonic(), event, int(pc, 16), report.entry,
                                  report.frames)
            live.breakpoints.paused[(pid, report.tid)] = paused
            waiter = live.breakpoints.waiters.pop((pid, report.tid), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(paused)
            log.info("session %s: pid %d: %s", live.record.id, pid, event["text"])
        except Exception:
            log.exception("session %s: a pause could not be recorded; resuming thread %d", live.record.id, report.tid)
            await release_holds(live, pid)
            process = live.processes.get(pid)
            if process is not None:
                await services.worker.run(lambda: process.handle.resume_thread(report.tid))

    async def _step_python(self, live: LiveSession, paused: PausedThread, kind: StepKind,
                           wait_s: float) -> dict[str, Any]:
        """A step of a thread paused in Python code: the tracer steps it (over, into, out) and reports where."""
        process = live.processes[paused.pid]
        state = live.breakpoints
        key = (paused.pid, paused.tid)
        waiter: asyncio.Future[PausedThread] = asyncio.get_running_loop().create_future()
        state.waiters[key] = waiter
        state.paused.pop(key, None)
        runtime = live.image.runtime
        assert isinstance(runtime, CPythonRuntime)
        try:
            await runtime.resume_python(self._services.worker.run, process.handle, paused.tid, kind)
        except (ValueError, TimeoutError) as exc:
            state.waiters.pop(key, None)
            state.paused[key] = paused
            raise ValidationError(f"The thread could not be stepped: {exc}") from None
        return await self._step_answer(live, process, paused, waiter, wait_s, [])

    async def step(self, session_id: str, thread: int | None, kind: StepKind, wait_s: float) -> dict[str, Any]:
        """debug_continue's steps: the paused thread goes on to the next line (over, into) or out of its function;
        the answer is where it stopped, or that it is still running after `wait_s` seconds."""
        live = await self._sessions.require_live(session_id, "stepping")
        state = live.breakpoints
        candidates = [p for p in self.paused_threads(session_id) if thread is None or p.tid == thread]
        if not candidates:
            which = f"Thread {thread} is not" if thread is not None else "No thread is"
            raise ValidationError(f"{which} paused in session {session_id}: a step starts from a thread stopped at a "
                                  "breakpoint (debug_breakpoint). debug_list_sessions lists paused threads.")
        if len(candidates) > 1:
            raise ValidationError(f"{len(candidates)} threads are paused ({', '.join(str(p.tid) for p in candidates)})"
                                  ": say which one steps (threadId).")
        paused = candidates[0]
        if paused.python:
            return await self._step_python(live, paused, kind, wait_s)
        process = live.processes[paused.pid]
        symbols = await live.image.symbols
        return_address = await self._return_address(process, paused, symbols)
        try:
            plan, notes = await asyncio.to_thread(step_plan, paused, kind, symbols, return_address)
        except LookupError as exc:
            raise ValidationError(f"Cannot step {kind} from here: {exc}. Continue the thread instead "
                                  "(action 'continue').") from None
        key = (paused.pid, paused.tid)
        await release_holds(live, paused.pid)  # the other threads run during the step (stopped again at its end)
        waiter: asyncio.Future[PausedThread] = asyncio.get_running_loop().create_future()
        state.waiters[key] = waiter
        state.paused.pop(key, None)
        handle = process.handle
        try:
            await self._services.worker.run(lambda: handle.resume_thread(paused.tid, plan))
        except Exception as exc:
            state.waiters.pop(key, None)
            raise ValidationError(f"The thread could not be resumed: {exc}") from None
        return await self._step_answer(live, process, paused, waiter, wait_s, notes)

    async def _step_answer(self, live: LiveSession, process: TracedProcess, paused: PausedThread,
                           waiter: asyncio.Future[PausedThread], wait_s: float, notes: list[str]) -> dict[str, Any]:
        """Wait for a stepping thread to stop again and say where (or that it still runs, or that it ended)."""
        state, key = live.breakpoints, (paused.pid, paused.tid)
        deadline = time.monotonic() + wait_s
        while not waiter.done() and time.monotonic() < deadline and not process.ended:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(waiter), min(0.1, max(deadline - time.monotonic(), 0.001)))
        if not waiter.done():
            state.waiters.pop(key, None)
            if process.ended:
                return {"status": "exited", "threadId": paused.tid, "note": "The process ended during the step."}
            return {"status": "running", "threadId": paused.tid, "notes": [
                *notes, f"The step has not ended within {wait_s:g}s: the thread runs (a long call, a wait, a loop); it "
                "pauses when it reaches the step's end. debug_list_sessions shows it paused then, debug_query "
                "eventType 'pause' where."]}
        stopped = waiter.result()
        if stopped.event.get("stepError"):
            raise ValidationError(f"The step could not be taken: {stopped.event['stepError']}. The thread is still "
                                  "paused where it was.")
        skipped = stopped.event.get("skippedLines")
        if skipped:
            notes.append(f"Line(s) {', '.join(map(str, skipped))} ran without a stop: their first instructions were "
                         "moved into the hook at the function's entry (a trace or a function breakpoint there). Break "
                         "at such a line (file + line) instead of at the function to stop there.")
        answer: dict[str, Any] = {"status": "paused", **stopped.answer()}
        if stopped.breakpoint_id:
            notes.append(f"The step ended at breakpoint {stopped.breakpoint_id}.")
        if notes:
            answer["notes"] = notes
        return answer

    async def _return_address(self, process: TracedProcess, paused: PausedThread,
                              symbols: SessionSymbols) -> int | None:
        """The paused frame's return address, read from the stack at its CFA - 8: exact where the unwinder, starting
        from a trap's stub, may take a wrong first frame. None when the call frame information does not say (the
        agent then takes the unwinder's frame 1, as it does when the value is in Frida's code)."""
        cfa = await asyncio.to_thread(frame_address, paused, symbols)
        if cfa is None:
            return None
        read = prepare_raw(hex(cfa - RETURN_ADDRESS_OFFSET), 8, "pointer")
        assert read.recipe is not None
        recipes, handle = [read.recipe], process.handle
        try:
            reply, data = await self._services.worker.run(lambda: handle.read_memory(recipes, READ_TIMEOUT_S))
        except Exception:  # the process is going away: the unwinder's frame stands
            return None
        [result] = reply.results
        if result.error is not None or result.dataOffset is None:
            return None
        return int.from_bytes(data[result.dataOffset : result.dataOffset + 8], "little")

    async def resume(self, live: LiveSession, thread: int | None) -> list[PausedThread]:
        """Resume one paused thread (`thread`), or every one; returns those resumed."""
        state = live.breakpoints
        chosen = [p for p in state.paused.values() if thread is None or p.tid == thread]
        for pid in {p.pid for p in chosen}:  # the threads a stop of every thread held run on first
            await release_holds(live, pid)
        for paused in chosen:
            state.paused.pop((paused.pid, paused.tid), None)
            process = live.processes.get(paused.pid)
            if process is not None and not process.ended and paused.python:
                await resume_python(self._services, live, process, paused.tid, "continue")
            elif process is not None and not process.ended:
                await self._resume(process, paused.tid)
        return chosen

    async def release_all(self, live: LiveSession) -> None:
        """Before the daemon lets go of the process: every paused thread goes on."""
        if live.breakpoints.paused:
            await self.resume(live, None)

    async def _resume(self, process: TracedProcess, tid: int) -> None:
        handle = process.handle
        try:
            await self._services.worker.run(lambda: handle.resume_thread(tid))
        except Exception:  # gone: nothing is left paused
            log.info("pid %d: thread %d could not be resumed (the process is gone)", process.pid, tid)

