"""OutputAssembler: byte chunks of a stream in, (timestamp, text) line pieces out."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from strobe.store.output import MAX_LINE_BYTES, PARTIAL_FLUSH_NS, OutputAssembler, decode_output


def _texts(pieces: list[tuple[int, str]]) -> list[str]:
    return [text for _, text in pieces]


# ---- decode_output -------------------------------------------------------------------------------


def test_decode_output_valid_utf8() -> None:
    assert decode_output("héllo €\n".encode()) == "héllo €\n"


def test_decode_output_escapes_invalid_bytes() -> None:
    assert decode_output(b"a\xffb\xc3") == "a\\xffb\\xc3"


# ---- line assembly -------------------------------------------------------------------------------


def test_line_split_across_chunks() -> None:
    asm = OutputAssembler()
    assert asm.feed(b"hel", 10, now_ns=0) == []
    assert asm.has_partial
    assert asm.feed(b"lo", 20, now_ns=0) == []
    assert asm.feed(b" world\n", 30, now_ns=0) == [(10, "hello world\n")]
    assert not asm.has_partial
    assert asm.flush() == []


def test_several_lines_in_one_chunk() -> None:
    asm = OutputAssembler()
    assert asm.feed(b"one\ntwo\n\nthree", 5, now_ns=0) == [(5, "one\n"), (5, "two\n"), (5, "\n")]
    assert asm.has_partial
    assert asm.flush() == [(5, "three")]
    assert not asm.has_partial


def test_utf8_character_split_across_chunks() -> None:
    data = "café €\n".encode()
    euro = data.index("€".encode())
    asm = OutputAssembler()
    # Split inside "é" (2 bytes) and inside "€" (3 bytes).
    split_e = data.index("é".encode()) + 1
    out = asm.feed(data[:split_e], 1, now_ns=0)
    out += asm.feed(data[split_e : euro + 1], 2, now_ns=0)
    out += asm.feed(data[euro + 1 : euro + 2], 3, now_ns=0)
    out += asm.feed(data[euro + 2 :], 4, now_ns=0)
    assert out == [(1, "café €\n")]


def test_invalid_bytes_are_backslash_escaped() -> None:
    asm = OutputAssembler()
    assert asm.feed(b"bad \xff\xfe byte\n", 1, now_ns=0) == [(1, "bad \\xff\\xfe byte\n")]
    # An incomplete sequence right before the newline is escaped, the newline is kept.
    assert asm.feed(b"cut \xe2\x82\n", 2, now_ns=0) == [(2, "cut \\xe2\\x82\n")]


def test_empty_chunk_is_noop() -> None:
    asm = OutputAssembler()
    assert asm.feed(b"", 1, now_ns=0) == []
    assert not asm.has_partial


# ---- partial lines -------------------------------------------------------------------------------


def test_partial_line_flushed_only_when_stale() -> None:
    asm = OutputAssembler()
    assert asm.feed(b"prompt> ", 7, now_ns=1_000) == []
    assert asm.flush_if_stale(1_000) == []
    assert asm.flush_if_stale(1_000 + PARTIAL_FLUSH_NS - 1) == []
    assert asm.has_partial
    assert asm.flush_if_stale(1_000 + PARTIAL_FLUSH_NS) == [(7, "prompt> ")]
    assert not asm.has_partial
    assert asm.flush_if_stale(1_000 + 10 * PARTIAL_FLUSH_NS) == []
    assert asm.flush() == []


def test_staleness_counts_from_first_byte_of_partial() -> None:
    asm = OutputAssembler()
    assert asm.feed(b"a", 1, now_ns=0) == []
    # More bytes of the same partial line do not restart the clock.
    assert asm.feed(b"b", 2, now_ns=PARTIAL_FLUSH_NS - 1) == []
    assert asm.flush_if_stale(PARTIAL_FLUSH_NS) == [(1, "ab")]


def test_new_partial_after_stale_flush_has_its_own_clock_and_timestamp() -> None:
    asm = OutputAssembler()
    asm.feed(b"first", 1, now_ns=0)
    assert asm.flush_if_stale(PARTIAL_FLUSH_NS) == [(1, "first")]
    assert asm.feed(b"second", 50, now_ns=5 * PARTIAL_FLUSH_NS) == []
    assert asm.flush_if_stale(6 * PARTIAL_FLUSH_NS - 1) == []
    assert asm.flush_if_stale(6 * PARTIAL_FLUSH_NS) == [(50, "second")]


def test_no_partial_means_nothing_stale() -> None:
    asm = OutputAssembler()
    asm.feed(b"whole\n", 1, now_ns=0)
    assert asm.flush_if_stale(10 * PARTIAL_FLUSH_NS) == []


def test_flush_emits_partial_line() -> None:
    asm = OutputAssembler()
    asm.feed(b"done\nno newline", 3, now_ns=0)
    assert asm.flush() == [(3, "no newline")]
    assert asm.flush() == []


def test_rest_of_line_after_stale_flush_is_its_own_piece() -> None:
    asm = OutputAssembler()
    asm.feed(b"Name: ", 1, now_ns=0)
    assert asm.flush_if_stale(PARTIAL_FLUSH_NS) == [(1, "Name: ")]
    assert asm.feed(b"bob\n", 9, now_ns=2 * PARTIAL_FLUSH_NS) == [(9, "bob\n")]


# ---- timestamps ----------------------------------------------------------------------------------


def test_line_completed_later_keeps_timestamp_of_first_byte() -> None:
    asm = OutputAssembler()
    assert asm.feed(b"a", 100, now_ns=0) == []
    assert asm.feed(b"b", 200, now_ns=0) == []
    assert asm.feed(b"c\nd\ne", 300, now_ns=0) == [(100, "abc\n"), (300, "d\n")]
    assert asm.feed(b"f\n", 400, now_ns=0) == [(300, "ef\n")]


# ---- long lines ----------------------------------------------------------------------------------


def test_long_line_in_one_chunk_is_cut_into_pieces() -> None:
    line = b"x" * (2 * MAX_LINE_BYTES + MAX_LINE_BYTES // 2) + b"\n"
    asm = OutputAssembler()
    out = asm.feed(line, 42, now_ns=0)
    assert len(out) == 3
    assert all(ts == 42 for ts, _ in out)
    assert all(len(text.encode()) <= MAX_LINE_BYTES for _, text in out)
    assert "".join(_texts(out)) == line.decode()
    assert not asm.has_partial


def test_line_of_exactly_max_bytes_is_one_piece() -> None:
    line = b"y" * (MAX_LINE_BYTES - 1) + b"\n"
    asm = OutputAssembler()
    assert asm.feed(line, 1, now_ns=0) == [(1, line.decode())]


def test_long_multibyte_line_is_not_cut_inside_a_character() -> None:
    text = "€" * MAX_LINE_BYTES + "\n"  # 3 bytes each; MAX_LINE_BYTES is not a multiple of 3
    asm = OutputAssembler()
    out = asm.feed(text.encode(), 5, now_ns=0)
    assert len(out) > 1
    assert all(len(piece.encode()) <= MAX_LINE_BYTES for _, piece in out)
    assert all("\\x" not in piece for _, piece in out)
    assert "".join(_texts(out)) == text


def test_growing_partial_beyond_limit_is_cut_and_reassembles() -> None:
    chunks = [bytes([ord("a") + i % 26]) * 1000 for i in range(20)]  # 20 000 bytes, no newline
    asm = OutputAssembler()
    out: list[tuple[int, str]] = []
    for i, chunk in enumerate(chunks):
        out += asm.feed(chunk, 10 + i, now_ns=0)
    # Pieces come out while the line grows, before any newline or flush.
    assert len(out) == 2
    assert all(len(text.encode()) <= MAX_LINE_BYTES for _, text in out)
    out += asm.feed(b"tail\n", 99, now_ns=0)
    out += asm.flush()
    assert "".join(_texts(out)) == (b"".join(chunks) + b"tail\n").decode()
    assert all(ts == 10 for ts, _ in out)
    assert all(len(text.encode()) <= MAX_LINE_BYTES for _, text in out)


def test_growing_multibyte_partial_beyond_limit_keeps_characters_whole() -> None:
    data = ("é" * 5000).encode()  # 10 000 bytes, no newline
    asm = OutputAssembler()
    out = asm.feed(data, 1, now_ns=0)
    assert len(out) == 1
    out += asm.feed("ü\n".encode(), 2, now_ns=0)
    assert "".join(_texts(out)) == "é" * 5000 + "ü\n"
    assert all("\\x" not in text for _, text in out)
    assert all(ts == 1 for ts, _ in out)


def test_partial_reaching_exactly_max_bytes_mid_character_is_not_split() -> None:
    # A partial that reaches exactly MAX_LINE_BYTES and ends with the first byte of "é": the partial
    # is emitted whole (the `len <= limit` shortcut in _utf8_safe_cut), splitting the character.
    data = b"a" * (MAX_LINE_BYTES - 1) + "é\n".encode()
    asm = OutputAssembler()
    out = asm.feed(data[:MAX_LINE_BYTES], 1, now_ns=0)
    out += asm.feed(data[MAX_LINE_BYTES:], 2, now_ns=0)
    out += asm.flush()
    assert "".join(_texts(out)) == data.decode()


# ---- property ------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(text=st.text(), cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12))
def test_concatenated_pieces_equal_decoded_stream(text: str, cuts: list[int]) -> None:
    data = text.encode("utf-8")
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    asm = OutputAssembler()
    out: list[tuple[int, str]] = []
    for i, (lo, hi) in enumerate(pairwise(points)):
        out += asm.feed(data[lo:hi], i, now_ns=0)
    out += asm.flush()
    assert "".join(_texts(out)) == decode_output(data)
    assert not asm.has_partial
    # Every emitted piece but possibly the last ends a line.
    assert all(piece.endswith("\n") for piece in _texts(out)[:-1])
    # Timestamps never go backwards.
    stamps = [ts for ts, _ in out]
    assert stamps == sorted(stamps)
