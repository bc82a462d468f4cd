"""Source maps (revision 3) of compiled JavaScript: where a position of the generated file came from.

    found = source_map_of(Path("dist/auth.js"), text)      # its `//# sourceMappingURL=`: a file or a data: URL
    if isinstance(found, SourceMap):
        found.original(12, 1)                                # ("/proj/src/auth.ts", 9): 1-based line and column in
    else:
        found                                                # None (no map), or why the map cannot be used

Only what naming a function's place needs is kept: for each generated line, its segments that point into a
source (generated column, source, original line). Columns count UTF-16 units, as V8 and the spec do; a function's
start column from js_index counts characters, the same outside astral characters.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

MAX_MAP_BYTES = 32 << 20
_B64 = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
# The last `//# sourceMappingURL=<url>` (or the older `//@`) comment, alone on its line.
_URL = re.compile(r"^[ \t]*//[#@][ \t]*sourceMappingURL=([^\s'\"]+)[ \t]*$", re.MULTILINE)


class SourceMapError(ValueError):
    """A map that cannot be used; the message says why."""


def _vlq(segment: str) -> list[int]:
    """The signed integers of one Base64 VLQ segment."""
    values: list[int] = []
    value = shift = 0
    for char in segment:
        digit = _B64.get(char)
        if digit is None:
            raise SourceMapError(f"'{char}' is not a Base64 VLQ digit")
        value += (digit & 31) << shift
        if digit & 32:
            shift += 5
            continue
        values.append(-(value >> 1) if value & 1 else value >> 1)
        value = shift = 0
    if shift:
        raise SourceMapError("a VLQ value is cut short")
    return values


@dataclass(frozen=True, slots=True)
class SourceMap:
    sources: tuple[str, ...]  # absolute paths (sourceRoot applied, relative to the map's directory)
    lines: tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...]
    # per generated line (0-based): its segments' generated columns (ascending), sources, original lines (0-based)

    @classmethod
    def parse(cls, text: str | bytes, directory: str) -> SourceMap:
        try:
            raw = json.loads(text)
        except (ValueError, UnicodeDecodeError) as exc:
            raise SourceMapError(f"not JSON ({exc})") from None
        if not isinstance(raw, dict) or raw.get("version") != 3:
            raise SourceMapError("not a version 3 source map")
        if "sections" in raw:
            raise SourceMapError("an index map (with sections) is not supported")
        sources, mappings = raw.get("sources"), raw.get("mappings")
        if not isinstance(sources, list) or not isinstance(mappings, str):
            raise SourceMapError("'sources' or 'mappings' is missing")
        root = raw.get("sourceRoot")
        root = root if isinstance(root, str) else ""
        paths = tuple(_source_path(directory, root, s if isinstance(s, str) else "") for s in sources)
        lines = []
        source = original = 0
        for line in mappings.split(";"):
            column = 0
            columns: list[int] = []
            files: list[int] = []
            originals: list[int] = []
            for segment in line.split(","):
                if not segment:
                    continue
                fields = _vlq(segment)
                column += fields[0]
                if len(fields) < 4:
                    continue  # a generated position that maps to nothing
                source += fields[1]
                original += fields[2]
                if not 0 <= source < len(paths):
                    raise SourceMapError(f"a segment names source {source} of {len(paths)}")
                columns.append(column)
                files.append(source)
                originals.append(original)
            order = sorted(range(len(columns)), key=columns.__getitem__)
            lines.append((tuple(columns[i] for i in order), tuple(files[i] for i in order),
                          tuple(originals[i] for i in order)))
        return cls(paths, tuple(lines))

    def original(self, line: int, column: int) -> tuple[str, int] | None:
        """The source and 1-based line that generated 1-based (`line`, `column`): the last segment of that line
        starting at or before the column, else the line's first; None when the line maps to nothing."""
        if not 1 <= line <= len(self.lines):
            return None
        columns, files, originals = self.lines[line - 1]
        if not columns:
            return None
        at = max(bisect.bisect_right(columns, column - 1) - 1, 0)
        return self.sources[files[at]], originals[at] + 1


def _source_path(directory: str, root: str, source: str) -> str:
    if source.startswith("file://"):
        return unquote(source[len("file://"):])
    joined = f"{root.rstrip('/')}/{source}" if root else source
    return os.path.normpath(os.path.join(directory, joined))


def source_map_of(path: Path, text: str) -> SourceMap | str | None:
    """The map a compiled file names in its last sourceMappingURL comment (a file next to it, or an inline
    base64 data: URL); None when it names none; a reason when it cannot be read or used."""
    urls = _URL.findall(text)
    if not urls:
        return None
    url = urls[-1]
    directory = str(path.parent)
    try:
        if url.startswith("data:"):
            header, _, payload = url.partition(",")
            if not header.endswith(";base64"):
                return f"its inline source map ({header[:40]}) is not base64"
            return SourceMap.parse(base64.b64decode(payload, validate=True), directory)
        if "://" in url:
            return f"its source map is at {url[:80]}, not a local file"
        file = path.parent / unquote(url)
        if file.stat().st_size > MAX_MAP_BYTES:
            return f"its source map {file} is over {MAX_MAP_BYTES >> 20} MiB"
        return SourceMap.parse(file.read_bytes(), str(file.parent))
    except (binascii.Error, ValueError) as exc:  # SourceMapError is a ValueError
        return f"its source map {url[:80]} cannot be used: {exc}"
    except OSError as exc:
        return f"its source map {url[:80]} cannot be read ({exc.strerror or exc})"
