"""debug_read of Python state: module globals and attribute chains (`app.config.settings.timeout`) read by the
tracer inside the interpreter (its `eval` command: read statically, never running the program's code), once or
sampled into the timeline by the daemon at the poll's interval."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Sequence
from typing import Any

from strobe.daemon.breakpoint_state import PausedThread
from strobe.daemon.frame_reads import VariableRef, choose_paused
from strobe.daemon.live import LiveSession
from strobe.daemon.memory import READ_TIMEOUT_S, FrameRef, Poll, PreparedRead, snapshot_row
from strobe.daemon.runtimes.base import AgentHandle, Run
from strobe.daemon.runtimes.cpython import python_type, tracer_state

log = logging.getLogger(__name__)

_CHAIN = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
PYTHON_TYPE = "python"


def is_python_chain(expression: str) -> bool:
    """Whether a variable expression reads as a Python module global or attribute chain ('pkg.mod.name.attr')."""
    return _CHAIN.fullmatch(expression.strip()) is not None


def prepare_python(expression: str) -> PreparedRead:
    return PreparedRead(label=expression, type_name=PYTHON_TYPE, size=0, python=expression.strip())


def python_frame_target(paused: Sequence[PausedThread], ref: VariableRef, session_id: str) -> PreparedRead | None:
    """A variable of a thread paused in Python code (a dotted name rooted in one of its frames: `qty`, `acc.total`),
    when `ref` names one: with a frame or thread, or bare while one thread is paused in Python and its innermost
    frame has the name. None when it is not for a Python frame."""
    in_python = [p for p in paused if p.python]
    if not in_python or (ref.pinned and len(in_python) < len(paused) and not any(
            p.tid == ref.thread for p in in_python)):
        return None
    root = ref.expression.strip().split(".", 1)[0]
    if not ref.pinned:
        if len(in_python) != 1 or len(paused) != 1:
            return None
        frames = in_python[0].event.get("backtrace") or [{}]
        if root not in (frames[0].get("locals") or {}):
            return None
    chosen = choose_paused(in_python, ref.thread, session_id)
    if isinstance(chosen, str):
        return PreparedRead(ref.expression, PYTHON_TYPE, 0, error=chosen)
    index = ref.frame or 0
    frames = chosen.event.get("backtrace") or []
    if not is_python_chain(ref.expression) and not ref.expression.strip().isidentifier():
        return PreparedRead(ref.expression, PYTHON_TYPE, 0, error=(
            f"'{ref.expression}' is not a name of a Python frame: give a local's name or a dotted chain from it "
            "('acc.total')."))
    function = frames[index].get("function") if index < len(frames) else None
    frame = FrameRef(chosen.pid, chosen.tid, index, function, chosen)
    return PreparedRead(ref.expression, PYTHON_TYPE, 0, python=ref.expression.strip(), frame=frame)


def _entry(label: str, value: Any) -> dict[str, Any]:
    if isinstance(value, dict) and set(value) == {"__error__"}:
        return {"target": label, "error": str(value["__error__"])}
    return {"target": label, "type": python_type(value), "value": value}


async def evaluate(run: Run[Any], handle: AgentHandle, targets: Sequence[PreparedRead]) -> dict[str, dict[str, Any]]:
    """Each Python target's read, by label: {target, type, value} or {target, error}."""
    tracer = tracer_state(handle)
    if tracer.state != "installed":
        why = tracer.error or "the tracer is not installed yet (the interpreter has not started its program)"
        return {t.label: {"target": t.label, "error": f"Python values cannot be read: {why}."} for t in targets}
    groups: dict[tuple[int, int] | None, list[PreparedRead]] = {}
    for target in targets:  # module globals in one request, each paused frame's names in one of their own
        where = (target.frame.thread, target.frame.frame) if target.frame is not None else None
        groups.setdefault(where, []).append(target)
    out: dict[str, dict[str, Any]] = {}
    for where, group in groups.items():
        exprs = [t.python for t in group if t.python is not None]
        frame = {} if where is None else {"tid": where[0], "frame": where[1]}
        try:
            reply = await tracer.request(run, handle, READ_TIMEOUT_S, "eval", exprs=exprs, **frame)
        except TimeoutError:
            out |= {t.label: {"target": t.label, "error": (
                f"The Python tracer did not answer within {READ_TIMEOUT_S:.0f} s (the interpreter may hold its GIL "
                "in a long C call, or be stopped). Retry.")} for t in group}
            continue
        values = {expr: value for expr, value in reply.get("values", [])}
        for t in group:
            entry = {"target": t.label, "error": str(reply["error"])} if "error" in reply else _entry(
                t.label, values.get(t.python))
            out[t.label] = entry | (t.frame.answer() if t.frame is not None else {})
    return out


async def write_frame_local(run: Run[Any], handle: AgentHandle, target: PreparedRead,
                            value: int | float | bool | str) -> dict[str, Any]:
    """debug_write of a local of a thread paused in Python code: {target, threadId, frame, previousValue,
    newValue} or {..., error}."""
    assert target.frame is not None
    where = {"target": target.label, **target.frame.answer()}
    if target.python is None or not target.python.isidentifier():
        return where | {"error": "Only a local's name can be written in a Python frame (not an attribute chain)."}
    try:
        reply = await tracer_state(handle).request(run, handle, READ_TIMEOUT_S, "set", tid=target.frame.thread,
                                                   frame=target.frame.frame, local=target.python, value=value)
    except TimeoutError:
        return where | {"error": f"The Python tracer did not answer within {READ_TIMEOUT_S:.0f} s. Retry."}
    if "error" in reply:
        return where | {"error": str(reply["error"])}
    return where | {"type": python_type(reply.get("value")), "previousValue": reply.get("previous"),
                    "newValue": reply.get("value")}


async def run_poll(live: LiveSession, run: Run[Any], poll: Poll) -> None:
    """Sample a poll's Python targets every interval until its duration is over or the process is gone; each tick
    is one variable_snapshot event of the launched process."""
    handle, pid, key, writer = live.root.handle, live.root.pid, live.record.key, live.writer
    started = time.monotonic()
    try:
        for tick in range(poll.expected):
            due = started + tick * poll.interval_ms / 1000
            await asyncio.sleep(max(0.0, due - time.monotonic()))  # the poll's own cadence
            if live.root.ended or poll.state != "running":
                break
            read = await evaluate(run, handle, poll.targets)
            values = {label: entry.get("value") if "error" not in entry else {"error": entry["error"]}
                      for label, entry in read.items()}
            writer.submit_rows([snapshot_row(key, pid, time.monotonic_ns() - live.start_ns, values)])
            poll.samples += 1
    except Exception as exc:  # the process went away mid-read, most often
        log.info("session %s: Python poll %d ended: %s", live.record.id, poll.poll_id, exc)
    finally:
        if poll.state == "running":
            poll.state = "complete" if poll.samples >= poll.expected else "process_exited"
