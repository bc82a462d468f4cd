"""The capture records of a call (KIND_XMM, KIND_STACK) joined to it by records.wide_words, within a batch and
across a batch boundary, and never to another thread's or function's call."""

from __future__ import annotations

import numpy as np

from strobe.instrument.records import (
    FLAG_EXT,
    FLAG_NATIVE_WATCH,
    KIND_ENTER,
    KIND_EXIT,
    KIND_STACK,
    KIND_WATCH,
    KIND_XMM,
    RECORD_DTYPE,
    WIDE_WORDS,
    carried_tail,
    wide_words,
)


def batch(*rows: tuple[int, int, int, int, list[int]]) -> np.ndarray:
    """Records of (kind, flags, tid, func, words)."""
    out = np.zeros(len(rows), RECORD_DTYPE)
    for i, (kind, flags, tid, func, words) in enumerate(rows):
        out[i]["kind"], out[i]["flags"], out[i]["tid"], out[i]["func"] = kind, flags, tid, func
        out[i]["a"] = [*words, *[0] * (6 - len(words))]
    return out


def test_no_wide_words_without_a_flagged_record() -> None:
    assert wide_words(batch((KIND_ENTER, 0, 1, 2, [1, 2])), None) is None


def test_an_enter_gets_its_xmm_and_stack_words_past_a_native_watch() -> None:
    records = batch(
        (KIND_ENTER, 0, 9, 9, [5]),
        (KIND_XMM, 0, 1, 2, [11, 12]),
        (KIND_STACK, 0, 1, 2, [21, 22, 23]),
        (KIND_WATCH, 0, 1, 2, [99]),
        (KIND_ENTER, FLAG_EXT | FLAG_NATIVE_WATCH, 1, 2, [1, 2]),
        (KIND_EXIT, FLAG_EXT, 1, 2, [7, 100, 8, 9, 10]),
    )
    wide = wide_words(records, None)
    assert wide is not None and wide.shape == (6, WIDE_WORDS)
    assert wide[4].tolist() == [1, 2, 0, 0, 0, 0, 11, 12, 0, 0, 0, 0, 21, 22, 23, 0, 0, 0]
    assert wide[5, :3].tolist() == [8, 9, 10]  # an exit's rdx, xmm0, xmm1


def test_capture_records_of_another_thread_or_function_are_not_taken() -> None:
    records = batch(
        (KIND_XMM, 0, 3, 2, [11]),  # another thread's, its call not committed yet
        (KIND_ENTER, FLAG_EXT, 1, 2, [1]),
        (KIND_XMM, 0, 1, 4, [31]),  # another function's
        (KIND_ENTER, FLAG_EXT, 1, 2, [1]),
    )
    wide = wide_words(records, None)
    assert wide is not None and wide[1, 6] == 0 and wide[3, 6] == 0


def test_a_call_opening_the_next_batch_finds_its_records_in_the_last_one() -> None:
    first = batch((KIND_ENTER, 0, 1, 1, [1]), (KIND_XMM, 0, 1, 2, [41, 42]), (KIND_STACK, 0, 1, 2, [51]))
    tail = carried_tail(first)
    assert tail is not None and len(tail) == 2
    second = batch((KIND_ENTER, FLAG_EXT, 1, 2, [3]))
    wide = wide_words(second, tail)
    assert wide is not None and wide[0, 6:8].tolist() == [41, 42] and wide[0, 12] == 51
    assert carried_tail(second) is None
