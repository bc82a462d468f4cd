"""debug_stacks: every thread's stack of a running session now, and what they say (deadlock, busy loop, …)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from strobe.daemon.live_stacks import MAX_THREADS, LiveThread, SessionStacks, session_stacks
from strobe.mcp.models import MAX_ID, StrictModel
from strobe.mcp.registry import Tool, ToolContext
from strobe.testing.stacks import Frame


class StacksRequest(StrictModel):
    sessionId: str = Field(min_length=1, max_length=MAX_ID)


def _frame(frame: Frame) -> str:
    text = frame.function
    if frame.location:
        text += f" at {frame.location}"
    if frame.module:
        text += f" in {Path(frame.module).name}"
    return text


def _percent(share: float) -> int:
    return round(share * 100)


def _thread(thread: LiveThread) -> dict[str, Any]:
    return {"tid": thread.tid, "name": thread.name, "state": thread.state, "cpu": _percent(thread.cpu),
            "frames": [_frame(frame) for frame in thread.stack.calls]}


def _about(pid: int, thread: LiveThread) -> dict[str, Any]:
    """A thread the diagnosis names: where it is (innermost frame) and in which of its own functions."""
    out: dict[str, Any] = {"pid": pid, "tid": thread.tid, "name": thread.name, "cpu": _percent(thread.cpu)}
    own = thread.stack.user_frames
    if own:
        out["function"] = own[0].function
        out["at"] = _frame(own[0])
    calls = list(thread.stack.calls)
    below = calls.index(own[0]) if own else _first_outside_libraries(calls)  # the calls it is in, innermost first
    if below and thread.waits is not None:
        out["blockedIn"] = _frame(calls[below - 1])  # the call its own code made: pthread_mutex_lock, read, …
    elif below:
        out["innermost"] = _frame(calls[0])
    if thread.waits is not None:
        out["waitsOn"] = str(thread.waits)
    return out


def _first_outside_libraries(calls: list[Frame]) -> int:
    """Where a thread with no frame of its own counted as the user's (`main` is not: a runtime's may be generated)
    leaves the system libraries: the program's binary."""
    return next((i for i, frame in enumerate(calls) if frame.module and not frame.in_system_library), len(calls))


def _next_steps(sid: str, stacks: SessionStacks) -> list[str]:
    diagnosis = stacks.diagnosis
    traces = diagnosis.suggested_traces
    steps: list[str] = []
    if diagnosis.kind == "deadlock":
        steps.append("Each listed thread holds a lock another one waits for: compare the lock calls of "
                     f"{', '.join(traces) or 'the listed functions'} and take the locks in one order everywhere. "
                     f"To see the order at run time, debug_stop, stage debug_trace({{add: {traces}}}) and "
                     "debug_launch again.")
    elif diagnosis.kind == "busy_loop":
        steps.append(f"The loop never ends: read the variables its exit condition tests (debug_read), or stop in it "
                     f"with debug_breakpoint({{sessionId: '{sid}', add: [{{function: '{traces[0] if traces else '…'}'"
                     "}]}) to see its locals.")
    elif diagnosis.kind == "waiting_on_io":
        steps.append("It waits for input that does not come: check what should write to it (a peer, a pipe, "
                     "stdin) and its output so far with debug_query.")
    elif diagnosis.kind == "paused":
        steps.append(f"debug_continue({{sessionId: '{sid}'}}) resumes the paused threads.")
    else:
        steps.append(f"Call debug_stacks again in a few seconds: stacks that move mean progress; debug_query "
                     f"({{sessionId: '{sid}'}}) shows its output and traced calls.")
    steps.append(f"debug_stop({{sessionId: '{sid}'}}) ends the program when you are done.")
    return steps


