"""Source map reading: Base64 VLQ segments, relative fields across lines, the lookup of a position, the ways a
compiled file names its map, and the reasons a map is not used."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from strobe.symbols.source_maps import SourceMap, SourceMapError, _vlq, source_map_of


def test_vlq_values() -> None:
    assert _vlq("AAAA") == [0, 0, 0, 0]
    assert _vlq("AAgBC") == [0, 0, 16, 1]  # 'g' (32) continues into 'B': 32 << 0 | 1 << 5 = 32, halved: 16
    assert _vlq("D") == [-1]
    assert _vlq("2H") == [123]
    with pytest.raises(SourceMapError, match="cut short"):
        _vlq("g")
    with pytest.raises(SourceMapError, match="not a Base64"):
        _vlq("A!")


B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def vlq(*values: int) -> str:
    out = ""
    for value in values:
        rest = (-value << 1) | 1 if value < 0 else value << 1
        while True:
            digit, rest = rest & 31, rest >> 5
            out += B64[digit | (32 if rest else 0)]
            if not rest:
                break
    return out


def test_lookup_across_lines_and_columns(tmp_path: Path) -> None:
    # line 1: col 0 -> a.ts:1, col 10 -> a.ts:3; line 2: nothing; line 3: col 4 -> b.ts:4 (fields are relative)
    mappings = f"{vlq(0, 0, 0, 0)},{vlq(10, 0, 2, 0)};;{vlq(4, 1, 1, 0)},{vlq(3)}"
    raw = {"version": 3, "sources": ["a.ts", "b.ts"], "sourceRoot": "src", "mappings": mappings}
    found = SourceMap.parse(json.dumps(raw), str(tmp_path / "dist"))
    assert found.sources == (str(tmp_path / "dist/src/a.ts"), str(tmp_path / "dist/src/b.ts"))
    assert found.original(1, 1) == (str(tmp_path / "dist/src/a.ts"), 1)
    assert found.original(1, 10) == (str(tmp_path / "dist/src/a.ts"), 1)
    assert found.original(1, 11) == (str(tmp_path / "dist/src/a.ts"), 3)
    assert found.original(2, 1) is None and found.original(9, 1) is None
    assert found.original(3, 1) == (str(tmp_path / "dist/src/b.ts"), 4)  # before its first segment: that one


def test_how_a_file_names_its_map(tmp_path: Path) -> None:
    raw = json.dumps({"version": 3, "sources": ["../src/x.ts"], "mappings": "AAAA"})
    (tmp_path / "dist").mkdir()
    (tmp_path / "dist/x.js.map").write_text(raw)
    beside = source_map_of(tmp_path / "dist/x.js", "f();\n//# sourceMappingURL=x.js.map\n")
    assert isinstance(beside, SourceMap) and beside.sources == (str(tmp_path / "src/x.ts"),)
    inline = "f();\n//# sourceMappingURL=data:application/json;base64," + base64.b64encode(raw.encode()).decode()
    found = source_map_of(tmp_path / "dist/x.js", inline)
    assert isinstance(found, SourceMap) and found.original(1, 1) == (str(tmp_path / "src/x.ts"), 1)
    assert source_map_of(tmp_path / "dist/x.js", "f(); // no map") is None
    assert "cannot be read" in str(source_map_of(tmp_path / "dist/x.js", "//# sourceMappingURL=gone.map"))
    assert "not a local file" in str(source_map_of(tmp_path / "dist/x.js", "//# sourceMappingURL=https://cdn/x.map"))
    (tmp_path / "dist/bad.map").write_text('{"version": 2}')
    assert "not a version 3" in str(source_map_of(tmp_path / "dist/x.js", "//# sourceMappingURL=bad.map"))
