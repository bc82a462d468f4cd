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

from strobe.daemon.live import LiveSession
from strobe.daemon.memory import READ_TIMEOUT_S, Poll, PreparedRead, snapshot_row
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
    exprs = [t.python for t in targets if t.python is not None]
    try:
        reply = await tracer.request(run, handle, READ_TIMEOUT_S, "eval", exprs=exprs)
    except TimeoutError:
        return {t.label: {"target": t.label, "error": (
            f"The Python tracer did not answer within {READ_TIMEOUT_S:.0f} s (the interpreter may hold its GIL in "
            "a long C call, or be stopped). Retry.")} for t in targets}
    values = {expr: value for expr, value in reply.get("values", [])}
    if "error" in reply:
        return {t.label: {"target": t.label, "error": str(reply["error"])} for t in targets}
    return {t.label: _entry(t.label, values.get(t.python)) for t in targets}


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
