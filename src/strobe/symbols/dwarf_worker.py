"""Scanning a big .debug_info with several processes, each taking a contiguous run of units.

This process scans and names the first run itself while worker processes (`main` below, started with
this interpreter) do the others and send back their `index.Part` (pickled on stdout). Results are exactly
those of one process: parts are combined in unit order, and a part whose references leave its run (LTO
and dwz output refer across units) makes the whole file be scanned again in one process. A worker that
fails or finds the file changed is replaced by scanning its run here.
"""

from __future__ import annotations

import bisect
import logging
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import strobe
from strobe.symbols.dwarf_scan import list_units
from strobe.symbols.dwarf_unit import DwarfSections, Unit

if TYPE_CHECKING:
    from strobe.symbols.dwarf_names import Demangler, Part, SymbolNames

log = logging.getLogger(__name__)

# Processes used at most (None: one per available CPU, at most 4), and the smallest .debug_info worth
# splitting (starting a worker costs about 0.3 s). Tests lower them to exercise the parallel path.
WORKERS: int | None = None
MIN_PARALLEL_BYTES = 12 << 20
WORKER_TIMEOUT_S = 600.0
# Extra share of the units for this process (it starts no interpreter but also reads the symbol table and
# unpacks results; measured about even).
_OWN_EXTRA_SHARE = 0.0


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
    """(start, end) .debug_info offsets of up to `parts` runs of whole units: each run ends at the unit
    boundary nearest its share of the bytes (the first's share is _OWN_EXTRA_SHARE larger)."""
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


class Scan:
    """A scan of every unit of `sections` (read from `path`): `start` it (worker processes, when worthwhile,
    begin at once), then `finish` it in this process with the symbol table. `close` stops the workers.
    `binary`: when `path` is a separate debug file, the binary it describes (workers read its symbol tables)."""

    def __init__(self, path: str | Path, sections: DwarfSections, binary: str | None = None) -> None:
        self.path = path
        self.binary = binary
        self.sections = sections
        self.units, self.failed_headers = list_units(sections)
        # What a single scan ends with: the tombstone address depends on it.
        self.address_size = self.units[-1].address_size if self.units else 8
        self.spans: list[tuple[int, int]] = []
        self.workers: list[_Worker | None] = []
        self.started = time.perf_counter()
        count = worker_count()
        if (count > 1 and self.units and len(sections.info) >= MIN_PARALLEL_BYTES and sys.executable
                and not might_cross_units(sections.abbrev)):
            self.spans = split(self.units, count)
        if len(self.spans) >= 2:
            stat = os.stat(path)
            self.workers = [_start(path, span, self.address_size, stat.st_size, stat.st_mtime_ns, binary)
                            for span in self.spans[1:]]

    def finish(self, symbols: SymbolNames, demangler: Demangler) -> list[Part]:
        from strobe.symbols.dwarf_names import index_part

        def scan(span: tuple[int, int], units: list[Unit]) -> Part:
            return index_part(self.sections, units, span, self.address_size, symbols, demangler)

        if not self.units:
            return []
        whole = (0, len(self.sections.info))
        try:
            if len(self.spans) < 2:
                return self._counted([scan(whole, self.units)])
            parts = [scan(self.spans[0], _within(self.units, self.spans[0]))]
            own = time.perf_counter() - self.started
            for span, worker in zip(self.spans[1:], self.workers, strict=True):
                done = _finish(worker)
                parts.append(done if done is not None else scan(span, _within(self.units, span)))
            log.debug("%s: %d parts; this process's part took %.2fs, all parts %.2fs", self.path, len(parts), own,
                      time.perf_counter() - self.started)
        finally:
            self.close()
        if any(part.crossing for part in parts):
            log.info("%s: functions refer across units; scanning its DWARF in one process", self.path)
            return self._counted([scan(whole, self.units)])
        return self._counted(parts)

    def _counted(self, parts: list[Part]) -> list[Part]:
        parts[-1] = parts[-1]._replace(failed_units=parts[-1].failed_units + self.failed_headers)
        return parts

    def close(self) -> None:
        for worker in self.workers:
            if worker is not None:
                worker.stop()
        self.workers = [None] * len(self.workers)


def start(path: str | Path, sections: DwarfSections, binary: str | None = None) -> Scan:
    return Scan(path, sections, binary)


def scan_parts(path: str | Path, sections: DwarfSections, symbols: SymbolNames, demangler: Demangler,
               binary: str | None = None) -> list[Part]:
    """The parts of every unit of `sections` (read from `path`; `binary`: the binary a separate debug file
    describes), scanned in one or several processes."""
    return start(path, sections, binary).finish(symbols, demangler)


# The worker's command line (not `-m`: the package imports this module, and runpy would warn).
_WORKER = "import sys; from strobe.symbols.dwarf_worker import main; raise SystemExit(main(sys.argv[1:]))"


def _within(units: list[Unit], span: tuple[int, int]) -> list[Unit]:
    return [unit for unit in units if span[0] <= unit.offset < span[1]]


