"""The JSON the client sees, shaped in one place from the daemon's and the store's typed results."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from strobe.daemon.memory import PollState
from strobe.daemon.runtimes import RuntimeKind, values_for
from strobe.daemon.watches import Watch
from strobe.mcp import sizing
from strobe.settings import SETTING_SPECS
from strobe.store.query import EventRow
from strobe.store.registers import RegisterPlan, words_of
from strobe.store.schema import EventKind
from strobe.store.sessions import ProcessRecord, SessionRecord, SessionStatus


def session(record: SessionRecord) -> dict[str, object]:
    out: dict[str, object] = {
        "sessionId": record.id,
        "binaryPath": record.binary_path,
        "pid": record.pid,
        "startedAt": record.started_at,
        "endedAt": record.ended_at,
        "status": record.status.value,
    }
    if record.status is not SessionStatus.RUNNING:
        out["exitCode"] = record.exit_code
    if record.signal is not None:
        out["signal"] = record.signal
    if record.retained:
        out["retained"] = True
    if record.attached:  # debug_launch {pid}: debug_stop detaches and leaves it running
        out["attached"] = True
    return out


DISK_FULL = ("The disk holding STROBE_HOME is full: events are being lost now. Free space, e.g. with "
             "debug_delete_session on sessions you no longer need; Strobe resumes storing once there is room.")


def loss_warnings(record: SessionRecord, out_of_space: bool) -> list[str]:
    """What a session lost to the store itself: events it could not write, output pushed out by its own cap."""
    warnings = []
    if record.lost:
        warnings.append(
            f"{record.lost:,} events or output lines of this session could not be stored (the disk holding "
            "STROBE_HOME was full or a write failed); they are missing from the timeline. Free disk space (delete "
            "sessions you no longer need with debug_delete_session) so new events are kept."
        )
    if out_of_space:
        warnings.append(DISK_FULL)
    if record.output_trimmed:
        warnings.append(
            f"{record.output_trimmed:,} oldest output lines, crashes or snapshots were dropped by the per-session "
            f"output limit (events.maxOutputPerSession); raise it in {record.project_root}/.strobe/settings.json."
        )
    return warnings


def process(record: ProcessRecord) -> dict[str, object]:
    out: dict[str, object] = {"pid": record.pid, "status": record.status.value}
    if record.parent_pid is not None:
        out["parentPid"] = record.parent_pid
    if record.binary_path:
        out["binaryPath"] = record.binary_path
    if record.status is not SessionStatus.RUNNING:
        out["exitCode"] = record.exit_code
    if record.signal is not None:
        out["signal"] = record.signal
    return out


def watch(w: Watch) -> dict[str, object]:
    out: dict[str, object] = {"label": w.label}
    if w.spec.variable is not None:
        out["variable"] = w.spec.variable
    if w.spec.address is not None:
        out["address"] = w.spec.address
    if w.spec.expr is not None:
        out["expr"] = w.spec.expr
    if w.read is not None:
        out["type"] = w.read.type_name
        out["size"] = w.read.size
    if w.spec.on is not None:
        out["on"] = list(w.spec.on)
    return out


def poll(state: PollState) -> dict[str, object]:
    return {
        "pollId": state.poll_id, "targets": list(state.targets), "intervalMs": state.interval_ms,
        "durationMs": state.duration_ms, "expectedSamples": state.expected, "samples": state.samples,
        "state": state.state,
    }


MAX_EVENT_BYTES = next(spec.default for spec in SETTING_SPECS if spec.key == "query.maxEventBytes")
_OUTPUT = (EventKind.STDOUT, EventKind.STDERR)
_NOT_FOLLOWED = ("its pointers show addresses: past its function's first 1,000 calls this second, pointers are not "
                 "followed (a call recorded within them shows what they point to)")
_VALUE_KEYS = frozenset({"arguments", "returnValue", "watchValues", "values", "locals"})


def event(row: EventRow, session_id: str, verbose: bool, limit: int = MAX_EVENT_BYTES) -> dict[str, Any]:
    """One timeline event (debug_query): a summary, or with `verbose` its threads, parent, arguments, return
    value and extras; fields without a value are left out. Crashes always show every detail, variable
    snapshots always their values. Arguments and return values show through the function's register plan when
    it has one, otherwise through the runtime's values (raw registers). Values that make the event's JSON
    longer than `limit` bytes are cut (mcp/sizing.py); output lines are not (they are split at 8 KiB)."""
    out = _event(row, session_id, verbose)
    if row.kind in _OUTPUT or (_VALUE_KEYS.isdisjoint(out) and "backtrace" not in out):
        return out  # nothing that can be cut: a summary, an output line
    size = sizing.measure(out)
    if size <= limit:
        return out
    python = row.runtime != RuntimeKind.NATIVE.value
    if row.kind is EventKind.CRASH:
        marks = sizing.Marks()  # the process is gone: nothing to debug_read
    elif row.kind in (EventKind.PAUSE, EventKind.LOGPOINT):
        marks = sizing.Marks(_namer(out, nested=lambda name: "."))
    elif row.kind is EventKind.VARIABLE_SNAPSHOT:
        marks = sizing.Marks(_namer(out, nested=lambda name: "."), "a smaller depth")
    else:
        nested = (lambda name: ".") if python else sizing.arrows(sizing.pointer_fields(out), "->")
        marks = sizing.Marks(_namer(out, nested), "a smaller serializationDepth")
    return sizing.trim(out, limit, _values_rule, marks, size)


def paused(answer: dict[str, Any], limit: int) -> dict[str, Any]:
    """A paused thread as debug_continue shows it (a step's end, stillPaused), its values cut to `limit` bytes."""
    size = sizing.measure(answer)
    if size <= limit:
        return answer
    return sizing.trim(answer, limit, _values_rule, sizing.Marks(_namer(answer, nested=lambda name: ".")), size)


def read_result(result: dict[str, Any], limit: int) -> dict[str, Any]:
    """One debug_read result ({target, type, value | fields, ...}), its value cut to `limit` bytes."""
    size = sizing.measure(result)
    if size <= limit:
        return result
    target = result.get("target")

    def name(path: sizing.Path) -> str | None:
        expression = sizing.spell(target, result, path, ".", lambda field: ".") if isinstance(target, str) else None
        if expression is None or not isinstance(result.get("frame"), int):
            return sizing.quoted(expression)
        return f"{{variable: '{expression}', frame: {result['frame']}}}"

    def rule(path: sizing.Path) -> sizing.Mode:
        return "open" if not path else ("cut" if path[0] in ("value", "fields") else "keep")

    return sizing.trim(result, limit, rule, sizing.Marks(name, "a smaller depth"), size)


def _values_rule(path: sizing.Path) -> sizing.Mode:
    """What an event may lose: its values (arguments, return value, watch values, locals, each backtrace frame's
    locals), never where it happened (ids, function, backtrace addresses, registers, frame memory, last events)."""
    if not path:
        return "open"
    if path[0] in _VALUE_KEYS:
        return "cut"
    if path[0] == "backtrace":
        if len(path) <= 2:
            return "open"
        return "cut" if path[2] == "locals" else "keep"
    return "keep"


def _namer(out: dict[str, Any], nested: Callable[[str], str]) -> Callable[[sizing.Path], str | None]:
    """The debug_read target of a value inside an event, for its markers: an argument by its name ('->' after a
    pointer parameter), a local, a watch or a snapshot's target by its label, a caller's local with its frame."""
    names = out.get("argumentNames")
    types = out.get("argumentTypes")

    def name(path: sizing.Path) -> str | None:
        if len(path) < 2:
            return None
        head, key, steps = path[0], path[1], path[2:]
        holder = out.get(head) if isinstance(head, str) else None
        first = "."
        if head == "arguments" and isinstance(key, int):
            if not isinstance(names, list) or key >= len(names):
                return None
            root = str(names[key])
            if isinstance(types, list) and key < len(types) and str(types[key]).rstrip().endswith("*"):
                first = "->"
        elif head in _VALUE_KEYS and isinstance(key, str):
            root = key
        elif head == "backtrace" and isinstance(key, int) and len(path) >= 4 and path[2] == "locals":
            frame = holder[key] if isinstance(holder, list) and key < len(holder) else None
            local = path[3]
            if not isinstance(frame, dict) or not isinstance(local, str):
                return None
            expression = sizing.spell(local, frame.get("locals", {}).get(local), path[4:], ".", nested)
            return None if expression is None else f"{{variable: '{expression}', frame: {key}}}"
        else:
            return None
        value = holder.get(key) if isinstance(holder, dict) else None
        if isinstance(holder, list) and isinstance(key, int) and key < len(holder):
            value = holder[key]
        return sizing.quoted(sizing.spell(root, value, steps, first, nested))

    return name


def _event(row: EventRow, session_id: str, verbose: bool) -> dict[str, Any]:
    kind = row.kind
    is_function = kind in (EventKind.FUNCTION_ENTER, EventKind.FUNCTION_EXIT)
    values = values_for(RuntimeKind(row.runtime))
    out: dict[str, Any] = {"id": f"{session_id}-{row.id}", "eventType": kind.wire_name, "timestampNs": row.ts}
    plan = row.plan if is_function else None
    if is_function:
        if row.function is not None:
            out["function"] = row.function
        if row.source_file is not None:
            out["sourceFile"] = row.source_file
        if row.line is not None:
            out["line"] = row.line
        if row.duration is not None:
            out["durationNs"] = row.duration
        if kind is EventKind.FUNCTION_EXIT:
            out["returnType"] = plan.return_type if plan is not None else values.return_type(row.retval)
    if row.text is not None:
        out["text"] = row.text
    if kind in (EventKind.CRASH, EventKind.PAUSE, EventKind.LOGPOINT):  # every detail, verbose or not
        out.update(pid=row.pid, threadId=row.tid, threadName=row.thread_name)
        out.update(row.extra or {})
        return _present(out)
    args = row.args
    if kind is EventKind.VARIABLE_SNAPSHOT:
        out["values"] = None if args is None else json.loads(args)  # shown without verbose too
        if not verbose:
            return out
        args = None
    if not verbose:
        return out
    extra = dict(row.extra or {})
    followed = extra.pop("followed", None)
    out.update(
        functionRaw=row.function_raw,
        threadId=row.tid,
        threadName=row.thread_name,
        pid=row.pid,
        parentEventId=None if row.parent is None else f"{session_id}-{row.parent}",
        arguments=values.arguments(args),
        argumentNames=values.argument_names(args) if kind is EventKind.FUNCTION_ENTER else None,
        returnValue=values.return_value(row.retval),
        watchValues=extra.pop("watchValues", None),
        sampled=row.sampled,
        notFollowed=_NOT_FOLLOWED if row.unfollowed else None,
    )
    out.update(extra)
    shown = _present(out)
    if plan is not None:
        _typed(shown, plan, kind, args, row.retval, followed if isinstance(followed, dict) else {})
    return shown


def _present(out: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in out.items() if v is not None}


def _typed(
    out: dict[str, Any], plan: RegisterPlan, kind: EventKind, args: bytes | str | None, retval: Any,
    followed: dict[str, Any],
) -> None:
    """Arguments and return value through the function's register plan: values in parameter order with
    their names and DWARF types; the return value by its type (none for void; a null pointer shows as null).
    Pointers the agent followed at call time (daemon/follow.py) show what they pointed to instead."""
    if kind is EventKind.FUNCTION_ENTER and (args is None or isinstance(args, bytes)):
        if plan.names:
            arguments = plan.arguments(words_of(args))
            for key, value in followed.items():
                if key.isdigit() and int(key) < len(arguments):
                    arguments[int(key)] = value
            out.update(arguments=arguments, argumentNames=plan.names, argumentTypes=plan.types)
        else:
            out.pop("arguments", None)
    elif kind is EventKind.FUNCTION_EXIT and (retval is None or isinstance(retval, int)):
        out.pop("returnValue", None)
        out.pop("arguments", None)  # an exit's stored words are its rdx, xmm0 and xmm1, read through the plan
        if plan.returns_value and retval is not None:
            words = words_of(args) if isinstance(args, bytes) else []
            out["returnValue"] = followed.get("r", plan.return_value(retval, words))
