"""Which events a session keeps: per session, one FIFO per lane (trace events; output lines, crashes and
snapshots), each a list of id ranges oldest first, so trimming is a primary-key range delete. Run by the writer."""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass, field

from strobe.store import counts
from strobe.store.schema import EventKind

DEFAULT_MAX_EVENTS = 200_000
DEFAULT_MAX_OUTPUT = 100_000
TRACE_LANE, OUTPUT_LANE = 0, 1
OUTPUT_LANE_KINDS = frozenset({int(EventKind.STDOUT), int(EventKind.STDERR), int(EventKind.CRASH),
                               int(EventKind.VARIABLE_SNAPSHOT), int(EventKind.PAUSE)})
"""Kinds with a FIFO of their own per session (the output lane): trace events never evict them."""

FifoKey = tuple[int, int]
"""(session, lane)."""


def lane_of(kind: int) -> int:
    return OUTPUT_LANE if kind in OUTPUT_LANE_KINDS else TRACE_LANE


@dataclass
class SessionFifo:
    """Which id ranges a session owns, oldest first, so trimming deletes by primary-key range."""

    limit: int = DEFAULT_MAX_EVENTS
    count: int = 0
    ranges: deque[list[int]] = field(default_factory=deque)
    blocks: list[counts.BlockCells] = field(default_factory=list)  # of the trace blocks still stored, by first id

    def add(self, first_id: int, n: int) -> None:
        """Record ids first_id..first_id+n-1. Ids are reserved before they are written, so a block can
        arrive after a higher one; ranges stay sorted so the oldest ids are trimmed first."""
        self.count += n
        new = [first_id, first_id + n - 1]
        if not self.ranges or self.ranges[-1][1] < first_id:
            last = self.ranges[-1] if self.ranges else None
            if last is not None and last[1] + 1 == first_id:
                last[1] = new[1]
            else:
                self.ranges.append(new)
            return
        position = bisect.bisect_left([r[0] for r in self.ranges], first_id)
        self.ranges.insert(position, new)

    def add_block(self, cells: counts.BlockCells) -> None:
        if self.blocks and self.blocks[-1].first_id > cells.first_id:
            bisect.insort(self.blocks, cells, key=lambda b: b.first_id)
        else:
            self.blocks.append(cells)

    def blocks_within(self, lo: int, hi: int) -> list[counts.BlockCells]:
        """The blocks with ids in lo..hi; those that end by `hi` are forgotten (trimming goes oldest first, so
        nothing of theirs remains)."""
        found = []
        for block in self.blocks:
            if block.first_id > hi:
                break
            if block.last_id >= lo:
                found.append(block)
        gone = 0
        while gone < len(self.blocks) and self.blocks[gone].last_id <= hi:
            gone += 1
        del self.blocks[:gone]
        return found

    def snapshot(self) -> SessionFifo:
        """A copy to put back if the transaction that changes this one fails."""
        return SessionFifo(self.limit, self.count, deque([r[:] for r in self.ranges]), list(self.blocks))

    def take_excess(self) -> list[tuple[int, int]]:
        """Id ranges to delete so that `count` is back at `limit`."""
        excess = self.count - self.limit
        doomed: list[tuple[int, int]] = []
        while excess > 0 and self.ranges:
            lo, hi = self.ranges[0]
            size = hi - lo + 1
            if size <= excess:
                doomed.append((lo, hi))
                self.ranges.popleft()
                excess -= size
                self.count -= size
            else:
                doomed.append((lo, lo + excess - 1))
                self.ranges[0][0] = lo + excess
                self.count -= excess
                excess = 0
        return doomed
