"""A crash report turned into a crash event: frames symbolized (return addresses looked up at address - 1),
the summary line, the stack dump, and what a frame that cannot be symbolized keeps."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from strobe.daemon.crashes import crash_row, describe_crash, summary
from strobe.instrument.protocol import CrashReport
from strobe.store.schema import EventKind
from strobe.symbols.addresses import SourceLocation


@pytest.fixture
def c_binary(c_target: Callable[[str], Path]) -> Path:
    return c_target("hello")  # a PIE: image base 0, so static = runtime - module base


def report(binary: Path, **extra: Any) -> CrashReport:
    fields: dict[str, Any] = {
        "type": "crash", "tid": 4242, "kind": "access-violation", "signal": "SIGSEGV", "address": "0x401136",
        "memory": {"operation": "write", "address": "0x0"},
        "registers": {"pc": "0x401136", "sp": "0x7ffe0000", "rbp": "0x7ffe0200"},
        "frames": [
            {"address": "0x401136", "module": str(binary), "base": "0x400000", "returnAddress": False},
            {"address": "0x401200", "module": str(binary), "base": "0x400000", "returnAddress": True},
            {"address": "0x401300", "module": str(binary), "base": "0x400000", "returnAddress": True,
             "scanned": True},
            {"address": "0x7f0000001000", "module": "/nonexistent/libgone.so", "base": "0x7f0000000000",
             "returnAddress": True},
        ],
        "stackBase": "0x7ffe0000", "stackSize": 640, "sec": 1, "nsec": 5,
    }
    fields.update(extra)
    return CrashReport.model_validate(fields)


def test_frames_are_located_at_the_call_and_the_event_says_where(c_binary: Path) -> None:
    asked: list[int] = []

    def locate(path: str, address: int) -> SourceLocation | None:
        asked.append(address)
        names = {0x1136: ("crash_worker", 12), 0x11FF: ("crasher", 30), 0x12FF: ("start", 40)}
        if address not in names:
            return None
        function, line = names[address]
        return SourceLocation(function, "/src/crash.c", line)

    event = describe_crash(report(c_binary), bytes(range(256)) * 2 + bytes(128), 7, locate, "crasher")
    assert asked == [0x1136, 0x11FF, 0x12FF]  # return addresses at - 1; the unreadable module is never asked
    assert [f.get("function") for f in event["backtrace"]] == ["crash_worker", "crasher", "start", None]
    assert event["backtrace"][2]["scanned"] is True and "scanned" not in event["backtrace"][1]
    assert event["backtrace"][3] == {"address": "0x7f0000001000", "module": "libgone.so"}
    assert (event["function"], event["sourceFile"], event["line"]) == ("crash_worker", "/src/crash.c", 12)
    assert (event["faultAddress"], event["access"], event["threadName"]) == ("0x0", "write", "crasher")
    assert event["frameMemory"]["belowFramePointer"] == 0x200 and event["frameMemory"]["size"] == 640
    assert event["text"] == "SIGSEGV (write of 0x0) in crash_worker at crash.c:12, thread crasher (4242)"

    row = crash_row(3, 7, 4242, 99, event)
    assert row[:5] == (3, 99, int(EventKind.CRASH), 7, 4242) and row[10] == event["text"]
    assert json.loads(row[12])["signal"] == "SIGSEGV" and "text" not in json.loads(row[12])


def test_a_crash_without_symbols_or_memory_access(c_binary: Path) -> None:
    plain = report(c_binary, kind="arithmetic", signal="SIGFPE", memory=None, frames=[])
    event = describe_crash(plain, b"", 7, lambda path, address: None, None)
    assert "access" not in event and "frameMemory" not in event and event["backtrace"] == []
    assert event["text"] == "SIGFPE at 0x401136, thread 4242"
    assert summary({"signal": "SIGILL", "address": "0x1", "threadId": 1, "function": "f"}) == "SIGILL in f, thread 1"
