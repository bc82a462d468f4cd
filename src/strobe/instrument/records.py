"""Decoding of the agent's binary trace records. Their layout is agent/src/native/layout.ts (the CModule's structs
are checked against it when they compile); tests/instrument/test_protocol_contract.py holds these constants and
RECORD_DTYPE to it."""

from __future__ import annotations

import numpy as np

RECORD_DTYPE = np.dtype(
    [
        ("ts", "<u8"),
        ("tid", "<u4"),
        ("func", "<u4"),
        ("kind", "<u2"),
        ("flags", "<u2"),
        ("parent", "<u4"),
        ("a", "<i8", (6,)),
    ]
)
RECORD_SIZE = RECORD_DTYPE.itemsize
KIND_ENTER = 1
KIND_EXIT = 2
KIND_WATCH = 3  # native watch values of the record just after it: func = that record's, flags = slot mask
FLAG_SAMPLED = 1
FLAG_NATIVE_WATCH = 2  # the record before (KIND_WATCH) holds native watch values, a[slot]
FLAG_JS_WATCH = 4  # the batch header carries JavaScript watch values under this record's sequence number
FLAG_FOLLOWED = 8  # the batch header carries followed pointer arguments / return value under this sequence number
NO_PARENT = 0xFFFFFFFF


def decode(data: bytes, count: int) -> np.ndarray:
    """The records of one batch; raises ValueError if the payload does not hold `count` records."""
    if len(data) != count * RECORD_SIZE:
        raise ValueError(f"trace batch of {len(data)} bytes does not hold {count} records of {RECORD_SIZE}")
    return np.frombuffer(data, dtype=RECORD_DTYPE, count=count)
