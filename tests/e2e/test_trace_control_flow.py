"""Native tracing under unusual control flow, end to end: deep recursion, many threads, C++ exceptions, longjmp,
tail calls, signal handlers (one on an alternate stack) and pthread_exit, against programs built now
(tests/targets/control_flow*.c, control_flow_cpp.cpp). Each program runs once with its functions hooked from its
start (staged patterns) and must behave exactly as it does untraced: same output, exit code 0. Then every traced
call is checked as debug_query shows it: its enter with its arguments, its exit with its return value, and its
place in the call tree that the events' parentEventId links draw, thread by thread.

Frames left without returning (unwound by an exception, a longjmp or pthread_exit) are checked only for their
enter: whether they get an exit event is left open (today they get none). What is checked is that the program is
unharmed and that the calls after them are recorded in full, in the right place. The functions are traced through
the fast path (agent/src/native/fastpath.ts); with Frida's Interceptor.attach, as before it, an exception leaving a
traced function ended in std::terminate, and a longjmp out of a recursion into its own outer level derailed the
program's return."""

from __future__ import annotations

import bisect
import re
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest

from tests.conftest import TARGETS, StrobeClient, poll

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

NO_EXIT = "<no exit event>"
# What one call should look like: function, arguments, return value (ANY: not checked), the calls made from it.
Shape = tuple[str, list[Any], Any, list["Shape"]]


def called(function: str, arguments: list[Any], returned: Any, *calls: Shape) -> Shape:
    return (function, arguments, returned, list(calls))


def seq(event: dict[str, Any]) -> int:
    """An event's place in the session: ids are '<session>-<n>', n in the order the agent recorded them."""
    return int(event["id"].rsplit("-", 1)[1])


@dataclass
class Call:
    """One traced call as debug_query shows it: its enter event, its exit event (None: there is none), the calls
    whose parentEventId names its enter, and the call its own parentEventId names (None: a root)."""

    enter: dict[str, Any]
    exit: dict[str, Any] | None = None
    calls: list[Call] = field(default_factory=list)
    parent: Call | None = None

    @property
    def function(self) -> str:
        return str(self.enter["function"])

    def shape(self) -> Shape:
        returned = NO_EXIT if self.exit is None else self.exit.get("returnValue")
        return (self.function, self.enter["arguments"], returned, [c.shape() for c in self.calls])

    def depth(self) -> int:
        return 0 if self.parent is None else 1 + self.parent.depth()


def call_trees(enters: list[dict[str, Any]], exits: list[dict[str, Any]]) -> dict[str, list[Call]]:
    """Each thread's root calls (by thread name), the tree drawn by parentEventId alone. An exit belongs to the
    latest enter still without one of the same function, thread and parent (an exit names its caller's enter, as
    its enter does): in a correctly nested thread that is its own call."""
    calls: dict[str, Call] = {}
    roots: dict[int, list[Call]] = {}
    names: dict[int, str] = {}
    waiting: dict[tuple[int, str | None, str], list[Call]] = {}
    for event in sorted([*enters, *exits], key=seq):
        tid = event["threadId"]
        assert names.setdefault(tid, event["threadName"]) == event["threadName"], event
        parent_id = event.get("parentEventId")
        key = (tid, parent_id, event["function"])
        if event["eventType"] == "function_enter":
            call = Call(event)
            if parent_id is None:
                roots.setdefault(tid, []).append(call)
            else:
                assert parent_id in calls, f"parent {parent_id} is not an earlier enter: {event}"
                call.parent = calls[parent_id]
                assert call.parent.enter["threadId"] == tid, f"a parent on another thread: {event}"
                call.parent.calls.append(call)
            calls[event["id"]] = call
            waiting.setdefault(key, []).append(call)
        else:
            assert waiting.get(key), f"an exit with no enter left to close: {event}"
            waiting[key].pop().exit = event
    assert len(set(names.values())) == len(names), f"two threads share a name: {names}"
    for call in calls.values():
        if call.exit is not None:  # a call that returned returned after everything made from it
            assert all(seq(e) < seq(call.exit) for e in events_under(call)), call.enter
    return {names[tid]: roots.get(tid, []) for tid in names}


