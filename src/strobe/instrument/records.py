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
KIND_XMM = 4  # before an enter with FLAG_EXT (same tid, func): a[i] = low 8 bytes of xmm<i>
KIND_STACK = 5  # before an enter with FLAG_EXT: a[i] = the 8 bytes at rsp + 8 + 8 * i on entry
FLAG_SAMPLED = 1
FLAG_NATIVE_WATCH = 2  # the record before (KIND_WATCH) holds native watch values, a[slot]
FLAG_JS_WATCH = 4  # the batch header carries JavaScript watch values under this record's sequence number
FLAG_FOLLOWED = 8  # the batch header carries followed pointer arguments / return value under this sequence number
FLAG_EXT = 16  # enter: KIND_XMM / KIND_STACK records precede it; exit: a[2], a[3], a[4] = rdx, xmm0, xmm1
FLAG_UNFOLLOWED = 32  # the call's pointers were not followed: past its function's follow limit that second
WATCH_CAPTURE_XMM = 0x80  # a function's capture bits (sent with its follow plan): xmm0-5 on entry
WATCH_CAPTURE_STACK = 0x100  # six stack words on entry
WATCH_CAPTURE_RETURN = 0x200  # rdx, xmm0, xmm1 on exit
NO_PARENT = 0xFFFFFFFF


def decode(data: bytes, count: int) -> np.ndarray:
    """The records of one batch; raises ValueError if the payload does not hold `count` records."""
    if len(data) != count * RECORD_SIZE:
        raise ValueError(f"trace batch of {len(data)} bytes does not hold {count} records of {RECORD_SIZE}")
    return np.frombuffer(data, dtype=RECORD_DTYPE, count=count)


WIDE_WORDS = 18  # an enter's stored words with FLAG_EXT: 6 integer registers, xmm0-5, 6 stack words
RETURN_WORDS = 3  # an exit's stored words with FLAG_EXT: rdx, xmm0, xmm1
CARRIED = 3  # records a batch may end with before their call (KIND_XMM, KIND_STACK, KIND_WATCH)


def wide_words(records: np.ndarray, carried: np.ndarray | None) -> np.ndarray | None:
    """For a batch with FLAG_EXT records, every record's words widened to WIDE_WORDS: an enter's integer
    registers, then the KIND_XMM and KIND_STACK words found just before it (same tid and func; in `carried`, the
    previous batch's last records, when the batch opens with the call); an exit's rdx, xmm0, xmm1 in words
    0-2. None when no record of the batch has FLAG_EXT. Zeros where a kind was not captured: the function's
    argument plan, which set its capture bits, says which words mean something."""
    flags = records["flags"]
    marked = np.flatnonzero(flags & FLAG_EXT)
    if not len(marked):
        return None
    n = len(records)
    before = carried if carried is not None else records[:0]
    context = np.concatenate([before, records]) if len(before) else records
    shift = len(before)
    kinds, tids, funcs, words = context["kind"], context["tid"], context["func"], context["a"]
    out = np.zeros((n, WIDE_WORDS), np.int64)
    out[:, :6] = records["a"]
    for i in marked.tolist():
        kind = int(kinds[i + shift])
        if kind == KIND_EXIT:
            out[i, :RETURN_WORDS] = records["a"][i, 2:5]
            continue
        if kind != KIND_ENTER:
            continue
        tid, func = tids[i + shift], funcs[i + shift]
        j = i + shift - 1
        while j >= 0 and j >= i + shift - CARRIED and tids[j] == tid and funcs[j] == func:
            k = int(kinds[j])
            if k == KIND_XMM:
                out[i, 6:12] = words[j]
            elif k == KIND_STACK:
                out[i, 12:18] = words[j]
            elif k != KIND_WATCH:
                break
            j -= 1
    return out


def carried_tail(records: np.ndarray) -> np.ndarray | None:
    """The batch's last records that may belong to a call opening the next batch (capture and watch records),
    copied: what `wide_words` is given with the next batch."""
    tail = records[-CARRIED:]
    keep = 0
    for k in tail["kind"][::-1].tolist():
        if k not in (KIND_XMM, KIND_STACK, KIND_WATCH):
            break
        keep += 1
    return tail[len(tail) - keep:].copy() if keep else None
