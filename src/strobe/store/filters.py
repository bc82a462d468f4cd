"""debug_query's filter as the store takes it, and the times it accepts ("2s" since start, "-5s" before the
latest event)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from strobe.store.schema import EventKind

_TIME_RE = re.compile(r"^\s*(-)?\s*(\d+(?:\.\d+)?)\s*(ns|us|µs|ms|s|m|h)?\s*$")
_UNIT_NS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "m": 60_000_000_000,
            "h": 3_600_000_000_000}

UNSET: Any = object()


@dataclass(frozen=True)
class TimeBound:
    """A point on the session's clock: absolute ns since start, or relative to the latest event."""

    ns: int
    relative: bool

    def resolve(self, latest_ns: int) -> int:
        return latest_ns + self.ns if self.relative else self.ns


def parse_time(value: int | str) -> TimeBound:
    """`123456` or `"2s"` are absolute (since session start); `"-5s"`, `"-500ms"` count back from the
    latest event. Units: ns, us, ms, s, m, h (default ns)."""
    if isinstance(value, int):
        if value < 0:
            return TimeBound(value, relative=True)
        return TimeBound(value, relative=False)
    match = _TIME_RE.match(value)
    if match is None:
        raise ValueError(
            f"'{value}' is not a time: use nanoseconds since session start (e.g. 1500000000), a duration "
            "since start like \"2s\", or a time relative to the latest event like \"-5s\", \"-500ms\", \"-1m\""
        )
    sign, number, unit = match.groups()
    ns = int(Decimal(number) * _UNIT_NS[unit or "ns"])
    return TimeBound(-ns if sign else ns, relative=bool(sign))


@dataclass(frozen=True)
class TextMatch:
    equals: str | None = None
    contains: str | None = None
    matches: str | None = None  # regular expression (Python syntax), searched anywhere


@dataclass(frozen=True)
class EventFilter:
    kind: EventKind | None = None
    function: TextMatch | None = None
    source_file: TextMatch | None = None
    return_equals: Any = UNSET
    return_is_null: bool | None = None
    thread_name_contains: str | None = None
    time_from: TimeBound | None = None
    time_to: TimeBound | None = None
    min_duration_ns: int | None = None
    pid: int | None = None
