"""ProcessHandle's requests to a process that goes away."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from strobe.instrument.handle import ProcessGone, ProcessHandle


class SilentScript:
    """A frida Script stand-in whose agent never answers (the process is exiting)."""

    def __init__(self) -> None:
        self.posted: list[dict[str, Any]] = []

    def post(self, message: dict[str, Any]) -> None:
        self.posted.append(message)


class Unused:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the observer is not used here ({name})")


def handle() -> ProcessHandle:
    return ProcessHandle(pid=4242, session=None, script=SilentScript(), observer=Unused())


def test_a_request_waiting_when_the_process_detaches_fails_at_once() -> None:
    h = handle()
    failed: list[BaseException] = []

    def ask() -> None:
        try:
            h.set_follow([])
        except ProcessGone as exc:
            failed.append(exc)

    asker = threading.Thread(target=ask)
    asker.start()
    deadline = time.monotonic() + 10
    while not h.script.posted and time.monotonic() < deadline:  # the request is out, waiting for its reply
        time.sleep(0.001)
    h.fail_pending()
    asker.join(10)
    assert not asker.is_alive() and failed and "exited while its argument plans were being set" in str(failed[0])


def test_a_request_made_after_the_process_detached_fails_at_once_instead_of_waiting_60_s() -> None:
    h = handle()
    h.fail_pending()
    started = time.monotonic()
    with pytest.raises(ProcessGone, match=r"has exited \(its agent detached\); nothing was sent"):
        h.set_follow([])
    assert time.monotonic() - started < 5 and h.script.posted == []