class _Worker:
    """A worker process and the thread collecting what it writes (so the pipe is drained while this process
    scans its own part, and the worker never waits on it)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.output = b""
        self.errors = b""
        self.reader = threading.Thread(target=self._read, name="symbol-worker-reader", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        self.output, self.errors = self.process.communicate()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.reader.join()


def _start(path: str | Path, span: tuple[int, int], address_size: int, size: int, mtime_ns: int,
           binary: str | None = None) -> _Worker | None:
    package_root = str(Path(strobe.__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    command = [sys.executable, "-c", _WORKER, str(path), str(span[0]), str(span[1]), str(address_size), str(size),
               str(mtime_ns), repr(time.time()), *([binary] if binary else [])]
    try:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=env)
    except OSError as exc:
        log.warning("cannot start a symbol worker (%s); scanning in this process", exc)
        return None
    return _Worker(process)


def _finish(worker: _Worker | None) -> Part | None:
    if worker is None:
        return None
    waited = time.perf_counter()
    worker.reader.join(WORKER_TIMEOUT_S)
    if worker.reader.is_alive():
        worker.stop()
        log.warning("a symbol worker timed out; scanning its units in this process")
        return None
    out, err, code = worker.output, worker.errors, worker.process.returncode
    if code != 0:
        log.warning("a symbol worker failed (exit %s): %s", code, err.decode(errors="replace")[-2000:])
        return None
    try:
        result: tuple[Any, list[str], list[tuple[str, float]]] = pickle.loads(out)
    except (pickle.UnpicklingError, EOFError, AttributeError, ValueError, TypeError) as exc:
        log.warning("a symbol worker sent an unreadable result (%s); scanning its units in this process", exc)
        return None
    packed, warnings, timeline = result
    try:
        part = _unpack(packed)
    except (ValueError, TypeError, IndexError) as exc:
        log.warning("a symbol worker sent an unreadable result (%s); scanning its units in this process", exc)
        return None
    for message in warnings:
        log.warning("%s", message)
    log.debug("symbol worker: %s; result read and unpacked in %.2fs", ", ".join(
        f"{stage} at {at:.2f}s" for stage, at in timeline), time.perf_counter() - waited)
    return part


# Results travel with their string columns joined: one str to unpickle and split instead of 200k.
_STRING_COLUMNS = ("names", "raws", "signatures", "keys")


def _pack(part: Part) -> Any:
    return part._replace(concrete=_pack_rows(part.concrete), candidates=_pack_rows(part.candidates))


def _pack_rows(rows: Any) -> Any:
    packed = {}
    for name in _STRING_COLUMNS:
        values: list[str | None] = getattr(rows, name)
        missing = b""
        if None in values:
            missing = bytes(value is None for value in values)
            values = [value or "" for value in values]
        joined = "\0".join(values)  # type: ignore[arg-type]
        if joined.count("\0") != max(len(values) - 1, 0):
            continue  # a string holding NUL: sent as it is
        packed[name] = ("packed", joined, missing, len(values))
    return rows._replace(**packed)


def _unpack(part: Any) -> Part:
    return part._replace(concrete=_unpack_rows(part.concrete), candidates=_unpack_rows(part.candidates))  # type: ignore[no-any-return]


def _unpack_rows(rows: Any) -> Any:
    unpacked = {}
    for name in _STRING_COLUMNS:
        value = getattr(rows, name)
        if isinstance(value, tuple) and value[:1] == ("packed",):
            _, joined, missing, count = value
            values: list[str | None] = joined.split("\0") if count else []
            if len(values) != count or len(missing) not in (0, count):
                raise ValueError(f"column {name}: {len(values)} values, expected {count}")
            if missing:
                values = [None if gone else text for text, gone in zip(values, missing, strict=True)]
            unpacked[name] = values
    return rows._replace(**unpacked)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def main(argv: list[str]) -> int:
    """Worker: scan and name the units starting in [start, end) of `path`, pickle the Part to stdout. An eighth
    argument names the binary when `path` is its separate debug file (its symbol tables are the binary's)."""
    import gc

    from strobe.symbols.dwarf_names import Demangler, SymbolNames, index_part
    from strobe.symbols.elf import open_elf, read_dwarf_sections, read_symbol_table

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
        if len(argv) > 7:
            with open_elf(argv[7]) as binary:
                symbols = SymbolNames(read_symbol_table(binary, elf))
        else:
            symbols = SymbolNames(read_symbol_table(elf))
    timeline.append(("read", time.time() - float(argv[6])))
    units, _ = list_units(sections)
    span = (start, end)
    part = index_part(sections, _within(units, span), span, address_size, symbols, Demangler())
    timeline.append(("scanned", time.time() - float(argv[6])))
    packed = _pack(part)
    timeline.append(("packed", time.time() - float(argv[6])))
    result = pickle.dumps((packed, collect.messages, timeline), protocol=pickle.HIGHEST_PROTOCOL)
    sys.stdout.buffer.write(result)
    sys.stdout.buffer.flush()
    return 0

