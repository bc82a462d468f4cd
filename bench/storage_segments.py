"""Append-only columnar segments for trace events: the prototype that bench/storage_options.py measures (option b).

A session's trace events go to a directory of segments of at most `rows` events each, in arrival (id) order,
which is timestamp order. A segment is one raw little-endian file per column (`ts.bin`, `kind.bin`, ...), read
with `numpy.memmap`; an enter's argument words go to `words.bin`, found through `aoff` (where its words start).
The writer appends each batch to the open segment's files (so a crashed daemon loses nothing the kernel has),
and keeps what queries need in memory while the segment is open. When a segment is full it is sealed: the
files are fsynced, and it gains what makes the filters cheap without scanning it,

- events per (function slot, kind) and per thread (totals of function / eventType / thread filters),
- the function exits' rows sorted by duration and by return value, with the sorted values (minDurationNs and
  returnValue: a binary search for the count, the candidate rows for the page),
- its first and last timestamp (time ranges: whole segments skipped, one binary search in the others),

and the manifest (`segments.json`, replaced atomically) lists it. `recover(dir)` reads a store back from its files
alone, the open segment included, the way a restarted daemon would.

    store = SegmentStore(directory, rows=1 << 20)
    store.append(batch)                       # a Batch: one array per column, equal lengths
    total, page = query(store.views(), Predicate(kind=2, slots=np.array([3, 7])), offset=0, limit=50)
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

EXIT = 2
KINDS = 4  # kinds 0..3 counted per slot (1 enter, 2 exit)

COLUMNS: dict[str, np.dtype[np.generic]] = {
    "ts": np.dtype("<i8"),  # ns since the session's start, ascending
    "idoff": np.dtype("<u4"),  # event id - the segment's first id
    "tid": np.dtype("<u4"),
    "slot": np.dtype("<i4"),  # the session's function slot (slots -> functions.key live in SQLite)
    "kind": np.dtype("u1"),
    "flags": np.dtype("u1"),  # bit 0 sampled, bit 1 pointers not followed
    "pid": np.dtype("<i4"),
    "parent": np.dtype("<i8"),  # the enclosing call's enter event id; -1 none
    "duration": np.dtype("<i8"),  # exits; -1 for the rest
    "retval": np.dtype("<i8"),  # exits; 0 for the rest
    "aoff": np.dtype("<u4"),  # where the event's argument words start in words.bin
}
WORDS = np.dtype("<i8")
POSTINGS = ("dur", "ret")  # sorted values <dim>_val.bin (int64) and their rows <dim>_row.bin (uint32)


@dataclass
class Batch:
    """Decoded events of one agent batch, column by column (`COLUMNS` names except idoff and aoff), plus `ids`,
    `nwords` (argument words per event) and `words` (those words, flat, event after event)."""

    ids: np.ndarray
    columns: dict[str, np.ndarray]
    nwords: np.ndarray
    words: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)

    def part(self, start: int, end: int) -> Batch:
        ends = np.cumsum(self.nwords, dtype=np.int64)
        w0 = int(ends[start - 1]) if start else 0
        w1 = int(ends[end - 1]) if end else 0
        return Batch(self.ids[start:end], {k: v[start:end] for k, v in self.columns.items()},
                     self.nwords[start:end], self.words[w0:w1])


@dataclass
class Segment:
    """What a query reads of one segment, sealed (memory-mapped files) or open (the writer's arrays)."""

    first_id: int
    n: int
    cols: dict[str, np.ndarray]
    words: np.ndarray
    slot_kind: np.ndarray  # (slots, KINDS) events per function slot and kind
    tid_counts: dict[int, int]
    postings: dict[str, tuple[np.ndarray, np.ndarray]] | None  # dim -> (sorted values, rows); None while open

    @property
    def ts_first(self) -> int:
        return int(self.cols["ts"][0])

    @property
    def ts_last(self) -> int:
        return int(self.cols["ts"][self.n - 1])

    def event_words(self, row: int) -> np.ndarray:
        aoff = self.cols["aoff"]
        end = int(aoff[row + 1]) if row + 1 < self.n else len(self.words)
        return self.words[int(aoff[row]):end]


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _OpenSegment:
    """The segment being appended to: arrays of `capacity` rows in memory, the same bytes appended to its files."""

    def __init__(self, directory: Path, first_id: int, capacity: int) -> None:
        self.dir = directory
        directory.mkdir(parents=True)
        (directory / "first_id").write_text(str(first_id))
        self.first_id = first_id
        self.capacity = capacity
        self.n = 0
        self.arrays = {name: np.empty(capacity, dtype) for name, dtype in COLUMNS.items()}
        self.words = np.empty(max(1024, capacity), WORDS)
        self.nwords = 0
        self.slot_kind = np.zeros((64, KINDS), np.int64)
        self.tid_counts: dict[int, int] = {}
        self.files = {name: open(directory / f"{name}.bin", "ab", buffering=0)  # noqa: SIM115 (closed by seal)
                      for name in [*COLUMNS, "words"]}

    def append(self, batch: Batch) -> None:
        k, at = len(batch), self.n
        rows = slice(at, at + k)
        ends = np.cumsum(batch.nwords, dtype=np.int64)
        aoff = (self.nwords + ends - batch.nwords).astype(COLUMNS["aoff"])
        values = {**batch.columns, "idoff": (batch.ids - self.first_id).astype(COLUMNS["idoff"]), "aoff": aoff}
        for name, dtype in COLUMNS.items():
            column = np.ascontiguousarray(values[name], dtype)
            self.arrays[name][rows] = column
            self.files[name].write(column.data)
        if self.nwords + len(batch.words) > len(self.words):
            self.words = np.concatenate([self.words[:self.nwords],
                                         np.empty(max(len(self.words), len(batch.words)), WORDS)])
        self.words[self.nwords:self.nwords + len(batch.words)] = batch.words
        self.files["words"].write(np.ascontiguousarray(batch.words, WORDS).data)
        self.nwords += len(batch.words)
        slots, kinds = batch.columns["slot"].astype(np.int64), batch.columns["kind"].astype(np.int64)
        top = int(slots.max()) + 1 if k else 0
        if top > len(self.slot_kind):
            grown = np.zeros((max(top, 2 * len(self.slot_kind)), KINDS), np.int64)
            grown[:len(self.slot_kind)] = self.slot_kind
            self.slot_kind = grown
        cells = np.bincount(slots * KINDS + (kinds & (KINDS - 1)), minlength=len(self.slot_kind) * KINDS)
        self.slot_kind += cells.reshape(-1, KINDS)
        tids, counts = np.unique(batch.columns["tid"], return_counts=True)
        for tid, count in zip(tids.tolist(), counts.tolist(), strict=True):
            self.tid_counts[tid] = self.tid_counts.get(tid, 0) + count
        self.n += k

    def view(self) -> Segment:
        n = self.n
        return Segment(self.first_id, n, {name: array[:n] for name, array in self.arrays.items()},
                       self.words[:self.nwords], self.slot_kind, dict(self.tid_counts), None)

    def seal(self, fsync: bool) -> dict[str, object]:
        """Close the files, write the postings, fsync them (if asked); returns the manifest entry."""
        for f in self.files.values():
            f.close()
        n = self.n
        kind = self.arrays["kind"][:n]
        exits = np.flatnonzero(kind == EXIT).astype(np.uint32)
        for dim, column in (("dur", "duration"), ("ret", "retval")):
            values = self.arrays[column][:n][exits]
            order = np.argsort(values)
            values[order].tofile(self.dir / f"{dim}_val.bin")
            exits[order].tofile(self.dir / f"{dim}_row.bin")
        tids = np.array(sorted(self.tid_counts), np.int64)
        np.savez(self.dir / "summary.npz", slot_kind=self.slot_kind,
                 tids=tids, tid_n=np.array([self.tid_counts[t] for t in tids.tolist()], np.int64))
        for path in self.dir.iterdir() if fsync else ():
            _fsync(path)
        return {"dir": self.dir.name, "first_id": self.first_id, "n": n, "words": self.nwords}


def _open_sealed(directory: Path, entry: dict[str, object]) -> Segment:
    n, nwords = int(str(entry["n"])), int(str(entry["words"]))
    cols: dict[str, np.ndarray] = {name: np.memmap(directory / f"{name}.bin", dtype, "r", shape=(n,))
                                   for name, dtype in COLUMNS.items()}
    words = (np.memmap(directory / "words.bin", WORDS, "r", shape=(nwords,)) if nwords
             else np.zeros(0, WORDS))
    summary = np.load(directory / "summary.npz")
    postings: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for dim in POSTINGS:
        size = (directory / f"{dim}_row.bin").stat().st_size // 4
        if size:
            postings[dim] = (np.memmap(directory / f"{dim}_val.bin", "<i8", "r", shape=(size,)),
                             np.memmap(directory / f"{dim}_row.bin", "<u4", "r", shape=(size,)))
        else:
            postings[dim] = (np.zeros(0, np.int64), np.zeros(0, np.uint32))
    tid_counts = dict(zip(summary["tids"].tolist(), summary["tid_n"].tolist(), strict=True))
    return Segment(int(str(entry["first_id"])), n, cols, words, summary["slot_kind"], tid_counts, postings)


@dataclass
class SegmentStore:
    """A session's trace events as segments of at most `rows` events (see the module docstring)."""

    directory: Path
    rows: int = 1 << 20
    sealed: list[Segment] = field(default_factory=list)
    manifest: list[dict[str, object]] = field(default_factory=list)
    fsync: bool = True  # a sealed segment's files reach the disk before the manifest lists it
    _open: _OpenSegment | None = None
    seal_s: float = 0.0  # thread CPU spent sealing

    def append(self, batch: Batch) -> None:
        start = 0
        while start < len(batch):
            if self._open is None:
                self._open = _OpenSegment(self.directory / f"seg-{len(self.sealed):06d}", int(batch.ids[start]),
                                          self.rows)
            room = self._open.capacity - self._open.n
            end = min(len(batch), start + room)
            self._open.append(batch.part(start, end) if (start, end) != (0, len(batch)) else batch)
            start = end
            if self._open.n == self._open.capacity:
                self._seal()

    def _seal(self) -> None:
        assert self._open is not None
        began = time.thread_time()
        entry = self._open.seal(self.fsync)
        self.manifest.append(entry)
        tmp = self.directory / "segments.json.tmp"
        tmp.write_text(json.dumps(self.manifest))
        os.replace(tmp, self.directory / "segments.json")
        self.sealed.append(_open_sealed(self._open.dir, entry))
        self._open = None
        self.seal_s += time.thread_time() - began

    def views(self) -> list[Segment]:
        """The segments as a query sees them now, oldest first."""
        if self._open is None or self._open.n == 0:
            return list(self.sealed)
        return [*self.sealed, self._open.view()]

    def close(self) -> None:
        if self._open is not None:
            for f in self._open.files.values():
                f.close()


def recover(directory: Path) -> list[Segment]:
    """The segments a restarted daemon finds: the manifest's, then the open one from its files (its rows are those
    every column file holds in full; its summaries are recounted)."""
    manifest_path = directory / "segments.json"
    manifest: list[dict[str, object]] = json.loads(manifest_path.read_text()) if manifest_path.exists() else []
    segments = [_open_sealed(directory / str(entry["dir"]), entry) for entry in manifest]
    tail = directory / f"seg-{len(manifest):06d}"
    if not tail.exists():
        return segments
    n = min((tail / f"{name}.bin").stat().st_size // dtype.itemsize for name, dtype in COLUMNS.items())
    if n == 0:
        return segments
    cols = {name: np.fromfile(tail / f"{name}.bin", dtype, count=n) for name, dtype in COLUMNS.items()}
    words = np.fromfile(tail / "words.bin", WORDS)
    kinds, slots = cols["kind"].astype(np.int64), cols["slot"].astype(np.int64)
    slot_kind = np.bincount(slots * KINDS + kinds, minlength=(int(slots.max()) + 1) * KINDS).reshape(-1, KINDS)
    tids, counts = np.unique(cols["tid"], return_counts=True)
    first_id = int((tail / "first_id").read_text())
    return [*segments, Segment(first_id, n, cols, words, slot_kind,
                               dict(zip(tids.tolist(), counts.tolist(), strict=True)), None)]


# ---- queries ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Predicate:
    """What a debug_query filter asks of the trace events, names already resolved (functions -> slots, thread
    names -> tids) and times made absolute. A value filter (min_duration, return_equals) matches exits only."""

    kind: int | None = None
    slots: np.ndarray | None = None
    tids: np.ndarray | None = None
    min_duration: int | None = None
    return_equals: int | None = None
    ts_from: int | None = None
    ts_to: int | None = None

    @property
    def narrows(self) -> bool:
        """Anything beyond the time range."""
        return (self.kind is not None or self.slots is not None or self.tids is not None
                or self.min_duration is not None or self.return_equals is not None)


def _rows_in_time(seg: Segment, p: Predicate) -> tuple[int, int]:
    if (p.ts_from is not None and p.ts_from > seg.ts_last) or (p.ts_to is not None and p.ts_to < seg.ts_first):
        return 0, 0
    lo, hi = 0, seg.n
    ts = seg.cols["ts"]
    if p.ts_from is not None and p.ts_from > seg.ts_first:
        lo = int(np.searchsorted(ts, p.ts_from, "left"))
    if p.ts_to is not None and p.ts_to < seg.ts_last:
        hi = int(np.searchsorted(ts, p.ts_to, "right"))
    return lo, max(lo, hi)


def _posting_range(seg: Segment, p: Predicate, dim: str) -> tuple[int, int]:
    assert seg.postings is not None
    values = seg.postings[dim][0]
    if dim == "dur":
        assert p.min_duration is not None
        return int(np.searchsorted(values, p.min_duration, "left")), len(values)
    assert p.return_equals is not None
    return (int(np.searchsorted(values, p.return_equals, "left")),
            int(np.searchsorted(values, p.return_equals, "right")))


def _value_dims(p: Predicate) -> list[str]:
    return [dim for dim, wanted in (("dur", p.min_duration), ("ret", p.return_equals)) if wanted is not None]


def _count(seg: Segment, p: Predicate) -> int:
    lo, hi = _rows_in_time(seg, p)
    if lo >= hi:
        return 0
    if not p.narrows:
        return hi - lo
    if lo == 0 and hi == seg.n:
        dims = _value_dims(p)
        if not dims and p.tids is None:
            cells = seg.slot_kind if p.slots is None else seg.slot_kind[p.slots[p.slots < len(seg.slot_kind)]]
            return int(cells.sum() if p.kind is None else cells[:, p.kind].sum())
        if p.tids is not None and not dims and p.kind is None and p.slots is None:
            return sum(seg.tid_counts.get(int(t), 0) for t in p.tids.tolist())
        if (len(dims) == 1 and seg.postings is not None and p.kind in (None, EXIT) and p.slots is None
                and p.tids is None):
            a, b = _posting_range(seg, p, dims[0])
            return b - a
    return len(_matches(seg, p, lo, hi, 0, None))


def _mask(seg: Segment, p: Predicate, start: int, end: int) -> np.ndarray:
    cols = seg.cols
    kind = cols["kind"][start:end]
    mask = np.ones(end - start, bool)
    if p.kind is not None:
        mask &= kind == p.kind
    if p.min_duration is not None or p.return_equals is not None:
        mask &= kind == EXIT
    if p.min_duration is not None:
        mask &= cols["duration"][start:end] >= p.min_duration
    if p.return_equals is not None:
        mask &= cols["retval"][start:end] == p.return_equals
    if p.slots is not None:
        mask &= np.isin(cols["slot"][start:end], p.slots)
    if p.tids is not None:
        mask &= np.isin(cols["tid"][start:end], p.tids)
    return mask


def _check(seg: Segment, p: Predicate, rows: np.ndarray, skip_dim: str) -> np.ndarray:
    """Which candidate rows (from the postings of `skip_dim`) match the rest of the predicate."""
    cols = seg.cols
    keep = np.ones(len(rows), bool)
    if p.kind is not None:
        keep &= cols["kind"][rows] == p.kind
    if p.min_duration is not None and skip_dim != "dur":
        keep &= cols["duration"][rows] >= p.min_duration
    if p.return_equals is not None and skip_dim != "ret":
        keep &= cols["retval"][rows] == p.return_equals
    if p.slots is not None:
        keep &= np.isin(cols["slot"][rows], p.slots)
    if p.tids is not None:
        keep &= np.isin(cols["tid"][rows], p.tids)
    return keep


_FIRST_CHUNK = 16_384
_MAX_CHUNK = 1 << 20


def _matches(seg: Segment, p: Predicate, lo: int, hi: int, skip: int, take: int | None) -> np.ndarray:
    """Rows lo <= row < hi matching `p`, ascending: matches skip..skip+take-1 (take None: all from skip)."""
    if not p.narrows:
        end = hi if take is None else min(hi, lo + skip + take)
        return np.arange(lo + skip, end, dtype=np.int64)
    dims = _value_dims(p)
    if dims and seg.postings is not None:
        ranges = {dim: _posting_range(seg, p, dim) for dim in dims}
        dim = min(dims, key=lambda d: ranges[d][1] - ranges[d][0])
        a, b = ranges[dim]
        rows: np.ndarray = np.sort(seg.postings[dim][1][a:b]).astype(np.int64)
        if lo > 0 or hi < seg.n:
            rows = rows[(rows >= lo) & (rows < hi)]
        rows = rows[_check(seg, p, rows, dim)]
        return rows[skip:] if take is None else rows[skip:skip + take]
    found: list[np.ndarray] = []
    have, start = 0, lo
    step = hi - lo if take is None else _FIRST_CHUNK
    while start < hi:
        end = min(hi, start + step)
        rows = np.flatnonzero(_mask(seg, p, start, end)) + start
        found.append(rows)
        have += len(rows)
        if take is not None and have >= skip + take:
            break
        start, step = end, min(step * 4, _MAX_CHUNK)
    rows = np.concatenate(found) if found else np.zeros(0, np.int64)
    return rows[skip:] if take is None else rows[skip:skip + take]


Page = list[tuple[Segment, np.ndarray]]
"""Rows of a page, by segment (row indices into the segment's columns)."""


def query(segments: list[Segment], p: Predicate, *, offset: int, limit: int) -> tuple[int, Page]:
    """How many events match, and the rows of matches offset..offset+limit-1 (oldest first), by segment."""
    counts = [_count(seg, p) for seg in segments]
    page: Page = []
    skip, want = offset, limit
    for seg, count in zip(segments, counts, strict=True):
        if want <= 0:
            break
        if count <= skip:
            skip -= count
            continue
        lo, hi = _rows_in_time(seg, p)
        rows = _matches(seg, p, lo, hi, skip, want)
        page.append((seg, rows))
        want -= len(rows)
        skip = 0
    return sum(counts), page


def latest_ts(segments: list[Segment]) -> int:
    return segments[-1].ts_last if segments else 0
