"""Where a native breakpoint and a trace hook would overwrite each other's bytes, or a hook would break the
function: the sites and hooks left out, each with a warning saying why.

A trace hook (and an entry breakpoint, itself an entry hook) replaces up to HOOK_BYTES at a function's entry
with a jump; a line breakpoint puts an int3 at its line's first instruction. Neither may land in the other's
bytes, and no entry hook goes where one of the function's own branches lands in those bytes
(runtimes/native.unsafe_entries, symbols/hook_safety.py)."""

from __future__ import annotations

from typing import Any

from strobe.daemon.breakpoint_state import Breakpoint
from strobe.daemon.live import LiveSession
from strobe.daemon.runtimes.native import unsafe_entries
from strobe.daemon.symbols import TraceableFunction

HOOK_BYTES = 16  # what an Interceptor hook may overwrite at a traced function's entry


def under_line_breakpoints(live: LiveSession, desired: dict[Any, TraceableFunction]) -> list[str]:
    """Leave out of `desired` (hooks about to be made) the functions whose first bytes hold a line breakpoint's
    int3 (a hook's jump would overwrite it); a warning for each."""
    lines = [site.address for bp in live.breakpoints.breakpoints.values() for site in bp.sites
             if site.kind == "line" and site.runtime == "native"]
    warnings: list[str] = []
    for key, function in list(desired.items()):
        if function.runtime == "native" and any(0 <= a - function.runtime_address < HOOK_BYTES for a in lines):
            del desired[key]
            warnings.append(f"{function.name} was not hooked: a line breakpoint is set at its first instruction. "
                            "Remove that breakpoint (debug_breakpoint) to trace it.")
    return warnings


def drop_unhookable_sites(made: list[Breakpoint], hooked: list[TraceableFunction]) -> list[str]:
    """Leave out of new breakpoints the line sites at the start of a traced function (its hook's jump covers
    them) and the entry sites where a hook would break the function; a warning for each. Blocking (the entry
    check may read and disassemble the functions)."""
    traced = [f for f in hooked if f.runtime == "native"]
    warnings: list[str] = []
    for bp in made:
        clash = [s for s in bp.sites if s.kind == "line" and s.runtime == "native"
                 and any(0 <= s.address - f.runtime_address < HOOK_BYTES for f in traced)]
        if clash:
            names = ", ".join(sorted({str(s.function) for s in clash}))
            warnings.append(f"Breakpoint on '{bp.target}': {len(clash)} location(s) at the start of a traced "
                            f"function ({names}) left out: break at the function instead, or stop tracing it.")
            bp.sites = [s for s in bp.sites if s not in clash]
    unsafe = unsafe_entries([(s, s.traceable) for bp in made for s in bp.sites
                             if s.kind == "entry" and s.traceable is not None])
    for bp in made:
        warnings += [f"Breakpoint on '{bp.target}': {s.function} left out: {unsafe[s]}; break at a line inside it "
                     "instead." for s in bp.sites if s in unsafe]
        bp.sites = [s for s in bp.sites if s not in unsafe]
    return warnings
