"""Scanning a big .debug_info with several processes, each taking a contiguous run of units.

This process scans and names the first run itself while `python -m strobe.symbols.dwarf_worker`
processes do the others and send back their `index.Part` (pickled on stdout). Results are exactly those
of one process: parts are combined in unit order, and a part whose references leave its run (LTO and dwz
output refer across units) makes the whole file be scanned again in one process. A worker that fails or
finds the file changed is replaced by scanning its run here.
"""

from __future__ import annotations

import bisect
import logging
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import strobe
from strobe.symbols.dwarf_scan import list_units
from strobe.symbols.dwarf_unit import DwarfSections, Unit

if TYPE_CHECKING:
    from strobe.symbols.index import Demangler, Part, SymbolNames

log = logging.getLogger(__name__)

# Processes used at most (None: one per available CPU, at most 4), and the smallest .debug_info worth
# splitting (starting a worker costs about 0.3 s). Tests lower them to exercise the parallel path.
WORKERS: int | None = None
MIN_PARALLEL_BYTES = 12 << 20
WORKER_TIMEOUT_S = 600.0
# Share of the units this process keeps: it has no interpreter to start and no result to send.
_OWN_EXTRA_SHARE = 0.04


def worker_count() -> int:
    if WORKERS is not None:
        return max(1, WORKERS)
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        available = os.cpu_count() or 1
    return max(1, min(available, 4))


def might_cross_units(abbrev: bytes) -> bool:
    """Whether a DW_AT_specification or DW_AT_abstract_origin may use DW_FORM_ref_addr (or a form given in
    .debug_info): the only ways a function refers to another unit. Byte patterns, so false positives are
    possible (they only cost the parallel scan)."""
    return any(pattern in abbrev for pattern in (b"\x47\x10", b"\x31\x10", b"\x47\x16", b"\x31\x16"))


def split(units: list[Unit], parts: int) -> list[tuple[int, int]]:
    """(start, end) .debug_info offsets of up to `parts` runs of whole units, the first a little larger:
    each run ends at the unit boundary nearest its share of the bytes."""
    if not units:
        return []
    first, last = units[0].offset, units[-1].end
    total = last - first
    shares = [1 / parts + _OWN_EXTRA_SHARE] + [(1 - 1 / parts - _OWN_EXTRA_SHARE) / (parts - 1)] * (parts - 1)
    boundaries = [unit.offset for unit in units[1:]]
    bounds = [first]
    target: float = first
    for share in shares[:-1]:
        target += share * total
        at = bisect.bisect_left(boundaries, target)
        options = [b for b in boundaries[max(at - 1, 0) : at + 1] if b > bounds[-1]]
        if not options:
            later = bisect.bisect_right(boundaries, bounds[-1])
            if later >= len(boundaries):
                break
            options = [boundaries[later]]
        bounds.append(min(options, key=lambda bound: abs(bound - target)))
    bounds.append(last)
    return [(bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1) if bounds[i + 1] > bounds[i]]


