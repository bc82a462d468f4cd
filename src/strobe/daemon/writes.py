"""debug_write: a value written to a global (by name, through the same DWARF resolution as debug_read), a paused
frame's local or parameter (daemon/frame_reads.py), or a raw address, in the launched process, with the value before
and after.

The value is encoded by the target's scalar kind and size (an int that does not fit, a float into an int, a
string: refused with why); the agent writes only into memory mapped writable, after reading the old bytes.
Structs, bit fields and C strings are not written.
"""

from __future__ import annotations

import struct
from typing import Any

from strobe.daemon.memory import PreparedRead
from strobe.daemon.python_reads import write_frame_local
from strobe.daemon.reads import still_paused
from strobe.daemon.registry import LiveSessions
from strobe.daemon.services import Services
from strobe.errors import ValidationError
from strobe.instrument.requests import ReadRecipe, WriteTarget

_FLOATS = {4: "<f", 8: "<d"}


def encode(target: PreparedRead, value: int | float | bool | str) -> bytes:
    """`value` as `target`'s bytes; ValidationError saying why it cannot be."""
    kind, size = target.kind, target.size
    if kind is None:
        raise ValidationError(f"'{target.label}' is a {target.type_name}: only scalars (integers, floats, bools, "
                              "chars, enums, pointers) can be written; write one of its fields ('cfg.limit').")
    if isinstance(value, str):
        try:
            value = int(value, 0) if kind != "float" else float(value)
        except ValueError:
            raise ValidationError(f"'{value}' is not a number for {target.label} ({target.type_name})") from None
    if kind == "float":
        if isinstance(value, bool) or size not in _FLOATS:
            raise ValidationError(f"{target.label} is a {size}-byte {target.type_name}: give a number")
        return struct.pack(_FLOATS[size], float(value))
    if isinstance(value, float):
        if not value.is_integer():
            raise ValidationError(f"{target.label} is an integer type ({target.type_name}): {value} is not an integer")
        value = int(value)
    number = int(value)
    signed = kind in ("int", "char", "enum") and not target.type_name.startswith("unsigned")
    if kind == "bool" and number not in (0, 1):
        raise ValidationError(f"{target.label} is a bool: give true, false, 0 or 1")
    low, high = (-(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1) if signed else (0, (1 << (8 * size)) - 1)
    if not low <= number <= high:
        raise ValidationError(f"{number} does not fit {target.label} ({target.type_name}, {size} bytes: "
                              f"{low}..{high})")
    return number.to_bytes(size, "little", signed=signed)


class SessionWrites:
    def __init__(self, services: Services, sessions: LiveSessions) -> None:
        self._services, self._sessions = services, sessions

    async def write(self, session_id: str, targets: list[tuple[PreparedRead, int | float | bool | str]]
                    ) -> list[dict[str, Any]]:
        """Write each (target, value) in the session's launched process; per-target errors never stop the
        others."""
        live = await self._sessions.require_live(session_id, "writing memory")
        # A paused frame's slot is written only while its thread is still paused there (checked as the write is
        # queued: it runs before any resume).
        targets = list(zip(still_paused(live, [t for t, _ in targets]), [v for _, v in targets], strict=True))
        out: list[dict[str, Any] | None] = [None] * len(targets)
        requests: list[WriteTarget] = []
        sent: list[int] = []
        for i, (target, value) in enumerate(targets):
            if target.error is None and target.python is not None:
                if target.frame is not None:  # a local of a thread paused in Python code: the tracer writes it
                    handle = live.root.handle
                    out[i] = await write_frame_local(self._services.worker.run, handle, target, value)
                else:
                    out[i] = {"target": target.label, "error": "Python module globals are not written yet: pause "
                                                               "a thread and write a local of its frame."}
                continue
            if target.error is not None or target.recipe is None:
                out[i] = {"target": target.label, **_where(target), "error": target.error or "cannot be written"}
                continue
            try:
                data = encode(target, value)
            except ValidationError as exc:
                out[i] = {"target": target.label, **_where(target), "error": exc.message}
                continue
            recipe: ReadRecipe = dict(target.recipe)  # type: ignore[assignment]
            requests.append({"recipe": recipe, "data": data.hex()})
            sent.append(i)
        if requests:
            handle = live.root.handle
            reply = await self._services.worker.run(lambda: handle.write_memory(requests))
            for i, result in zip(sent, reply.results, strict=True):
                target = targets[i][0]
                entry: dict[str, Any] = {"target": target.label, **_where(target), "type": target.type_name}
                if result.address is not None:
                    entry["address"] = result.address
                if result.error is not None:
                    entry["error"] = result.error
                elif target.render is not None:
                    entry["previousValue"] = target.render(bytes.fromhex(result.previous or ""), {}).get("value")
                    entry["newValue"] = target.render(bytes.fromhex(result.current or ""), {}).get("value")
                    if target.frame is not None and target.frame.write_note is not None:
                        entry["warning"] = target.frame.write_note
                out[i] = entry
        return [entry for entry in out if entry is not None]


def _where(target: PreparedRead) -> dict[str, Any]:
    """A paused frame's local: which thread and frame it is in."""
    return target.frame.answer() if target.frame is not None else {}
