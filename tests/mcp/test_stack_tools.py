"""debug_stacks' answer for the threads a diagnosis names (mcp/stack_tools.py), from stacks as eu-stack reads them."""

from __future__ import annotations

from strobe.daemon.live_stacks import LiveThread
from strobe.mcp.stack_tools import _about
from strobe.testing.stacks import Frame, ThreadStack
from strobe.testing.stuck import Wait

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"


def thread(*frames: Frame, waits: Wait | None) -> LiveThread:
    return LiveThread(7, "main", "waiting", 0.0, ThreadStack(7, "main", frames), False, waits)


def test_a_thread_blocked_in_a_library_call_names_that_call_and_its_own_function() -> None:
    about = _about(7, thread(Frame("futex_wait", None, LIBC), Frame("___pthread_mutex_lock", None, LIBC),
                             Frame("transfer", "bank.c:18", "/app/bank"), Frame("main", "bank.c:40", "/app/bank"),
                             waits=Wait.LOCK))
    assert about["function"] == "transfer" and about["at"].startswith("transfer at bank.c:18")
    assert about["blockedIn"].startswith("___pthread_mutex_lock") and about["waitsOn"] == "lock"


def test_main_waiting_in_pthread_join_is_blocked_in_the_join_not_in_start() -> None:
    """`main` and `_start` do not count as the user's own functions (a runtime may generate them), so the call the
    thread is blocked in is the last library call before the program's binary."""
    about = _about(7, thread(Frame("__futex_abstimed_wait_common", "./nptl/futex-internal.c:57", LIBC),
                             Frame("__pthread_clockjoin_ex", "./nptl/pthread_join_common.c:102", LIBC),
                             Frame("main", "/app/breaks.c:66", "/app/breaks"),
                             Frame("__libc_start_call_main", None, LIBC), Frame("_start", None, "/app/breaks"),
                             waits=Wait.EVENT))
    assert about["blockedIn"].startswith("__pthread_clockjoin_ex"), about
