"""How a session's traced functions show their arguments, worked out off the hot path once hooks are in.

Per newly hooked function, from its DWARF: the register plan (daemon/signatures.py), stored with the function
so queries show typed arguments and return values, and the follow plan (daemon/follow.py), sent to the agent
so pointers to structs and C strings are followed while calls are recorded, with the register plan's
`capture` bits (float registers, stack words, rdx/xmm returns its calls must record). Calls recorded before a
function's plans land keep their integer registers; what they lack shows as not captured, saying why.

When: before the program runs for the functions staged patterns hook at launch (up to PLANS_BEFORE_RUN_S, so its
first calls look like the others); at once, in the background, for binaries of at most EAGER_MAX_BYTES; for larger
ones (where reading DWARF signatures takes seconds, see README "Performance") on the first verbose query, or when
the process ends by itself, so that work never competes with hooking or with the next launch. A verbose query waits
for planning in flight (up to its own limit).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from strobe.daemon.follow import FollowPlan, plan_function
from strobe.daemon.follow_decode import FollowDecoder
from strobe.daemon.ingest import TraceIngest
from strobe.daemon.signatures import register_plan
from strobe.daemon.symbols import TraceableFunction
from strobe.store import functions as store_functions

log = logging.getLogger(__name__)

EAGER_MAX_BYTES = 64 << 20  # binaries up to this size are planned as soon as they are hooked
PLANS_BEFORE_RUN_S = 5.0  # a launch waits this long at most for its staged hooks' plans before the program runs
DEFAULT_DEPTH = 3

Write = Callable[[Callable[[Any], Any]], Awaitable[Any]]  # runs a function on the writer's connection
Submit = Callable[[Callable[[], None]], Any]  # runs a function on the ingest thread, after queued batches
SendFollow = Callable[[list[dict[str, Any]]], Awaitable[None]]  # the agent's `follow` message
Spawn = Callable[[Coroutine[Any, Any, None]], "asyncio.Task[None]"]


class ArgumentTypes:
    """The argument plans of one session's hooked functions."""

    def __init__(self, ingest: TraceIngest, write: Write, submit: Submit, send_follow: SendFollow,
                 spawn: Spawn) -> None:
        self.ingest = ingest
        self._write = write
        self._submit = submit
        self._send_follow = send_follow
        self._spawn = spawn
        self.depth = DEFAULT_DEPTH  # serializationDepth: struct levels shown behind followed pointers
        self.following = True  # False once the process is gone: only the stored register plans still matter
        self.decoder = FollowDecoder()
        ingest.follow = self.decoder
        self._unplanned: list[tuple[int, TraceableFunction]] = []
        self._planned: dict[int, tuple[TraceableFunction, str]] = {}  # slot -> (function, register plan JSON)
        self._followed: set[int] = set()  # slots the agent follows pointers of
        self._wires: dict[int, dict[str, Any]] = {}  # slot -> its plan as last sent (for followed children)
        self._capture: dict[int, int] = {}  # slot -> records.WATCH_CAPTURE_* bits its register plan asks for
        self._task: asyncio.Task[None] | None = None
        self._version = 0

    def hooked(self, functions: list[tuple[int, TraceableFunction]]) -> None:
        """Functions just hooked (slot, function): planned now when their binaries are small enough."""
        functions = [(slot, f) for slot, f in functions if slot not in self._planned]
        self._unplanned += functions
        if functions and all(_small(f.module) for _, f in functions):
            self.start()

    async def before_hooks(self, functions: list[tuple[int, TraceableFunction]]) -> None:
        """Functions about to be hooked in a running program: when their binaries are small enough, their plans
        reach the agent first (up to PLANS_BEFORE_RUN_S), so that even their first calls record what their
        signatures need and follow their pointers."""
        if functions and all(_small(f.module) for _, f in functions):
            self._unplanned += [(slot, f) for slot, f in functions if slot not in self._planned]
            await self.wait(PLANS_BEFORE_RUN_S)

    def start(self) -> None:
        """Plan every hooked function not planned yet, in the background."""
        if self._unplanned and (self._task is None or self._task.done()):
            self._task = self._spawn(self._run())

    async def wait(self, wait_s: float) -> None:
        """Start planning what is left and wait up to wait_s for it (a verbose query shows typed values)."""
        self.start()
        if self._task is not None and not self._task.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._task), wait_s)

    async def set_depth(self, depth: int) -> None:
        """Change serializationDepth: the functions already planned are followed to the new depth from now on."""
        if depth == self.depth:
            return
        self.depth = depth
        planned = [(slot, function, plan) for slot, (function, plan) in self._planned.items()]
        if planned and self.following:
            follows = await asyncio.to_thread(_follow_plans, planned, depth)
            await self._send(follows, stop_others=True)

    def current_plans(self) -> list[dict[str, Any]]:
        """Every follow plan in force, as sent: what a newly followed child process gets."""
        return list(self._wires.values())

    async def _run(self) -> None:
        while self._unplanned:
            functions, self._unplanned = self._unplanned, []
            await self._plan(functions)

    async def _plan(self, functions: list[tuple[int, TraceableFunction]]) -> None:
        found = await asyncio.to_thread(_register_plans, functions)
        planned = [(slot, function, plan) for slot, function, plan in found if plan is not None]
        for slot, function, plan in planned:
            self._planned[slot] = (function, plan)
        if not planned:
            return
        ingest = self.ingest
        rows = [(ingest.slots[slot].db_key, plan) for slot, _, plan in planned if slot in ingest.slots]
        await self._write(lambda c: store_functions.set_signatures(c, rows))
        parsed = {slot: json.loads(plan) for slot, _, plan in planned}
        widths = {slot: int(p.get("registers", 6)) for slot, p in parsed.items()}
        self._capture.update((slot, int(p.get("capture", 0))) for slot, p in parsed.items())

        def widen() -> None:  # keep every register a plan reads (a struct may take two)
            for slot, width in widths.items():
                hooked = ingest.slots.get(slot)
                if hooked is not None:
                    ingest.hook(slot, hooked.db_key, max(hooked.params, width))

        self._submit(widen)
        depth = self.depth
        if self.following:
            follows = await asyncio.to_thread(_follow_plans, planned, depth)
            if depth == self.depth:  # else set_depth has re-planned every planned function meanwhile
                await self._send(follows, stop_others=False)

    async def _send(self, follows: list[tuple[int, FollowPlan | None]], stop_others: bool) -> None:
        """Send follow plans under a new version; `stop_others`: slots followed so far whose new plan is None
        stop being followed."""
        self._version += 1
        version = self._version
        wires: list[dict[str, Any]] = []
        for slot, plan in follows:
            capture = self._capture.get(slot, 0)
            if plan is not None:
                self.decoder.add(slot, version, plan)
                wires.append(plan.wire(slot, version))
                self._followed.add(slot)
            elif capture or (stop_others and slot in self._followed):
                wires.append({"id": slot, "version": version, "nodes": [], "slots": []})
                self._followed.discard(slot)
            else:
                continue
            if capture:
                wires[-1]["capture"] = capture
                self._wires[slot] = wires[-1]
            elif plan is not None:
                self._wires[slot] = wires[-1]
            else:
                self._wires.pop(slot, None)
        if wires:
            await self._send_follow(wires)


def _small(path: str) -> bool:
    try:
        return os.path.getsize(path) <= EAGER_MAX_BYTES
    except OSError:
        return False


def _register_plans(functions: list[tuple[int, TraceableFunction]]) -> list[tuple[int, TraceableFunction, str | None]]:
    out = []
    for slot, function in functions:
        try:
            plan = register_plan(function.module, function.info.address) if function.info.address else None
        except Exception:  # a plan is an extra: the raw registers stay available
            log.exception("no register plan for %s", function.name)
            plan = None
        out.append((slot, function, plan))
    return out


def _follow_plans(planned: list[tuple[int, TraceableFunction, str]], depth: int) -> list[tuple[int, FollowPlan | None]]:
    out: list[tuple[int, FollowPlan | None]] = []
    for slot, function, plan in planned:
        try:
            follow = plan_function(function.module, function.info.address, plan, depth)
        except Exception:  # following is an extra: the call is still recorded with its registers
            log.exception("no follow plan for %s", function.name)
            follow = None
        out.append((slot, follow))
    return out