async def stacks(ctx: ToolContext, req: StacksRequest) -> dict[str, Any]:
    found = await session_stacks(ctx.manager.sessions, req.sessionId)
    budget = MAX_THREADS
    processes: list[dict[str, Any]] = []
    notes: list[str] = []
    for process in found.processes:
        entry: dict[str, Any] = {"pid": process.pid, "command": process.command}
        if process.python:
            entry["python"] = True
        program = [t for t in process.threads if not t.strobe]
        shown, budget = program[:budget], max(0, budget - len(program))
        entry["threads"] = [_thread(t) for t in shown]
        if len(program) > len(shown):
            entry["moreThreads"] = len(program) - len(shown)
            notes.append(f"pid {process.pid}: {len(program) - len(shown)} more threads not shown "
                         f"(at most {MAX_THREADS} in all); the diagnosis counted them all.")
        frida = [{"tid": t.tid, "name": t.name} for t in process.threads if t.strobe]
        if frida:
            entry["strobeThreads"] = frida
        if process.error:
            entry["error"] = process.error
        processes.append(entry)
    if any(t.strobe for p in found.processes for t in p.threads):
        notes.append("strobeThreads are Frida's (Strobe's agent inside the program): left out of the diagnosis.")
    if found.python_frames:
        notes.append(found.python_frames)
    diagnosis = found.diagnosis
    result: dict[str, Any] = {
        "sessionId": found.session_id,
        "windowMs": int(found.window_s * 1000),
        "diagnosis": {"kind": diagnosis.kind, "summary": diagnosis.summary,
                      "threads": [_about(pid, t) for pid, t in diagnosis.threads[:MAX_THREADS]]},
        "processes": processes,
    }
    if diagnosis.suggested_traces:
        result["diagnosis"]["suggestedTraces"] = diagnosis.suggested_traces
    if notes:
        result["notes"] = notes
    result["nextSteps"] = _next_steps(found.session_id, found)
    return result


TOOLS = (
    Tool(
        "debug_stacks",
        StacksRequest,
        "Why is it stuck, right now? Every thread's stack of a running session (the launched process and its traced "
        "children), read from outside without stopping the program for more than a moment, plus a diagnosis. Use it "
        "when the program has gone silent, hangs, or burns a CPU core: no tracing needed beforehand. Takes ~2 s: two "
        "captures 1.5 s apart with each thread's CPU use between them. diagnosis.kind is 'deadlock' (threads "
        "waiting on locks, stacks identical), 'busy_loop' (a thread using a full core, still in the same own "
        "function: diagnosis names it), 'waiting_on_io' (blocked reading/polling), 'sleeping', 'waiting' (on a "
        "condition or event), 'paused' (all at Strobe breakpoints), or 'running' (moving on: nothing stuck). "
        "diagnosis.threads lists the threads it is about with their own innermost function ('function', 'at' "
        "file:line) and the call they block in. processes[].threads[] is {tid, name, state, cpu (% of a core), "
        "frames (innermost first: 'function at file:line in module')}; a CPython program's Python threads show "
        "their Python frames (py-spy) with the native calls between them. Frida's threads (Strobe's agent) are "
        "listed apart as strobeThreads and not diagnosed; a thread stopped at a breakpoint reads 'paused at "
        f"breakpoint <id>'. At most {MAX_THREADS} threads with stacks. An exited program answers PROCESS_EXITED "
        "(use debug_query for its crash report and events).\n"
        'Example: {"sessionId": "bank-2026-02-05-14h32"} -> {"diagnosis": {"kind": "deadlock", "summary": '
        '"Deadlock: 0% CPU, identical stacks 1.5 s apart; 2 threads waiting for locks in transfer_funds, '
        'audit_ledger.", "threads": [{"tid": 4242, "name": "transfer", "function": "transfer_funds", "at": '
        '"transfer_funds at src/bank.c:18 in bank", "blockedIn": "futex_wait at ... in libc.so.6", "waitsOn": '
        '"lock"}, …]}, "processes": [{"pid": 4240, "command": "bank", "threads": [...], "strobeThreads": [...]}], '
        '"nextSteps": [...]}',
        stacks,
    ),
)
