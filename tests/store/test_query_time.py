"""Time bounds and canonical JSON of timeline queries."""

from __future__ import annotations

import pytest
from tests.store.query_dataset import (
    MS,
    S,
)

from strobe.store.query import (
    TimeBound,
    canonical_json,
    parse_time,
)

# ---- parse_time ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, TimeBound(0, relative=False)),
        (1_500_000_000, TimeBound(1_500_000_000, relative=False)),
        (-5, TimeBound(-5, relative=True)),
        ("2s", TimeBound(2 * S, relative=False)),
        ("1.5s", TimeBound(1_500_000_000, relative=False)),
        ("-5s", TimeBound(-5 * S, relative=True)),
        ("-500ms", TimeBound(-500 * MS, relative=True)),
        ("-1m", TimeBound(-60 * S, relative=True)),
        ("1h", TimeBound(3600 * S, relative=False)),
        ("250us", TimeBound(250_000, relative=False)),
        ("250µs", TimeBound(250_000, relative=False)),
        ("42ns", TimeBound(42, relative=False)),
        ("42", TimeBound(42, relative=False)),
        ("-42", TimeBound(-42, relative=True)),
        (" - 3 s ", TimeBound(-3 * S, relative=True)),
    ],
)
def test_parse_time(value: int | str, expected: TimeBound) -> None:
    assert parse_time(value) == expected


@pytest.mark.parametrize("value", ["", "abc", "5x", "--5s", "5 sec", "1e3s", "s", "+5s", "1.s"])
def test_parse_time_rejects_bad_strings(value: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_time(value)
    message = str(info.value)
    assert f"'{value}' is not a time" in message
    # The message shows the accepted forms.
    assert '"2s"' in message and '"-5s"' in message and "nanoseconds" in message


def test_time_bound_resolve() -> None:
    assert TimeBound(-5 * S, relative=True).resolve(20 * S) == 15 * S
    assert TimeBound(5 * S, relative=False).resolve(20 * S) == 5 * S


def test_parse_time_decimal_is_exact() -> None:
    assert parse_time("1.001s").ns == 1_001_000_000
    assert parse_time("-1.001s").ns == -1_001_000_000


def test_canonical_json_is_key_sorted_and_compact() -> None:
    assert canonical_json({"b": [1, 2], "a": {"y": 1, "x": None}}) == '{"a":{"x":null,"y":1},"b":[1,2]}'
