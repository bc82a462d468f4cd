"""A function_enter's or function_exit's values for the exporters, exactly as debug_query's verbose events show them
(mcp/wire.py), without building the whole wire event for each of a million rows.

Per function (by its `functions` key) the name, source file, line, parsed register plan and value renderer are read
once. A row's values are rendered the way wire.event renders them, and only the fields a slice's args hold come
back. When the whole wire event could be over the size limit (so wire.event would cut its values), or the row has
something unusual (extra fields that stand in for the wire's own, an output text), the row goes through
wire.event itself: the values are the same either way.

    renderer = CallValues(conn, session_id, max_event_bytes, thread_names)
    fn = renderer.function(row.func)
    args = renderer.enter(row, fn)                     # arguments, argumentNames, ..., sourceFile, line, id
    ret, location = renderer.exit(row, fn)             # returnValue, returnType, ...; {sourceFile, line, id}
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from strobe.daemon.runtimes import RuntimeKind, ValueRenderer, values_for
from strobe.mcp import sizing, wire
from strobe.store.query import EventRow
from strobe.store.registers import RegisterPlan, parse_plan, words_of
from strobe.store.schema import EventKind

ENTER_KEYS = ("arguments", "argumentNames", "argumentTypes", "watchValues", "sampled", "notFollowed", "resumed",
              "trimmed")
EXIT_KEYS = ("returnValue", "returnType", "exception", "yielded", "watchValues", "trimmed")
LOCATION_KEYS = ("sourceFile", "line")
COLUMNS = "e.id, e.ts, e.kind, e.pid, e.tid, e.parent, e.duration, e.retval, e.sampled, e.text, e.args, e.extra, e.func"
"""The events columns a `Row` holds, in order."""

# Fields wire.event sets itself: an extra field of the same name replaces them there, so such rows take its path.
_WIRE_OWN = frozenset({
    "id", "eventType", "timestampNs", "function", "sourceFile", "line", "durationNs", "returnType", "text",
    "functionRaw", "threadId", "threadName", "pid", "parentEventId", "arguments", "argumentNames", "argumentTypes",
    "returnValue", "sampled", "notFollowed",
})
_NUMBER = 21  # the most characters an int64 takes in JSON (and a separator)
# Every key of a verbose function event with its quotes, colon and comma, the braces, the fixed-size values
# (event type, timestamps, ids' numbers, line, pid, tid, sampled) at their largest, and the notFollowed text.
_FIXED = (2 + sum(len(key) + 4 for key in _WIRE_OWN) + len('"function_enter"') + 8 * _NUMBER + len("false")
          + sizing.measure(wire._NOT_FOLLOWED))


class Row(NamedTuple):
    """One events row as `COLUMNS` selects it."""

    id: int
    ts: int
    kind: int
    pid: int | None
    tid: int | None
    parent: int | None
    duration: int | None
    retval: int | float | str | None
    sampled: int | None
    text: str | None
    args: bytes | str | None
    extra: str | None
    func: int | None


@dataclass(frozen=True)
class Function:
    """What every event of one function shares."""

    name: str | None
    raw: str | None
    file: str | None
    line: int | None
    plan: RegisterPlan | None
    runtime: str
    values: ValueRenderer
    location: dict[str, Any]  # sourceFile and line, those it has
    key: tuple[str | None, str | None]  # (name, file): what pairs an exit with its enter
    size: int  # the most its name, raw name and file add to an event's JSON


_KIND_OF = {int(k): k for k in EventKind}


def kind_of(code: int) -> EventKind:
    return _KIND_OF.get(code) or EventKind(code)  # raises on a kind this version does not know


class CallValues:
    """Renders the function events of one session (see the module's docstring); caches per function."""

    def __init__(self, conn: sqlite3.Connection, session_id: str, limit: int,
                 thread_names: dict[tuple[int, int], str]) -> None:
        self._conn = conn
        self._session_id = session_id
        self._prefix = f"{session_id}-"
        self._limit = limit
        self._thread_names = thread_names
        self._fixed = _FIXED + 2 * sizing.measure(session_id)
        self._functions: dict[int | None, Function] = {}
        self._plans: dict[str, RegisterPlan | None] = {}
        self._thread_sizes: dict[tuple[int | None, int | None], int] = {}

    def function(self, key: int | None) -> Function:
        fn = self._functions.get(key)
        if fn is None:
            found = None if key is None else self._conn.execute(
                "SELECT name, raw, file, line, signature, runtime FROM functions WHERE key = ?", (key,)).fetchone()
            name, raw, file, line, signature, runtime = found or (None, None, None, None, None, None)
            plan = None
            if signature is not None:
                if signature not in self._plans:
                    self._plans[signature] = parse_plan(signature)
                plan = self._plans[signature]
            runtime = runtime or "native"
            location = {k: v for k, v in zip(LOCATION_KEYS, (file, line), strict=True) if v is not None}
            fn = self._functions[key] = Function(name, raw, file, line, plan, runtime,
                                                 values_for(RuntimeKind(runtime)), location,
                                                 (name, file), sizing.measure([name, raw, file]))
        return fn

    def event_row(self, row: Row, kind: EventKind, fn: Function) -> EventRow:
        """The row as store/query.py types it, for wire.event."""
        extra = None if row.extra is None else json.loads(row.extra)
        sampled = row.sampled
        return EventRow(
            id=row.id, ts=row.ts, kind=kind, pid=row.pid, tid=row.tid, parent=row.parent, duration=row.duration,
            retval=row.retval, sampled=None if sampled is None else bool(sampled & 1),
            unfollowed=bool(sampled and sampled & 2), text=row.text, args=row.args,
            extra=extra if isinstance(extra, dict) else None, function=fn.name, function_raw=fn.raw,
            source_file=fn.file, line=fn.line, thread_name=self._thread_name(row),
            plan=fn.plan, runtime=fn.runtime,
        )

    def shown(self, row: Row, kind: EventKind, fn: Function) -> dict[str, Any]:
        """The whole verbose wire event of the row (wire.event)."""
        return wire.event(self.event_row(row, kind, fn), self._session_id, True, self._limit)

    def enter(self, row: Row, fn: Function) -> dict[str, Any]:
        """A call's args from its enter: ENTER_KEYS, then sourceFile, line and id, those the event shows."""
        fast = self._render(row, fn, True)
        if fast is None:
            shown = self.shown(row, EventKind.FUNCTION_ENTER, fn)
            args = {k: shown[k] for k in ENTER_KEYS if k in shown}
            args.update((k, shown[k]) for k in LOCATION_KEYS if k in shown)
            args["id"] = shown["id"]
            return args
        fast.update(fn.location)
        fast["id"] = self._prefix + str(row.id)
        return fast

    def exit(self, row: Row, fn: Function) -> tuple[dict[str, Any], dict[str, Any]]:
        """What a call's exit adds to its args (EXIT_KEYS), and where it is ({sourceFile, line, id})."""
        fast = self._render(row, fn, False)
        if fast is None:
            shown = self.shown(row, EventKind.FUNCTION_EXIT, fn)
            location = {k: shown[k] for k in LOCATION_KEYS if k in shown}
            location["id"] = shown["id"]
            return {k: shown[k] for k in EXIT_KEYS if k in shown}, location
        return fast, {**fn.location, "id": self._prefix + str(row.id)}

    def _thread_name(self, row: Row) -> str | None:
        if row.tid is None or row.pid is None:
            return None
        return self._thread_names.get((row.pid, row.tid))

    def _thread_size(self, row: Row) -> int:
        key = (row.pid, row.tid)
        size = self._thread_sizes.get(key)
        if size is None:
            size = self._thread_sizes[key] = sizing.measure(self._thread_name(row))
        return size

    def _render(self, row: Row, fn: Function, enter: bool) -> dict[str, Any] | None:
        """The export's fields of the row as wire.event shows them (ENTER_KEYS or EXIT_KEYS, in that order), or None
        when only wire.event can tell: values it may cut, extra fields standing in for its own, an output text."""
        if row.text is not None:
            return None
        extra: dict[str, Any] = {}
        if row.extra is not None:
            parsed = json.loads(row.extra)
            if isinstance(parsed, dict):
                extra = parsed
                if not _WIRE_OWN.isdisjoint(extra):
                    return None
        followed = extra.pop("followed", None)
        watch = extra.pop("watchValues", None)
        values, plan, args, retval = fn.values, fn.plan, row.args, row.retval
        arguments: Any = None
        names: Any = None
        types: Any = None
        returned: Any = None
        return_type: str
        if enter:
            if plan is not None and (args is None or isinstance(args, bytes)):
                if plan.names:
                    arguments = plan.arguments(words_of(args))
                    if isinstance(followed, dict):
                        for key, value in followed.items():
                            if key.isdigit() and int(key) < len(arguments):
                                arguments[int(key)] = value
                    names, types = plan.names, plan.types
                else:
                    names = values.argument_names(args)
            else:
                arguments = values.arguments(args)
                names = values.argument_names(args)
            return_type = ""
        else:
            return_type = plan.return_type if plan is not None else values.return_type(retval)
            if plan is not None and (retval is None or isinstance(retval, int)):
                if plan.returns_value and retval is not None:
                    if isinstance(followed, dict) and "r" in followed:
                        returned = followed["r"]
                    else:
                        returned = plan.return_value(retval, words_of(args) if isinstance(args, bytes) else [])
                    if returned is None:
                        returned = _NULL  # a null pointer: shown as null, not left out
            else:
                returned = values.return_value(retval)
                arguments = values.arguments(args)  # shown by debug_query (not here): counts towards its size
        extra = {k: v for k, v in extra.items() if v is not None}
        room = self._limit - self._fixed - fn.size - self._thread_size(row)
        if not _fits([arguments, names, types, None if returned is _NULL else returned, return_type, watch, extra],
                     room):
            return None
        sampled = row.sampled
        out: dict[str, Any] = {}
        keys: tuple[str, ...]
        if enter:
            if arguments is not None:
                out["arguments"] = arguments
            if names is not None:
                out["argumentNames"] = names
            if types is not None:
                out["argumentTypes"] = types
            if watch is not None:
                out["watchValues"] = watch
            if sampled is not None:
                out["sampled"] = bool(sampled & 1)
            if sampled and sampled & 2:
                out["notFollowed"] = wire._NOT_FOLLOWED
            keys = ENTER_KEYS[6:]
        else:
            if returned is not None:
                out["returnValue"] = None if returned is _NULL else returned
            out["returnType"] = return_type
            keys = EXIT_KEYS[2:4]
            if watch is not None:
                extra["watchValues"] = watch  # after exception and yielded, as EXIT_KEYS orders them
                keys = EXIT_KEYS[2:5]
            keys = (*keys, "trimmed")
        for key in keys:
            if key in extra:
                out[key] = extra[key]
        return out


def _fits(value: list[Any], room: int) -> bool:
    """Whether `sizing.measure(value) <= room`, mostly told from orjson's spelling, which is much quicker: a non-ASCII
    character is at most 3 times as long escaped; a number with '.' or 'e' may be a float, spelled at most 21
    characters longer by Python (1e15 is 1000000000000000.0); a null may be a NaN or an infinity (-Infinity)."""
    try:
        data = orjson.dumps(value)
    except TypeError:
        return sizing.measure(value) <= room
    size = len(data) if data.isascii() else 3 * len(data)
    if size + 21 * (data.count(b".") + data.count(b"e")) + 5 * data.count(b"null") <= room:
        return True
    return sizing.measure(value) <= room


_NULL: Any = object()  # a returned value shown as null (wire leaves a None out, except a plan's null pointer)
