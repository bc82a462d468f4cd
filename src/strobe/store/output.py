"""Turn a target's stdout/stderr byte chunks into whole-line events.

Chunks arrive split anywhere (mid-line, mid-UTF-8 sequence). Lines are cut on b"\\n" and decoded as
UTF-8 with backslash escapes for invalid bytes, so concatenating the texts gives the stream back.
A line longer than MAX_LINE_BYTES is cut into several events; a partial line is emitted once it has
waited PARTIAL_FLUSH_NS (a prompt without a newline still shows up; long enough that a busy machine
pausing between two chunks of one line does not split it) or when the stream ends.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

MAX_LINE_BYTES = 8 * 1024
PARTIAL_FLUSH_NS = 500_000_000


def decode_output(data: bytes) -> str:
    return data.decode("utf-8", errors="backslashreplace")


@dataclass
class OutputAssembler:
    """Line assembly for one (process, stream). Returns (timestamp_ns, text) pieces ready to store."""

    _partial: bytearray = field(default_factory=bytearray)
    _partial_ts: int = 0
    _partial_since: int = 0

    def feed(self, data: bytes, ts_ns: int, now_ns: int | None = None) -> list[tuple[int, str]]:
        """Add a chunk seen at `ts_ns` (session time); `now_ns` is the monotonic clock for staleness."""
        out: list[tuple[int, str]] = []
        start = 0
        while True:
            newline = data.find(b"\n", start)
            if newline < 0:
                break
            piece = data[start : newline + 1]
            if self._partial:
                self._partial += piece
                out.extend(self._cut(bytes(self._partial), self._partial_ts))
                self._partial.clear()
            else:
                out.extend(self._cut(piece, ts_ns))
            start = newline + 1
        rest = data[start:]
        if rest:
            if not self._partial:
                self._partial_ts = ts_ns
                self._partial_since = time.monotonic_ns() if now_ns is None else now_ns
            self._partial += rest
            while len(self._partial) >= MAX_LINE_BYTES:
                n = complete_prefix(self._partial, MAX_LINE_BYTES)
                out.append((self._partial_ts, decode_output(bytes(self._partial[:n]))))
                del self._partial[:n]
        return out

    def flush_if_stale(self, now_ns: int) -> list[tuple[int, str]]:
        """Emit a partial line that has waited long enough (`now_ns`: monotonic clock). A character
        whose bytes have not all arrived yet stays behind for the next chunk."""
        if not self._partial or now_ns - self._partial_since < PARTIAL_FLUSH_NS:
            return []
        n = complete_prefix(self._partial, len(self._partial))
        if n == 0:
            return []
        text = decode_output(bytes(self._partial[:n]))
        del self._partial[:n]
        self._partial_since = now_ns
        return [(self._partial_ts, text)]

    def flush(self) -> list[tuple[int, str]]:
        if not self._partial:
            return []
        text = decode_output(bytes(self._partial))
        self._partial.clear()
        return [(self._partial_ts, text)]

    @property
    def has_partial(self) -> bool:
        return bool(self._partial)

    @staticmethod
    def _cut(line: bytes, ts_ns: int) -> list[tuple[int, str]]:
        if len(line) <= MAX_LINE_BYTES:
            return [(ts_ns, decode_output(line))]
        pieces: list[tuple[int, str]] = []
        while line:
            n = complete_prefix(line, MAX_LINE_BYTES)
            pieces.append((ts_ns, decode_output(line[:n])))
            line = line[n:]
        return pieces


def _sequence_length(lead: int) -> int:
    if lead < 0x80:
        return 1
    if lead >> 5 == 0b110:
        return 2
    if lead >> 4 == 0b1110:
        return 3
    if lead >> 3 == 0b11110:
        return 4
    return 1  # not a valid lead byte: it stands alone


def complete_prefix(data: bytes | bytearray, limit: int) -> int:
    """Length of the longest prefix of at most `limit` bytes that does not end inside a UTF-8 character.

    Invalid UTF-8 is cut anywhere; a character is only held back if that leaves something to emit.
    """
    cut = min(len(data), limit)
    lead = cut - 1
    while lead >= 0 and lead > cut - 4 and (data[lead] & 0xC0) == 0x80:
        lead -= 1
    if lead < 0 or (data[lead] & 0xC0) == 0x80:
        return cut  # only continuation bytes: not a character to protect
    if lead + _sequence_length(data[lead]) <= cut:
        return cut
    return lead if lead > 0 else cut
