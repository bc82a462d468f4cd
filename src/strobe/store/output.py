"""Turn a target's stdout/stderr byte chunks into whole-line events.

Chunks arrive split anywhere (mid-line, mid-UTF-8 sequence). Lines are cut on b"\\n" and decoded as
UTF-8 with backslash escapes for invalid bytes, so concatenating the texts gives the stream back.
A line longer than MAX_LINE_BYTES is cut into several events; a partial line is emitted once it has
waited PARTIAL_FLUSH_NS (a prompt without a newline still shows up) or when the stream ends.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

MAX_LINE_BYTES = 8 * 1024
PARTIAL_FLUSH_NS = 100_000_000


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
                head = _utf8_safe_cut(bytes(self._partial), MAX_LINE_BYTES)
                out.append((self._partial_ts, decode_output(head)))
                del self._partial[: len(head)]
        return out

    def flush_if_stale(self, now_ns: int) -> list[tuple[int, str]]:
        """Emit a partial line that has waited long enough (`now_ns`: monotonic clock)."""
        if self._partial and now_ns - self._partial_since >= PARTIAL_FLUSH_NS:
            return self.flush()
        return []

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
            head = _utf8_safe_cut(line, MAX_LINE_BYTES)
            pieces.append((ts_ns, decode_output(head)))
            line = line[len(head) :]
        return pieces


def _utf8_safe_cut(data: bytes, limit: int) -> bytes:
    """The longest prefix of at most `limit` bytes that does not end inside a UTF-8 sequence."""
    if len(data) <= limit:
        return data
    cut = limit
    # Back off over continuation bytes (10xxxxxx), at most 3, so a character is not split.
    while cut > limit - 4 and cut > 0 and (data[cut] & 0xC0) == 0x80:
        cut -= 1
    return data[:cut] if cut > 0 else data[:limit]
