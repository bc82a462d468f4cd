"""What every exported Chrome trace must satisfy, checked independently of the code that wrote it."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

PHASES = {"X", "B", "E", "i", "C", "M"}


def load_chrome(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text(encoding="utf-8"))  # strict: NaN or a trailing comma fail here
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    assert doc["displayTimeUnit"] == "ns"
    return doc


def check_chrome(doc: dict[str, Any]) -> dict[tuple[int, int], list[dict[str, Any]]]:
    """Well-formed events; B/E balanced per thread; X non-negative and properly nested per thread; every thread with
    events named by metadata. Returns each thread's slices, ordered as a viewer nests them."""
    events = doc["traceEvents"]
    named_threads = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    named_processes = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    open_b: dict[tuple[int, int], list[str]] = defaultdict(list)
    slices: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        assert e["ph"] in PHASES, e
        assert isinstance(e["pid"], int), e
        if e["ph"] == "M":
            continue
        assert isinstance(e["ts"], float) and e["ts"] >= 0, e
        assert e["pid"] in named_processes, e
        if e["ph"] == "B":
            open_b[(e["pid"], e["tid"])].append(e["name"])
        elif e["ph"] == "E":
            assert open_b[(e["pid"], e["tid"])], f"E without B: {e}"
            open_b[(e["pid"], e["tid"])].pop()
        elif e["ph"] == "X":
            assert isinstance(e["dur"], float) and e["dur"] >= 0, e
            assert (e["pid"], e["tid"]) in named_threads, e
            slices[(e["pid"], e["tid"])].append(e)
        elif e["ph"] == "i":
            assert e["s"] in ("t", "p", "g"), e
        elif e["ph"] == "C":
            assert e["args"] and all(isinstance(v, int | float) for v in e["args"].values()), e
    assert not any(open_b.values()), f"B without E: {dict(open_b)}"
    for thread, own in slices.items():
        own.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[dict[str, Any]] = []
        for e in own:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"] and stack[-1]["ts"] < e["ts"]:
                stack.pop()  # ended before this one began: a sibling, not a caller
            if stack:
                parent = stack[-1]
                assert e["ts"] + e["dur"] <= parent["ts"] + parent["dur"] + 1e-6, (
                    f"{thread}: {e['name']} [{e['ts']}, +{e['dur']}] overlaps its caller {parent['name']} "
                    f"[{parent['ts']}, +{parent['dur']}]")
            e["_depth"] = len(stack)
            stack.append(e)
    return slices


def html_data(path: Path) -> dict[str, Any]:
    """The JSON a timeline page embeds, read as a browser would see the element's text."""
    text = path.read_text(encoding="utf-8")
    match = re.search(r'<script type="application/json" id="strobe-data">(.*?)</script>', text, re.S)
    assert match is not None, "no embedded data"
    data: dict[str, Any] = json.loads(match.group(1))
    return data


def assert_offline(path: Path) -> None:
    """Nothing in the page is fetched: no external script, style, image or font."""
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]*\bsrc=", text, re.I)
    assert not re.search(r"<link\b", text, re.I)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text, re.I)
    assert "@import" not in text and "url(" not in text
