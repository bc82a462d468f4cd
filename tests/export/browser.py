"""Headless Chromium for the HTML timeline's tests: the DOM after its script ran, a screenshot, and a small PNG
decoder (zlib + the five PNG filters) to read the screenshot's pixels. Chromium runs with a throwaway profile and
HOME, never the user's."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

WINDOW = (1200, 800)


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium; scripts/bootstrap.sh installs it)")
    return found


def _run(page: Path, scratch: Path, *flags: str, fragment: str = "") -> subprocess.CompletedProcess[str]:
    scratch.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(scratch), "XDG_CONFIG_HOME": str(scratch / "config"),
           "XDG_CACHE_HOME": str(scratch / "cache")}
    argv = [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-extensions", "--disable-background-networking", "--hide-scrollbars",
            f"--user-data-dir={scratch / 'profile'}", f"--window-size={WINDOW[0]},{WINDOW[1]}",
            "--force-device-scale-factor=1", "--enable-logging=stderr", "--v=0", *flags,
            page.resolve().as_uri() + fragment]
    return subprocess.run(argv, capture_output=True, text=True, timeout=90, env=env, check=False)


@dataclass(frozen=True)
class Rendered:
    dom: str
    status: dict[str, str]  # the #status element's attributes and text
    errors: str  # the #errors element's text (window.onerror writes there)
    console: str  # chromium's stderr: console messages and uncaught errors


def render(page: Path, scratch: Path, fragment: str = "") -> Rendered:
    done = _run(page, scratch, "--dump-dom", fragment=fragment)
    assert done.returncode == 0, done.stderr[-3000:]
    dom = done.stdout
    match = re.search(r'<div id="status"([^>]*)>(.*?)</div>', dom, re.S)
    assert match is not None, dom[:2000]
    status = {k: html.unescape(v) for k, v in re.findall(r'([\w-]+)="([^"]*)"', match.group(1))}
    status["text"] = html.unescape(match.group(2))
    errors = re.search(r'<div id="errors">(.*?)</div>', dom, re.S)
    return Rendered(dom, status, html.unescape(errors.group(1)) if errors else "<missing>", done.stderr)


def uncaught(console: str) -> list[str]:
    """Chromium's log lines that report a script error of the page."""
    return [line for line in console.splitlines()
            if "Uncaught" in line or ("CONSOLE" in line and "Error" in line)]


def screenshot(page: Path, scratch: Path) -> Path:
    out = scratch / "shot.png"
    done = _run(page, scratch, f"--screenshot={out}")
    assert done.returncode == 0 and out.exists(), done.stderr[-3000:]
    return out


def layout(status: dict[str, str]) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    return json.loads(status["data-canvas"]), json.loads(status["data-layout"]), json.loads(status["data-palette"])


# ---- PNG --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Image:
    width: int
    height: int
    rows: list[bytes]  # RGB, 3 bytes a pixel

    def pixel(self, x: int, y: int) -> tuple[int, int, int]:
        r = self.rows[y]
        return r[3 * x], r[3 * x + 1], r[3 * x + 2]

    def count(self, x0: int, y0: int, x1: int, y1: int, colors: set[tuple[int, int, int]]) -> int:
        return sum(1 for y in range(y0, y1) for x in range(x0, x1) if self.pixel(x, y) in colors)


def read_png(path: Path) -> Image:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
    channels = 3 if color == 2 else 4
    stride = width * channels
    raw = zlib.decompress(idat)
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + ((left + up) >> 1)) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        previous = line
        rgb = bytes(line) if channels == 3 else bytes(b for i, b in enumerate(line) if i % 4 != 3)
        rows.append(rgb)
    return Image(width, height, rows)


def hex_color(text: str) -> tuple[int, int, int]:
    return int(text[1:3], 16), int(text[3:5], 16), int(text[5:7], 16)


def slice_color(name: str, palette: list[str]) -> tuple[int, int, int]:
    """The page's colour for a function: FNV-1a of its name picks a palette entry (as timeline.html does)."""
    h = 2166136261
    for ch in name:
        h = ((h ^ ord(ch)) * 16777619) & 0xFFFFFFFF
    return hex_color(palette[h % len(palette)])