def events_under(call: Call) -> Iterable[dict[str, Any]]:
    yield call.enter
    for inner in call.calls:
        yield from events_under(inner)
        if inner.exit is not None:
            yield inner.exit


def shapes(calls: Iterable[Call]) -> list[Shape]:
    return [c.shape() for c in calls]


def rehome(roots: list[Call], functions: set[str], unwound: set[str]) -> None:
    """Move each call of `functions` made right after an unwind from under the unwound frames it may be shown in
    to the first ancestor that is not one of `unwound` (or to the roots).

    Why: today's tracer keeps a thread's unwound frames open until a frame below them returns, so a call made in
    the frame an exception or longjmp landed in, before that frame returns, is shown under the innermost unwound
    frame (a stale parent) instead of under the frame it was made from. A tracer that drops unwound frames shows it
    in the right place. Both pass after this; a call shown anywhere else (another round's frame, another thread)
    still fails the comparison."""

    def walk(calls: list[Call]) -> Iterable[Call]:
        for call in list(calls):
            yield call
            yield from walk(call.calls)

    for call in list(walk(roots)):
        if call.function not in functions or call.parent is None or call.parent.function not in unwound:
            continue
        home: Call | None = call.parent
        while home is not None and home.function in unwound:
            home = home.parent
        call.parent.calls.remove(call)
        call.parent = home
        siblings = roots if home is None else home.calls
        bisect.insort(siblings, call, key=lambda c: seq(c.enter))


@dataclass
class Traced:
    output: str
    threads: dict[str, list[Call]]  # root calls by thread name

    def only_thread(self) -> list[Call]:
        assert len(self.threads) == 1, list(self.threads)
        return next(iter(self.threads.values()))


async def run_traced(strobe: StrobeClient, project: Path, command: list[str], patterns: list[str]) -> Traced:
    """Run `command` untraced, then under Strobe with `patterns` hooked from its start (each names one function);
    check that it behaved the same and return its traced calls."""
    untraced = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert (untraced.returncode, untraced.stderr) == (0, ""), untraced
    staged = await strobe.call("debug_trace", add=patterns, projectRoot=str(project))
    assert staged["mode"] == "pending"
    launched = await strobe.call("debug_launch", command=command[0], args=command[1:], projectRoot=str(project))
    assert launched["hookedFunctions"] == len(patterns) and "warnings" not in launched, launched
    sid = launched["sessionId"]

    async def ended() -> dict[str, Any] | None:
        sessions = (await strobe.call("debug_list_sessions"))["sessions"]
        session = next(s for s in sessions if s["sessionId"] == sid)
        return None if session["status"] == "running" else session

    session = await poll(ended, 60, f"{command} to end")
    assert (session["status"], session.get("exitCode")) == ("exited", 0), session
    output = "".join(e["text"] for e in await strobe.all_events(sid, eventType="stdout"))
    assert output == untraced.stdout
    assert await strobe.all_events(sid, eventType="stderr") == []
    enters = await strobe.all_events(sid, eventType="function_enter", verbose=True)
    exits = await strobe.all_events(sid, eventType="function_exit", verbose=True)
    assert "warnings" not in await strobe.call("debug_query", sessionId=sid, limit=1)  # nothing dropped or sampled
    return Traced(output, call_trees(enters, exits))


def triangle(n: int) -> int:
    return n * (n + 1) // 2