def scan_parts(path: str | Path, sections: DwarfSections, symbols: SymbolNames, demangler: Demangler) -> list[Part]:
    """The parts of every unit of `sections` (read from `path`), scanned in one or several processes."""
    from strobe.symbols.index import index_part

    units, failed_headers = list_units(sections)
    if not units:
        return []
    address_size = units[-1].address_size  # what a single scan ends with: the tombstone depends on it
    whole = (0, len(sections.info))
    count = worker_count()
    spans = []
    if count > 1 and len(sections.info) >= MIN_PARALLEL_BYTES and not might_cross_units(sections.abbrev):
        spans = split(units, count)
    if len(spans) < 2 or not sys.executable:
        part = index_part(sections, units, whole, address_size, symbols, demangler)
        return [part._replace(failed_units=part.failed_units + failed_headers)]
    stat = os.stat(path)
    started = time.perf_counter()
    workers = [_start(path, span, address_size, stat.st_size, stat.st_mtime_ns) for span in spans[1:]]
    try:
        first_span = spans[0]
        parts = [index_part(sections, _within(units, first_span), first_span, address_size, symbols, demangler)]
        own = time.perf_counter() - started
        for span, worker in zip(spans[1:], workers, strict=True):
            done = _finish(worker)
            if done is None:
                done = index_part(sections, _within(units, span), span, address_size, symbols, demangler)
            parts.append(done)
        log.debug("%s: %d parts; this process's part took %.2fs, all parts %.2fs", path, len(parts), own,
                  time.perf_counter() - started)
    finally:
        for worker in workers:
            if worker is not None and worker.poll() is None:
                worker.kill()
                worker.wait()
    if any(part.crossing for part in parts):
        log.info("%s: functions refer across units; scanning its DWARF in one process", path)
        part = index_part(sections, units, whole, address_size, symbols, demangler)
        return [part._replace(failed_units=part.failed_units + failed_headers)]
    parts[-1] = parts[-1]._replace(failed_units=parts[-1].failed_units + failed_headers)
    return parts


def _within(units: list[Unit], span: tuple[int, int]) -> list[Unit]:
    return [unit for unit in units if span[0] <= unit.offset < span[1]]


def _start(path: str | Path, span: tuple[int, int], address_size: int, size: int, mtime_ns: int) -> Any:
    package_root = str(Path(strobe.__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "strobe.symbols.dwarf_worker", str(path), str(span[0]), str(span[1]),
               str(address_size), str(size), str(mtime_ns), repr(time.time())]
    try:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env)
    except OSError as exc:
        log.warning("cannot start a symbol worker (%s); scanning in this process", exc)
        return None


def _finish(worker: Any) -> Part | None:
    if worker is None:
        return None
    try:
        out, err = worker.communicate(timeout=WORKER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.communicate()
        log.warning("a symbol worker timed out; scanning its units in this process")
        return None
    if worker.returncode != 0:
        log.warning("a symbol worker failed (exit %s): %s", worker.returncode, err.decode(errors="replace")[-2000:])
        return None
    try:
        result: tuple[Part, list[str], list[tuple[str, float]]] = pickle.loads(out)
    except (pickle.UnpicklingError, EOFError, AttributeError, ValueError, TypeError) as exc:
        log.warning("a symbol worker sent an unreadable result (%s); scanning its units in this process", exc)
        return None
    part, warnings, timeline = result
    for message in warnings:
        log.warning("%s", message)
    log.debug("symbol worker: %s", ", ".join(f"{stage} at {at:.2f}s" for stage, at in timeline))
    return part


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def main(argv: list[str]) -> int:
    """Worker: scan and name the units starting in [start, end) of `path`, pickle the Part to stdout."""
    import gc

    from strobe.symbols.elf import open_elf, read_dwarf_sections, read_symbol_table
    from strobe.symbols.index import Demangler, SymbolNames, index_part

    gc.disable()
    path, start, end, address_size, size, mtime_ns = argv[0], *map(int, argv[1:6])
    timeline = [("started", time.time() - float(argv[6]))]
    collect = _Collect()
    logging.getLogger("strobe").addHandler(collect)
    logging.getLogger("strobe").propagate = False
    stat = os.stat(path)
    if (stat.st_size, stat.st_mtime_ns) != (size, mtime_ns):
        print(f"{path} changed since indexing started", file=sys.stderr)
        return 2
    with open_elf(path) as elf:
        sections = read_dwarf_sections(elf)
        symbols = SymbolNames(read_symbol_table(elf))
    timeline.append(("read", time.time() - float(argv[6])))
    units, _ = list_units(sections)
    span = (start, end)
    part = index_part(sections, _within(units, span), span, address_size, symbols, Demangler())
    timeline.append(("scanned", time.time() - float(argv[6])))
    result = pickle.dumps((part, collect.messages, timeline), protocol=pickle.HIGHEST_PROTOCOL)
    sys.stdout.buffer.write(result)
    sys.stdout.buffer.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