async def test_recursion_each_level_with_its_return_value(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    run = await run_traced(strobe, project, [str(c_target("control_flow")), "recursion"], ["sum_to", "leaf"])
    assert run.output.splitlines() == ["sum_to(5)=15", "sum_to(200)=20100", "leaf(1)=2", "recursion done"]
    small, deep, *rest = run.only_thread()

    def chain(n: int, levels: int) -> Shape:
        inner = [chain(n - 1, levels - 1)] if n > 0 and levels > 1 else []
        return called("sum_to", [n], triangle(n), *inner)

    assert small.shape() == chain(5, 6)  # six levels, each returning n(n+1)/2: 15, 10, 6, 3, 1, 0

    # sum_to(200): 201 levels, each with its enter, its exit and its exact return value. Their links: today's tracer
    # keeps 126 open calls per thread (MAX_DEPTH in agent/src/native/layout.ts), so the calls at depth 0..126 (127
    # levels: n = 200..74) are linked each to its caller, and the deeper ones (n = 73..0, depth 127..200) have no
    # parentEventId: debug_query shows them as roots, one after the other, and their exits have none either.
    linked = 127
    assert deep.shape() == chain(200, linked)
    assert shapes(rest) == [*(called("sum_to", [n], triangle(n)) for n in range(200 - linked, -1, -1)),
                            called("leaf", [1], 2)]
    levels = [deep]
    while levels[-1].calls:
        levels.append(levels[-1].calls[0])
    assert [c.depth() for c in levels] == list(range(linked))
    assert all(c.exit is not None and c.exit.get("parentEventId") == c.enter.get("parentEventId")
               for c in [*levels, *rest])
    # The thread's stack is whole again after the deep calls returned: leaf(1) is a root, as it was called.
    assert rest[-1].depth() == 0 and rest[-1].exit is not None


async def test_eight_threads_at_once_every_call_in_its_thread(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    calls = 100
    run = await run_traced(strobe, project, [str(c_target("control_flow")), "threads"], ["thread_work", "thread_leaf"])
    sums = [2 * (1000 * t * calls + calls * (calls - 1) // 2) + calls for t in range(8)]
    assert run.output.splitlines() == [*(f"thread {t} sum={s}" for t, s in enumerate(sums)), "threads done"]
    assert sorted(run.threads) == [f"cf-{t}" for t in range(8)]
    for t in range(8):
        values = [1000 * t + k for k in range(calls)]
        assert shapes(run.threads[f"cf-{t}"]) == [
            called("thread_work", [t, k], 2 * v + 1, called("thread_leaf", [v], 2 * v)) for k, v in enumerate(values)
        ], f"thread cf-{t}"


CPP_ROUNDS = 50
# What control_flow_cpp prints, untraced: every throw was caught where it should be (the totals of what the catching
# functions returned), every Guard on the way destroyed (50 from catch_outer's rounds, 1 from main's own try), and
# the program ran to its end.
CPP_OUTPUT = [
    "catch_outer total=12300", "after_catch total=1575", "catch_own total=6225", "catch_rethrown total=51225",
    "caught in main=50", "guards destroyed=51", "after_catch(99)=106", "done",
]


async def test_cpp_exceptions_caught_by_traced_functions(
    strobe: StrobeClient, cpp_target: Callable[[str], Path], project: Path
) -> None:
    """Traced functions catch what untraced ones threw (no traced frame in between), and one throws and catches
    inside itself: every traced call returns normally and is recorded whole."""
    patterns = ["catch_outer", "after_catch", "catch_own", "in_catch", "catch_rethrown"]
    run = await run_traced(strobe, project, [str(cpp_target("control_flow_cpp"))], patterns)
    assert run.output.splitlines() == CPP_OUTPUT
    assert shapes(run.only_thread()) == [
        *(s for i in range(CPP_ROUNDS) for s in (
            called("catch_outer", [i], 10 * i + 1),
            called("after_catch", [i], i + 7),
            called("catch_own", [i], 100 + i),
            # in_catch runs in the untraced rethrow_middle's catch block, before it rethrows.
            called("catch_rethrown", [i], 1000 + i, called("in_catch", [i], 2 * i)),
        )),
        called("after_catch", [99], 106),
    ]


# Today's tracer hooks with Frida's Interceptor.attach, which replaces a traced call's return address with its
# on-leave trampoline: code without unwind information, so the C++ unwinder cannot step from a traced frame to its
# caller. The first exception that leaves a traced function (throw_inner's, in catch_outer(0)) ends in
# std::terminate (with the default handler: "terminate called after throwing an instance of 'Failure'" and SIGABRT;
# the target's own handler exits with 70 instead). Remove the mark when the tracer lets exceptions through (strict:
# the test fails as soon as it passes).
async def test_cpp_exceptions_unwind_through_traced_frames(
    strobe: StrobeClient, cpp_target: Callable[[str], Path], project: Path
) -> None:
    patterns = ["throw_inner", "pass_middle", "catch_outer", "after_catch", "catch_own", "in_catch", "rethrow_middle",
                "catch_rethrown"]
    run = await run_traced(strobe, project, [str(cpp_target("control_flow_cpp"))], patterns)
    assert run.output.splitlines() == CPP_OUTPUT
    roots = run.only_thread()
    # in_catch runs in rethrow_middle's catch block, after throw_inner was unwound; after_catch(99) runs in main
    # after main's own catch unwound pass_middle and throw_inner. A tracer that keeps unwound frames open until a
    # frame below them returns shows them under throw_inner; see rehome.
    rehome(roots, {"in_catch"}, {"throw_inner"})
    rehome(roots, {"after_catch"}, {"pass_middle", "throw_inner"})
    expected: list[Shape] = []
    for i in range(CPP_ROUNDS):
        expected += [
            # Thrown in throw_inner, through pass_middle, caught in catch_outer, which returns normally: its exit
            # and return value are there. The two unwound frames: their exits are not checked.
            called("catch_outer", [i], 10 * i + 1, called("pass_middle", [i], ANY, called("throw_inner", [i], ANY))),
            # The next call in the same thread: both events, a root as it should be.
            called("after_catch", [i], i + 7),
            # Thrown and caught inside one traced function.
            called("catch_own", [i], 100 + i),
            # Caught in rethrow_middle, which calls in_catch and rethrows to catch_rethrown.
            called("catch_rethrown", [i], 1000 + i, called(
                "rethrow_middle", [i], ANY, called("throw_inner", [i], ANY), called("in_catch", [i], 2 * i))),
        ]
    expected += [called("pass_middle", [CPP_ROUNDS], ANY, called("throw_inner", [CPP_ROUNDS], ANY)),
                 called("after_catch", [99], 106)]
    assert shapes(roots) == expected


async def test_longjmp_out_of_traced_frames_a_thousand_times(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    patterns = ["jump_runner", "jump_via", "jump_down", "after_jump", "leaf"]
    run = await run_traced(strobe, project, [str(c_target("control_flow")), "longjmp"], patterns)
    jumps, from_main = 1000, 200
    assert run.output.splitlines() == [
        f"jump_runner total={sum(4 * i + 1 for i in range(jumps))}",
        f"from main total={sum(4 * i + 1 for i in range(from_main))}",
        "leaf(2)=3", "longjmp done",
    ]
    roots = run.only_thread()
    # after_jump(i) is called in jump_runner right after the longjmp landed there: today it is shown under the
    # unwound jump_down(i) (see rehome). From main, each jump_via(i) and after_jump(i) comes after earlier rounds'
    # unwound frames: today they are shown under the previous round's unwound jump_down, for as long as the thread's
    # 126-frame stack has room (two frames leak per round); past it, with no parent at all.
    rehome(roots, {"after_jump", "jump_via"}, {"jump_via", "jump_down"})
    in_runner = [
        called("jump_runner", [i], 4 * i + 1,
               called("jump_via", [i], ANY, called("jump_down", [i], ANY)), called("after_jump", [i], 3 * i))
        for i in range(jumps)
    ]
    assert shapes(roots[:jumps]) == in_runner
    # From main: jump_down is called normally from jump_via, so it is checked under it; today that holds only while
    # the leaked frames fit in the thread's stack (the first 63 rounds: two frames each, 126 in all); in later rounds
    # jump_down has no parent, so those rounds are checked for their calls and return values alone.
    fits = 63
    tail = roots[jumps:]
    flat = [c for c in tail if c.function != "jump_down"]
    assert [c.shape()[:3] for c in flat] == [
        *(s for i in range(from_main) for s in (("jump_via", [i], ANY), ("after_jump", [i], 3 * i))),
        ("leaf", [2], 3),
    ]
    assert shapes(tail[:2 * fits]) == [
        s for i in range(fits)
        for s in (called("jump_via", [i], ANY, called("jump_down", [i], ANY)), called("after_jump", [i], 3 * i))
    ]
    downs = [c for r in tail for c in (r, *r.calls) if c.function == "jump_down"]
    assert [c.enter["arguments"] for c in downs] == [[i] for i in range(from_main)]
    assert tail[-1].depth() == 0 and tail[-1].exit is not None  # leaf(2): a root with its exit, last


# Today's tracer: when the outermost descend(3) returns, Frida's Interceptor drops the entries of unwound calls above
# it only down to the first entry of the same function, which is the innermost descend(0)'s: descend(3) returns
# through descend(0)'s saved return address, into the dead descend(1) frame, and the program goes astray (it exits
# with 236, its output unwritten). Remove the mark when the tracer tells the frames of a recursion apart (strict: the
# test fails as soon as it passes).
async def test_longjmp_from_a_recursion_into_its_outer_level(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    run = await run_traced(strobe, project, [str(c_target("control_flow")), "longjmp_recursive"], ["descend", "leaf"])
    assert run.output.splitlines() == ["descend total=5015", "leaf(6)=7", "longjmp_recursive done"]
    descent = called("descend", [3, 3], 1003, called(
        "descend", [2, 3], ANY, called("descend", [1, 3], ANY, called("descend", [0, 3], ANY))))
    assert shapes(run.only_thread()) == [*[descent] * 5, called("leaf", [6], 7)]


@pytest.fixture(scope="session")
def tail_target(build_dir: Path) -> Path:
    """tests/targets/control_flow_tail.c built with -O2, each of its tail calls checked to be a `jmp`."""
    binary = build_dir / "control_flow_tail"
    if not binary.exists():
        subprocess.run(["gcc", "-g", "-O2", "-o", str(binary), str(TARGETS / "control_flow_tail.c")], check=True)
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(binary)], capture_output=True, text=True,
                             check=True).stdout
    bodies = dict(re.findall(r"^[0-9a-f]+ <(\w+)>:\n(.*?)(?:\n\n|\Z)", listing, re.M | re.S))
    for caller, callee in [("tail_caller", "tail_callee"), ("is_even", "is_odd"), ("is_odd", "is_even"),
                           ("tail_to_untraced", "untraced_hop")]:
        assert re.search(rf"\sjmp\s+[0-9a-f]+ <{callee}>", bodies[caller]), (caller, bodies[caller])
        assert not re.search(rf"\scall\s+[0-9a-f]+ <{callee}>", bodies[caller]), (caller, bodies[caller])
    return binary


async def test_tail_calls_between_traced_functions(strobe: StrobeClient, tail_target: Path, project: Path) -> None:
    patterns = ["tail_caller", "tail_callee", "is_even", "is_odd", "tail_to_untraced", "tail_leaf"]
    run = await run_traced(strobe, project, [str(tail_target)], patterns)
    assert run.output.splitlines() == ["tail_caller total=2570", "is_even(9)=0", "tail_to_untraced(5)=26",
                                       "calls counted=53"]

    def parity(n: int) -> Shape:  # is_even(9) jumps to is_odd(8), ... to is_odd(0): every level returns 0
        inner = [parity(n - 1)] if n > 0 else []
        return called("is_even" if n % 2 else "is_odd", [n], 0, *inner)

    # A function that jumps to another returns through it: both exits carry the callee's result, the callee's
    # first (call_trees checks that order); the callee is shown under the function that jumped to it. tail_leaf,
    # called (not jumped to) by the untraced untraced_hop that tail_to_untraced jumped to, hangs under
    # tail_to_untraced.
    assert shapes(run.only_thread()) == [
        *(called("tail_caller", [x], 11 * x + 13, called("tail_callee", [x + 1, x], 11 * x + 13))
          for x in range(1, 21)),
        parity(9),
        called("tail_to_untraced", [5], 26, called("tail_leaf", [5], 25)),
    ]


async def test_signal_handlers_call_traced_functions(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    patterns = ["raise_from", "wait_for_alarm", "raise_on_altstack", "in_handler", "signal_leaf", "leaf"]
    run = await run_traced(strobe, project, [str(c_target("control_flow")), "signals"], patterns)
    sigusr1, sigalrm, sigusr2 = 10, 14, 12
    rounds = 4
    # The main thread's round k: raise_from(k) returns 10 k + 1, wait_for_alarm(k) 20 k + 1, raise_on_altstack(k)
    # 30 k + 1 (the 1: its own signal was handled once while it ran); the n-th signal handled calls in_handler(sig, n).
    # Then cf-alt's raise_on_altstack(k), n = 12 + k.
    main = [(name, k, (j + 1) * 10 * k + 1, sig, 3 * k + j) for k in range(rounds) for j, (name, sig) in
            enumerate([("raise_from", sigusr1), ("wait_for_alarm", sigalrm), ("raise_on_altstack", sigusr2)])]
    alt = [("raise_on_altstack", k, 30 * k + 1, sigusr2, 3 * rounds + k) for k in range(rounds)]
    assert run.output.splitlines() == [
        *(f"{name}({k})={returned}" for name, k, returned, _, _ in main),
        "cf-alt: altstack above its stack=1",
        *(f"cf-alt: {name}({k})={returned}" for name, k, returned, _, _ in alt),
        # SIGUSR2's handler ran on the alternate stack, the others on the thread's own.
        *(f"handler {n}: {100 * sig + 7 * n} altstack={int(sig == sigusr2)}" for _, _, _, sig, n in main + alt),
        "leaf(3)=4", "signals done",
    ]

    def interrupted(name: str, k: int, returned: int, sig: int, n: int) -> Shape:
        return called(name, [k], returned,
                      called("in_handler", [sig, n], 100 * sig + 7 * n, called("signal_leaf", [n], 7 * n)))

    # A handler's calls are shown under the traced call the signal interrupted (the handler runs on that thread,
    # inside that call), whether it runs on the thread's stack or on an alternate one, below the thread's stack (the
    # main thread's, malloc'd) or above it (cf-alt's, in the main thread's stack: a tracer that took a call on a
    # higher stack address for a return from the frames below would lose them here).
    assert sorted(run.threads) == ["cf-alt", "control_flow"]
    assert shapes(run.threads["control_flow"]) == [*(interrupted(*m) for m in main), called("leaf", [3], 4)]
    assert shapes(run.threads["cf-alt"]) == [interrupted(*a) for a in alt]


async def test_pthread_exit_from_inside_traced_frames(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path
) -> None:
    run = await run_traced(strobe, project, [str(c_target("control_flow")), "pthread_exit"],
                           ["exit_outer", "exit_inner", "leaf"])
    exiting = 6
    assert run.output.splitlines() == [
        *(f"thread {i} exited with {10 * i + 1}" for i in range(exiting)),
        "after thread returned 5", "leaf(5)=6", "pthread_exit done",
    ]
    assert sorted(run.threads) == sorted(["control_flow", "px-after", *(f"px-{i}" for i in range(exiting))])
    for i in range(exiting):  # each thread ended inside exit_inner: no frame of it returned (today: no exits)
        assert shapes(run.threads[f"px-{i}"]) == [called("exit_outer", [i], ANY, called("exit_inner", [i], ANY))]
    # Later threads and the main thread: every call with both events, each a root.
    assert shapes(run.threads["px-after"]) == [called("leaf", [4], 5)]
    assert shapes(run.threads["control_flow"]) == [called("leaf", [5], 6)]
