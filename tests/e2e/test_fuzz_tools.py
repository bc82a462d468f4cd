"""Every tool fuzzed through a real `strobe mcp` (issue 15, item 11).

Hypothesis draws each tool's arguments from the inputSchema that tools/list gives, plus boundary and invalid values
written by hand (empty, at-limit and past-limit strings, NUL, lone surrogates, paths too long for the kernel, 2^63,
floats for integers, wrong types, unknown keys, missing required keys, relative paths, arrays one past their limit,
session ids that do not exist, arguments that are not an object); a table of edge calls (`edge_calls`) runs first
every time. Valid session and test-run ids point at a live and an ended session of this file's own C program,
compiled at test time. The calls go over stdio as raw JSON-RPC lines, so whatever shape a client could send reaches
the server as sent. Every answer must be a result, a tool error carrying one of the spec's codes other than
INTERNAL_ERROR (with a message of bounded length), or a JSON-RPC error with one of JSON-RPC's own request codes; no
call may go unanswered, the daemon must never restart, and afterwards it must still launch, read, query and stop on
the same connection, answer a fresh one, and have every session ended.

STROBE_FUZZ_EXAMPLES sets the examples per tool: 40 by default (about 700 calls in all, derandomized so that every
run makes the same calls), 500 with `make fuzz` (about 6,000 calls, random, with a hypothesis database in a temporary
directory). The summary (calls made, outcomes, the slowest call per tool, findings, ERROR lines of daemon.log) is
printed at the end: run with -s to see it; STROBE_FUZZ_TRACE=1 prints every call on stderr as it is made.

What may run: programs are launched only from the two builds of FUZZ_TARGET below. A `command`, debug_test's
`projectRoot` and `framework`, and a watch's JavaScript `expr` are never free text: they come from fixed lists of
strings that no PATH lookup, shell or JavaScript engine can turn into anything but an error (see UNSAFE).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import select
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import configuration as hypothesis_configuration
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.strategies import SearchStrategy

from strobe.errors import ErrorCode
from tests.conftest import connect

EXAMPLES = int(os.environ.get("STROBE_FUZZ_EXAMPLES", "40"))
TRACE_CALLS = bool(os.environ.get("STROBE_FUZZ_TRACE"))  # every call, its time and outcome, on stderr
FULL = "STROBE_FUZZ_EXAMPLES" in os.environ  # `make fuzz`: random and long; the default is CI's short, fixed run
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(0 if FULL else 150)]

CALL_TIMEOUT_S = 60.0  # debug_test_status alone may wait 15 s for a run
# An error's message is read by an LLM: it may echo an input (two 4,096-character paths fit), never a list of them all.
MAX_ERROR_MESSAGE = 16_384
JSONRPC_REQUEST_CODES = {-32700: "parse error", -32600: "invalid request", -32601: "method not found",
                         -32602: "invalid params"}
SPEC_CODES = {code.value for code in ErrorCode} - {ErrorCode.INTERNAL_ERROR.value}
KNOWN_TOOLS = {"debug_launch", "debug_stop", "debug_list_sessions", "debug_delete_session", "debug_trace",
               "debug_query", "debug_read", "debug_test", "debug_test_status", "debug_breakpoint", "debug_logpoint",
               "debug_continue", "debug_write", "debug_input", "debug_stacks", "debug_export"}

FUZZ_TARGET = r"""
/* The fuzz test's program: globals of several shapes to read and watch, a few functions to trace. Built twice:
 * -DFOREVER loops (one call of tick() every 10 ms, a line of output a second) until killed; without it, it exits. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct node { int value; struct node *next; };
struct config { int limits[4]; double ratio; char name[16]; };

int gCounter;
static long gStatic = 42;
struct config gConfig = {{1, 2, 3, 4}, 0.5, "fuzz"};
struct node gTail = {2, NULL};
struct node gFirst = {1, &gTail};
struct node *gHead = &gFirst;
struct node *gNull = NULL;
const char *gMessage = "hello";

__attribute__((noinline)) int compute(int a, int b) { return a * b + gConfig.limits[a & 3] + (int)gStatic; }
__attribute__((noinline)) struct node *walk(struct node *n) { while (n && n->next) n = n->next; return n; }
__attribute__((noinline)) void tick(int i) { gCounter = compute(i, 3); walk(gHead); }

int main(int argc, char **argv) {
    printf("fuzz target ready, %d arguments\n", argc - 1);
    fflush(stdout);
    fprintf(stderr, "a line on stderr\n");
#ifdef FOREVER
    for (int i = 0;; i++) {
        tick(i);
        if (i % 100 == 0) { printf("tick %d\n", i); fflush(stdout); }
        usleep(10000);
    }
#else
    tick(argc);
    return 0;
#endif
}
"""


# ---- values known only at call time -------------------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    """Drawn as itself, replaced by the harness's current value when the call is sent (a live session's id)."""

    name: str

    def __repr__(self) -> str:
        return f"<{self.name}>"


LIVE, ENDED, RUN, COUNTER_ADDRESS = Ref("live session"), Ref("ended session"), Ref("test run"), Ref("&gCounter")
MISSING = Ref("no arguments key")  # the whole `arguments` member left out


def resolve(value: Any, refs: dict[Ref, Any]) -> Any:
    if isinstance(value, Ref):
        return value if value is MISSING else refs[value]
    if isinstance(value, dict):
        return {key: resolve(item, refs) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, refs) for item in value]
    return value


# ---- strategies ------------------------------------------------------------------------------------------------

# Strings safe wherever they go, a command or a shell line included: none names a program, none expands to one.
SAFE_NASTY = ["", " ", "\x00", "a\x00b", "\n", "\t", "é", "😀", "\u202e\u0000x", "\udcff", "\ufeff", "../..",
              "relative/dir", ".", "..", "~", "-", "--help", "null", "0", "-1", "%s%n%x", "'\"", "\\", "${HOME}",
              "' OR 1=1 --", "\r\n\r\n"]
SAFE_CHARS = ["a", "é", "😀", "\x00"]  # what long strings are made of where free text is not allowed
FREE_CHARS = [*SAFE_CHARS, "/", " ", "*"]
LONG_LENGTHS = [256, 257, 4096, 4097, 65536, 131072, 131073]
NONEXISTENT = "/nonexistent-strobe-fuzz"
# Paths the kernel refuses to look up (ENAMETOOLONG): a name over 255 bytes, a path over 4,095.
LONG_PATHS = [f"{NONEXISTENT}/{'a' * 256}", f"{NONEXISTENT}/{'é' * 128}", f"{NONEXISTENT}/{'a' * 255}",
              "/" + ("a" * 200 + "/") * 21, "a/" * 2040, "/tmp/" + "b" * 300 + "/x"]
INT_EDGES = [0, -1, 1, 2**31 - 1, 2**31, 2**32, 2**53 + 1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64,
             10**40, -(10**40)]
FLOAT_EDGES = [0.0, -0.0, 0.5, 1.0, 50.0, -1.5, 1e308, -1e308, 5e-324, float("inf"), float("nan")]
JSON_SCALARS = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20))
ANY_JSON = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)
NON_STRINGS = st.sampled_from([0, -1, 1.5, True, False, None, [], {}, ["x"], {"a": 1}])


@dataclass(frozen=True)
class Values:
    """A field's values: `good` ones get past validation so that the handler runs (valid draws use only them), `junk`
    ones should be refused (bad draws mix them with good ones and with the schema's own boundaries)."""

    good: SearchStrategy[Any]
    junk: SearchStrategy[Any] | None = None


PATTERNS = Values(st.sampled_from([
    "tick", "compute", "walk", "main", "@usercode", "@file:fuzz_target.c", "ti*", "*", "**", "*::tick", "a::**",
    "**::x", "no_such_function", "pkg.mod.func", "*.validate", "shop.**",
]), st.sampled_from(["::", "@", "@nonsense", "@file:", "@file:nope.c", "", " ", "t[", "\\", "tick\x00"])
    | st.text(max_size=30))
VARIABLES = Values(st.sampled_from([
    "gCounter", "gStatic", "gConfig", "gConfig.limits", "gConfig.limits[2]", "gConfig.ratio", "gConfig.name",
    "gHead", "gHead->next", "gHead->next->value", "gMessage", "gConfig.limits[4]", "gConfig.limits[-1]",
    "gHead->next->next->value", "gNull->value", "gNull", "gHead->value->next", "gConfig->limits", "no_such_variable",
    "app.config.timeout", "__main__.counter", "gHead->next->next->next->next->next",
]), st.sampled_from([
    "gConfig.limits[99999999999999999999]", "1", "-", "gCounter.", ".gCounter", "gCounter[0]", "gConfig.",
]) | st.text(min_size=1, max_size=40))
ADDRESSES = Values(st.just(COUNTER_ADDRESS) | st.sampled_from(["0x0", "0x1", "0xdeadbeef", "0x7fffffffffff",
                                                              "0xffffffffffffffff", "0XABC"]),
                   st.sampled_from(["0x10000000000000000", "0x", "deadbeef", "0xg", "-0x10", " 0x10", "0x" + "f" * 17])
                   | st.text(max_size=20))
# JavaScript run in the target: never free text (an infinite loop would hang it), only these and operator soup.
EXPRESSIONS = Values(st.sampled_from([
    "1", "1+1", "Process.id", "ptr('0x0').readU32()", "ptr('0xdeadbeef').readU64()", "throw new Error('x')",
    "undefined", "null", "'a'.repeat(100000)", "[1,2,3]", "({a: {b: {c: 1}}})", "this", "Symbol()", "1n",
    "new ArrayBuffer(8)", "ptr(0)", "x", "0/0",
]), st.text(alphabet="0123456789+-*/()'\"[]{}.,;:!<>=&|^~ ", min_size=1, max_size=40))
TIMES = Values(st.sampled_from(["2s", "-5s", "0s", "1ms", "-1ns", "1.5s", 0, 1000, 10**12, 2**63 - 1, -(2**63)]),
               st.sampled_from(["0", "-0s", "1e9s", "99999999999999999999s", "s", "-", "5 s", "1h", "", 2**63,
                                -(2**63) - 1]) | st.integers() | st.text(max_size=10))
MATCHERS = {
    "function": Values(st.sampled_from([{"equals": "tick"}, {"contains": "com"}, {"matches": "^t"},
                                        {"matches": "(a+)+$"}, {"equals": "tick", "contains": "t"},
                                        {"matches": ".*" * 50}, {"matches": "(?i)TICK"}]),
                       st.sampled_from([{"matches": "["}, {"matches": "(?P<"}, {}, {"equals": None}])),
    "sourceFile": Values(st.sampled_from([{"equals": "fuzz_target.c"}, {"contains": "fuzz"}, {"contains": ""}])),
    "returnValue": Values(st.fixed_dictionaries({"equals": ANY_JSON}) | st.fixed_dictionaries(
        {"isNull": st.booleans()})),
}


@dataclass(frozen=True)
class Paths:
    live: Path  # the FOREVER build: only the harness launches it (and a fuzzed launch may try, for SESSION_EXISTS)
    once: Path  # the build that exits at once: what fuzzed launches and test runs run
    build: Path  # the directory holding both builds and the source
    project: Path  # an empty project directory
    notes: Path  # a file that is not executable


def commands(paths: Paths, test_run: bool) -> Values:
    """A `command` that can only launch one of our own builds, or fail."""
    good = [str(paths.once), "./fuzz_once"]
    junk = [f"{NONEXISTENT}/program", str(paths.build), str(paths.notes), "fuzz_once", "no-such-program-strobe-fuzz",
            "./nope", f"{paths.once} arg 'quoted arg'"]
    if test_run:  # a shell line (generic framework): still nothing but our build
        good += [f"{paths.once} && {paths.once}", f"STROBE_X=1 {paths.once}"]
    else:  # launching the running build again: SESSION_EXISTS
        junk += [str(paths.live)]
    return Values(st.sampled_from(good), st.sampled_from(junk) | st.text(
        alphabet="abcdefghij0123456789_-.", max_size=30).map(lambda name: f"{NONEXISTENT}/{name}"))


SESSION_IDS = Values(st.sampled_from([LIVE, LIVE, ENDED]), st.sampled_from(
    ["nope", "fuzz_once-2026-01-01-00h00", "fuzz_live-2099-12-31-23h59-2", "../strobe.db"]) | st.text(min_size=1))


def watch_targets() -> SearchStrategy[Any]:
    options = {"label": st.text(min_size=1, max_size=64), "on": st.lists(PATTERNS.good, min_size=1, max_size=3)}
    raw_types = st.sampled_from(["i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f32", "f64", "pointer"])
    return (st.fixed_dictionaries({"variable": VARIABLES.good}, optional=options)
            | st.fixed_dictionaries({"address": ADDRESSES.good, "type": raw_types}, optional=options)
            | st.fixed_dictionaries({"expr": EXPRESSIONS.good}, optional=options))


def read_targets() -> SearchStrategy[Any]:
    read_types = st.sampled_from(["i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f32", "f64", "pointer",
                                  "bytes"])
    sizes = st.sampled_from([1, 2, 4, 8, 16, 4096, 65536]) | st.integers(1, 65536)
    return (st.fixed_dictionaries({"variable": VARIABLES.good})
            | st.fixed_dictionaries({"address": ADDRESSES.good, "size": sizes, "type": read_types}))


def breakpoint_adds(log: bool) -> SearchStrategy[Any]:
    """Breakpoints that never stop a program (they select nothing: staged ones are armed at this connection's later
    launches, before main), logpoints on anything (they do not stop), conditions and messages from EXPRESSIONS."""
    functions = PATTERNS.good if log else st.sampled_from(["no_such_function", "@file:nope.c", "pkg.mod.func",
                                                           "a::**", "**::x"])
    lines = st.fixed_dictionaries({"file": st.sampled_from(["fuzz_target.c", "nope.c", "/", "c"]),
                                   # the file's comment lines or none of its lines: a staged one never stops a launch
                                   "line": st.sampled_from([1, 2, 10**7, 0, -1, 10**9, 2**63])})
    extra: dict[str, SearchStrategy[Any]] = {"condition": EXPRESSIONS.good}
    if log:
        extra["message"] = st.one_of(st.text(max_size=30), EXPRESSIONS.good.map(lambda e: f"v={{{e}}}"))
    else:
        extra["hitCount"] = st.sampled_from([1, 2, 10**9]) | st.integers(-1, 10**10)
    return (st.fixed_dictionaries({"function": functions}, optional=extra)
            | st.fixed_dictionaries({}, optional={"function": functions, **extra}).flatmap(
                lambda d: lines.map(lambda line: {**d, **line})))


def write_targets() -> SearchStrategy[Any]:
    """Writes the program survives: its counters and numbers (no pointer it follows), gCounter's 4 bytes by address,
    and addresses that are not mapped writable."""
    values = st.sampled_from([0, 1, -1, 2**31 - 1, 2**31, 2**63, 1.5, -0.0, True, "0x10", "many", "", "1e400"])
    raw_types = st.sampled_from(["i8", "u8", "i16", "u16", "i32", "u32", "f32"])
    return (st.fixed_dictionaries({"variable": st.sampled_from([
        "gCounter", "gStatic", "gConfig.ratio", "gConfig.limits[2]", "gConfig.limits[9]", "gConfig.name", "gConfig",
        "no_such_variable", "gNull->value", "1"]), "value": values})
        | st.fixed_dictionaries({"address": ADDRESSES.good, "type": raw_types, "value": values}))


def overrides(tool: str, paths: Paths) -> dict[str, Values]:
    """Values for fields whose schema says too little (ids, patterns, paths), by path in the arguments ('[]' for an
    array's items) or by name anywhere."""
    roots = Values(st.sampled_from([str(paths.project), str(paths.build)]),
                   st.sampled_from(["/", NONEXISTENT, "relative/dir", "."]) | st.text())
    common: dict[str, Values] = {
        "sessionId": SESSION_IDS,
        "testRunId": Values(st.just(RUN), st.just("00000000-0000-0000-0000-000000000000") | st.text(min_size=1)),
        "add[]": PATTERNS, "remove[]": PATTERNS, "tracePatterns[]": PATTERNS, "on[]": PATTERNS,
        "watches.add[]": Values(watch_targets()), "targets[]": Values(read_targets()),
        "watches.remove[]": Values(st.sampled_from(["gCounter", "w1"]), st.text()),
        "variable": VARIABLES, "address": ADDRESSES, "expr": EXPRESSIONS,
        "projectRoot": roots, "cwd": Values(st.none() | roots.good, roots.junk),
        "timeFrom": TIMES, "timeTo": TIMES,
        "poll": Values(st.fixed_dictionaries({"intervalMs": st.sampled_from([50, 100, 1000, 5000]),
                                              "durationMs": st.sampled_from([100, 500, 1000, 30000])})),
        **MATCHERS,
    }
    if tool in ("debug_breakpoint", "debug_logpoint"):
        common["add[]"] = Values(breakpoint_adds(log=tool == "debug_logpoint"))
        common["remove[]"] = Values(st.sampled_from(["bp-1", "lp-2", "bp-99"]), st.text(max_size=20))
    if tool == "debug_write":
        common["targets[]"] = Values(write_targets())
    if tool == "debug_trace":
        common["sessionId"] = Values(st.none() | SESSION_IDS.good, SESSION_IDS.junk)
    if tool == "debug_launch":
        common["command"] = commands(paths, test_run=False)
        # Never a real process: no pid above 2**22 exists (the kernel's pid_max limit); the attach path has its own
        # tests (tests/e2e/test_attach.py).
        common["pid"] = Values(st.sampled_from([2**22 + 1, 2**31 - 1]), st.sampled_from([0, -1, 2**31, "1", 1.5]))
        common["stdinFile"] = Values(st.sampled_from([str(paths.notes), NONEXISTENT, str(paths.build)]),
                                     st.sampled_from(["relative.txt", "", "/dev/zero", *LONG_PATHS]))
    if tool == "debug_export":
        common["path"] = Values(st.sampled_from([str(paths.build), str(paths.build / "fuzz-export.json"),
                                                 f"{NONEXISTENT}/x.json"]),
                                st.sampled_from(["relative.json", "", *LONG_PATHS]) | st.text(max_size=20))
    if tool == "debug_test":
        common["command"] = commands(paths, test_run=True)
        common["projectRoot"] = Values(roots.good, st.sampled_from([NONEXISTENT, "relative/dir", ".", str(paths.once),
                                                                     *LONG_PATHS])
                                       | st.text(alphabet="abc123", max_size=20).map(lambda n: f"{NONEXISTENT}/{n}"))
        # Adapters that run only our build (or nothing); a name that is no adapter's is refused before anything runs.
        common["framework"] = Values(st.sampled_from(["generic", "catch2", "gtest", "GENERIC"]), st.sampled_from(
            [" generic", "generic ", "nope", "junit", "cargo2", "py test"]))
    return common


def edge_calls(paths: Paths) -> list[tuple[str, dict[str, Any]]]:
    """Hand-written calls at the limits, made in every run before hypothesis draws its own: values a handler takes
    (so they reach the store, the agent, the OS) at their extremes."""
    many_watches = [{"variable": "gCounter", "label": f"w{i}"} for i in range(33)]
    return [
        *(("debug_query", {"sessionId": sid, **extra}) for sid in (LIVE, ENDED) for extra in (
            {"timeFrom": 2**63 - 1}, {"timeFrom": -(2**63)}, {"timeTo": -(2**63)}, {"timeTo": 2**63 - 1},
            {"timeFrom": "-9223372036s"}, {"timeFrom": "9223372036s"}, {"timeTo": "-9223372037s"},
            {"offset": 2**63 - 1}, {"offset": 2**63 - 1, "limit": 500}, {"minDurationNs": 2**63 - 1},
            {"pid": 2**31 - 1}, {"returnValue": {"equals": 2**63 - 1}}, {"returnValue": {"equals": -(2**63)}},
            {"returnValue": {"equals": 1e308}}, {"returnValue": {"equals": "x" * 4000}},
            {"returnValue": {"equals": {"a": [1, {"b": None}]}}}, {"returnValue": {"equals": True}},
            {"returnValue": {"isNull": False}}, {"function": {"matches": "(a+)+$" * 100}},
            {"function": {"equals": "\x00"}}, {"threadName": {"contains": "%"}}, {"sourceFile": {"equals": "\\"}},
            {"eventType": "function_exit", "verbose": True, "limit": 500})),
        ("debug_read", {"sessionId": LIVE, "targets": [{"address": COUNTER_ADDRESS, "size": 65536, "type": "bytes"}]}),
        ("debug_read", {"sessionId": LIVE, "targets": [{"address": "0xffffffffffffffff", "size": 65536,
                                                        "type": "bytes"}]}),
        ("debug_read", {"sessionId": LIVE, "targets": [{"address": "0xfffffffffffffff0", "size": 64, "type": "u64"}]}),
        ("debug_read", {"sessionId": LIVE, "targets": [{"address": COUNTER_ADDRESS, "size": 1, "type": t} for t in (
            "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f32", "f64", "pointer", "bytes")]}),
        ("debug_read", {"sessionId": LIVE, "depth": 5, "targets": [{"variable": v} for v in (
            "gHead", "gConfig", "gNull->value", "gHead->next->next->value", "gMessage", "gConfig.limits[3]")]}),
        *(("debug_read", {"sessionId": LIVE, "targets": [{"variable": "gCounter"}],
                          "poll": {"intervalMs": 50, "durationMs": 30000}}) for _ in range(5)),
        ("debug_trace", {"sessionId": LIVE, "add": [f"tick{i}" for i in range(99)] + ["tick"]}),
        ("debug_trace", {"sessionId": LIVE, "serializationDepth": 10, "add": ["**"],
                         "watches": {"add": many_watches[:32]}}),
        ("debug_trace", {"sessionId": LIVE, "watches": {"add": many_watches[32:]}}),
        ("debug_trace", {"sessionId": LIVE, "watches": {"add": [{"expr": "'a'.repeat(100000)", "label": "big"},
                                                                {"variable": "gNull->value", "label": "null"}]}}),
        ("debug_trace", {"sessionId": LIVE, "watches": {"remove": ["w0", "w0", "nope"]}, "remove": ["nope", "**"]}),
        ("debug_trace", {"sessionId": ENDED, "add": ["tick"]}),
        ("debug_trace", {"add": [f"p{i}" for i in range(100)], "projectRoot": str(paths.project)}),
        ("debug_launch", {"command": str(paths.once), "projectRoot": "/", "cwd": "/", "args": ["x"] * 4096}),
        ("debug_launch", {"command": str(paths.once), "projectRoot": str(paths.project), "args": ["y" * 131072]}),
        ("debug_launch", {"command": str(paths.once), "projectRoot": str(paths.project),
                          "env": {f"STROBE_FUZZ_{i}": "v" for i in range(4096)}}),
        ("debug_launch", {"command": str(paths.once), "projectRoot": str(paths.project),
                          "env": {"LD_PRELOAD": "/nonexistent-strobe-fuzz.so", "PATH": "", "HOME": "\u00e9"}}),
        ("debug_test", {"projectRoot": str(paths.build), "framework": "generic", "command": str(paths.once),
                        "tracePatterns": ["**"] * 100, "watches": {"add": many_watches[:32]}}),
        ("debug_test", {"projectRoot": str(paths.build), "framework": "generic", "command": str(paths.once),
                        "test": "t" * 4096, "level": "e2e", "env": {"X": "y" * 131072}}),
        ("debug_test", {"projectRoot": str(paths.build), "framework": "gtest", "command": str(paths.once),
                        "test": "*:-.[]"}),
        ("debug_test", {"projectRoot": str(paths.build), "framework": "catch2", "command": str(paths.once),
                        "test": "[tag] \"quoted\" ~neg"}),
        *(call for long in LONG_PATHS for call in (
            ("debug_launch", {"command": long, "projectRoot": str(paths.project)}),
            ("debug_launch", {"command": str(paths.once), "projectRoot": str(paths.project), "cwd": long}),
            ("debug_launch", {"command": str(paths.once), "projectRoot": long}),
            ("debug_test", {"projectRoot": long, "framework": "generic", "command": str(paths.once)}),
            ("debug_test", {"projectRoot": str(paths.build), "framework": "generic", "command": long}),
            ("debug_trace", {"add": ["tick"], "projectRoot": long}))),
        ("debug_stop", {"sessionId": LIVE, "retain": True}),
        ("debug_delete_session", {"sessionId": LIVE}),
        ("debug_delete_session", {"sessionId": ENDED}),
    ]


# Fields a valid draw always gives, though the schema makes them optional: without them the call is refused.
ALWAYS_GIVEN = {("debug_test", "command")}


# Fields whose value may run something: only ever drawn from the fixed lists above, never free text.
UNSAFE = {("debug_launch", "command"), ("debug_test", "command"), ("debug_test", "projectRoot"),
          ("debug_test", "framework"), ("debug_trace", "watches.add[].expr"), ("debug_test", "watches.add[].expr"),
          # JavaScript run in the target, and writes into its memory: only from the lists below
          ("debug_breakpoint", "add[]"), ("debug_logpoint", "add[]"), ("debug_write", "targets[]"),
          # a process to attach to (pid 1 is init), a file to read into a program, a file to write
          ("debug_launch", "pid"), ("debug_launch", "stdinFile"), ("debug_export", "path")}


def _kinds(schema: dict[str, Any]) -> set[str]:
    if "anyOf" in schema:
        return set().union(*(_kinds(option) for option in schema["anyOf"]))
    if "type" in schema:
        return {schema["type"]}
    return {"any"} if "enum" not in schema and "const" not in schema else {"string"}


def _string_schema(schema: dict[str, Any]) -> dict[str, Any]:
    options: list[dict[str, Any]] = schema.get("anyOf", [schema])
    return next((option for option in options if option.get("type") == "string"), {})


class SchemaStrategies:
    """Strategies for one tool's arguments, walked from its inputSchema: `valid` keeps to the schema (the handler
    runs), `bad` puts boundary and invalid values at any node (validation runs, or whatever it lets through)."""

    def __init__(self, tool: str, paths: Paths) -> None:
        self.tool = tool
        self.overrides = overrides(tool, paths)

    def arguments(self, schema: dict[str, Any]) -> SearchStrategy[Any]:
        valid, bad = self.value(schema, "", bad=False), self.value(schema, "", bad=True)
        shapes: SearchStrategy[Any] = st.sampled_from([MISSING, None, [], "x", 0, True, [{}], "{}"])
        return st.integers(0, 9).flatmap(lambda i: valid if i < 5 else bad if i < 9 else shapes)

    def value(self, schema: dict[str, Any], path: str, bad: bool) -> SearchStrategy[Any]:
        name = path.rsplit(".", 1)[-1]
        values = self.overrides.get(path) or self.overrides.get(name)
        safe = (self.tool, path) in UNSAFE
        if safe and values is None:
            raise AssertionError(f"{self.tool}.{path} may run something: it needs an override")
        if values is None:
            values = Values(self._valid(schema, path, bad))
        if not bad:
            return values.good
        return st.one_of([values.good, *([values.junk] if values.junk is not None else []),
                          self._boundary(schema, path, safe)])

    def _valid(self, schema: dict[str, Any], path: str, bad: bool) -> SearchStrategy[Any]:
        if "anyOf" in schema:
            return st.one_of([self._valid(option, path, bad) for option in schema["anyOf"]])
        if "enum" in schema:
            return st.sampled_from(schema["enum"])
        kind = schema.get("type")
        if kind == "string":
            return st.text(min_size=schema.get("minLength", 0), max_size=min(schema.get("maxLength", 40), 40))
        if kind == "integer":
            return st.integers(schema.get("minimum"), schema.get("maximum"))
        if kind == "boolean":
            return st.booleans()
        if kind == "null":
            return st.none()
        if kind == "array":
            items = self.value(schema.get("items", {}), f"{path}[]", bad)
            return st.lists(items, min_size=schema.get("minItems", 0), max_size=min(schema.get("maxItems", 4), 4))
        if kind == "object":
            return self._object(schema, path, bad)
        return ANY_JSON

    def _object(self, schema: dict[str, Any], path: str, bad: bool) -> SearchStrategy[Any]:
        prefix = f"{path}." if path else ""
        properties: dict[str, Any] = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):  # a map (env): free keys, values by the schema
            return st.dictionaries(st.text(max_size=20), self.value(extra, f"{prefix}{{}}", bad), max_size=4)
        required = [key for key in schema.get("required", []) if key in properties]
        given = [key for key in properties if key in required or (self.tool, prefix + key) in ALWAYS_GIVEN]
        base = st.fixed_dictionaries(
            {key: self.value(properties[key], prefix + key, bad) for key in given},
            optional={key: self.value(spec, prefix + key, bad) for key, spec in properties.items()
                      if key not in given})
        if not bad:
            return base
        unknown = st.sampled_from(["sesionId", "SessionId", "session_id", "extra", "", "\x00", "a" * 5000]) \
            | st.text(max_size=10).filter(lambda key: key not in properties)
        mutated = [base, st.tuples(base, unknown, ANY_JSON).map(lambda t: {**t[0], t[1]: t[2]})]
        if required:
            mutated.append(st.tuples(base, st.sampled_from(required)).map(
                lambda t: {key: value for key, value in t[0].items() if key != t[1]}))
        return st.one_of(mutated)

    def _boundary(self, schema: dict[str, Any], path: str, safe: bool) -> SearchStrategy[Any]:
        kinds = _kinds(schema)
        options: list[SearchStrategy[Any]] = [NON_STRINGS.filter(lambda v: _json_kind(v) not in kinds)]
        if "string" in kinds:
            spec = _string_schema(schema)
            limit = spec.get("maxLength", 4096)
            chars = SAFE_CHARS if safe else FREE_CHARS
            options += [st.sampled_from(SAFE_NASTY), st.sampled_from(LONG_PATHS),
                        st.builds(lambda n, c: c * n, st.sampled_from(sorted({limit, limit + 1, *LONG_LENGTHS})),
                                  st.sampled_from(chars))]
            if not safe:
                options.append(st.text())
            for value in spec.get("enum", [])[:1]:
                options.append(st.sampled_from([value.upper(), f"{value} ", value[:-1], f"{value}\x00"]))
        if "integer" in kinds or "number" in kinds:
            low, high = _int_bounds(schema)
            edges = [*INT_EDGES, *([low - 1] if low is not None else []), *([high + 1] if high is not None else [])]
            options += [st.sampled_from(edges), st.sampled_from(FLOAT_EDGES), st.sampled_from(["1", "0x10", "1e3"])]
        if "boolean" in kinds:
            options.append(st.sampled_from([0, 1, "true", "false", "yes"]))
        if "array" in kinds:
            options.append(self._long_array(schema, path))
            options.append(st.sampled_from([[None], [[]], [1, "a"], [{}]]))
        if "object" in kinds or "any" in kinds:
            options.append(st.sampled_from([{}, {"": None}, {"a": {"b": {"c": [1, {}]}}}]))
        return st.one_of(options)

    def _long_array(self, schema: dict[str, Any], path: str) -> SearchStrategy[Any]:
        """One past the array's maxItems (and its minItems minus one), from one drawn item repeated."""
        for option in schema.get("anyOf", [schema]):
            if option.get("type") == "array":
                items = self.value(option.get("items", {}), f"{path}[]", bad=False)
                lengths = [option.get("maxItems", 1000) + 1, max(option.get("minItems", 0) - 1, 0), 10_000]
                return st.builds(lambda n, item: [item] * n, st.sampled_from(lengths), items)
        return st.just([])


def _int_bounds(schema: dict[str, Any]) -> tuple[int | None, int | None]:
    for option in schema.get("anyOf", [schema]):
        if option.get("type") == "integer":
            return option.get("minimum"), option.get("maximum")
    return None, None


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


# Requests a client could get wrong around a tool's arguments: each must be answered with a JSON-RPC error.
MALFORMED_REQUESTS: list[dict[str, Any]] = [
    {"method": "tools/call"}, {"method": "tools/call", "params": None}, {"method": "tools/call", "params": {}},
    {"method": "tools/call", "params": []}, {"method": "tools/call", "params": "x"},
    {"method": "tools/call", "params": {"name": 5}}, {"method": "tools/call", "params": {"name": None}},
    {"method": "tools/call", "params": {"arguments": {}}},
    {"method": "tools/call", "params": {"name": "debug_query", "arguments": "x"}},
    {"method": "tools/call", "params": {"name": "debug_list_sessions", "arguments": [1]}},
    {"method": "tools/call", "params": {"name": "debug_list_sessions", "_meta": 5}},
    {"method": "tools/call", "params": {"name": "debug_query", "arguments": {"sessionId": "\udcff"}}},
    {"method": "tools/calls", "params": {"name": "debug_list_sessions"}},
    {"method": "", "params": {}}, {"method": 5}, {"method": ["tools/call"]}, {"method": {"a": 1}},
    {"method": "tools/call", "params": {"name": ["debug_query"]}},
    {"method": "tools/call", "params": {"name": {"debug_query": 1}}},
    # An id MCP does not allow (null, a fraction, a boolean, a list, an object): invalid, answered with id null.
    *({"id": bad, "method": "tools/call", "params": {"name": "debug_list_sessions"}}
      for bad in (None, 1.5, True, [1], {"a": 1})),
    {"id": 2**70, "method": "tools/call", "params": {"name": "debug_list_sessions"}},
    {"id": "x" * 300, "method": "tools/call", "params": {"name": "debug_list_sessions"}},
]


# ---- the client ------------------------------------------------------------------------------------------------


class RawMcp:
    """`strobe mcp` over stdio as raw JSON-RPC lines: arguments of any shape reach the server exactly as sent."""

    def __init__(self, home: Path, stderr: IO[bytes]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "strobe", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
            env={**os.environ, "STROBE_HOME": str(home)})
        self._buffer = bytearray()
        self._next_id = 0
        self.requests = 0

    def request(self, method: str, params: Any = MISSING, timeout: float = CALL_TIMEOUT_S) -> dict[str, Any] | None:
        """The reply to one request, or None when none came within `timeout`."""
        message: dict[str, Any] = {"method": method}
        if params is not MISSING:
            message["params"] = params
        return self.exchange(message, timeout)

    def exchange(self, message: dict[str, Any], timeout: float = CALL_TIMEOUT_S) -> dict[str, Any] | None:
        """Send `message` as a request (with the next id, unless it has an "id" of its own: then the answer is
        looked for under that id when it is a usable one, else under null) and wait for its answer."""
        self._next_id += 1
        message = {"jsonrpc": "2.0", "id": self._next_id, **message}
        answer_id = message["id"] if isinstance(message["id"], str | int) and not isinstance(message["id"], bool) \
            else None
        self.send(message)
        self.requests += 1
        return self._reply(answer_id, timeout)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")  # lone surrogates go as \udcff escapes
        self.process.stdin.flush()

    def initialize(self) -> None:
        reply = self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                            "clientInfo": {"name": "strobe-fuzz", "version": "1"}})
        assert reply is not None and "result" in reply, reply
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _reply(self, request_id: int | str | None, timeout: float) -> dict[str, Any] | None:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while True:
            while (end := self._buffer.find(b"\n")) >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[:end + 1]
                message = json.loads(line)
                if message.get("id") == request_id and "method" not in message:
                    assert isinstance(message, dict)
                    return message
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise EOFError("strobe mcp closed its stdout")
            self._buffer += chunk

    def close(self, timeout: float = 15) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# ---- the harness -----------------------------------------------------------------------------------------------


def verdict(reply: dict[str, Any] | None) -> tuple[str, str | None]:
    """(what the answer was, what is wrong with it or None)."""
    if reply is None:
        return "no answer", f"no answer within {CALL_TIMEOUT_S:.0f} s"
    if "error" in reply:
        error = reply["error"]
        code = error.get("code") if isinstance(error, dict) else None
        if code in JSONRPC_REQUEST_CODES:
            return f"JSON-RPC {code}", None
        return f"JSON-RPC {code}", f"JSON-RPC error outside the request codes: {json.dumps(error)[:300]}"
    result = reply.get("result")
    content = result.get("content") if isinstance(result, dict) else None
    if not isinstance(content, list) or not content or not isinstance(content[0].get("text"), str):
        return "malformed", f"a result without text content: {json.dumps(reply)[:300]}"
    assert isinstance(result, dict)
    try:
        payload = json.loads(content[0]["text"])
    except ValueError:
        return "malformed", f"a result whose text is not JSON: {content[0]['text'][:300]!r}"
    if result.get("isError"):
        error = payload.get("error") if isinstance(payload, dict) else None
        if not isinstance(error, dict):
            return "malformed", f"a tool error without {{error: {{code, message}}}}: {content[0]['text'][:300]}"
        code, message = error.get("code"), error.get("message")
        if code == ErrorCode.INTERNAL_ERROR.value:
            return code, str(message)[:500]
        if code not in SPEC_CODES or not isinstance(message, str) or not message:
            return "malformed", f"a tool error without a spec code and a message: {json.dumps(error)[:300]}"
        if len(message) > MAX_ERROR_MESSAGE:
            return code, f"an error message of {len(message):,} characters: {message[:200]}…"
        return code, None
    if not isinstance(payload, dict):
        return "malformed", f"a result that is not a JSON object: {content[0]['text'][:300]}"
    return "result", None


def _kind(problem: str) -> str:
    """What findings are told apart by: the exception of an internal error, else the problem without its figures
    and quoted input."""
    internal = re.search(r"internal error \((\w+: .{0,60})", problem)
    text = internal.group(1) if internal else problem.split(": ", 1)[0]
    return re.sub(r"\d[\d,.]*", "N", text)


@dataclass
class Finding:
    tool: str
    outcome: str
    problem: str
    arguments: str  # repr, shortened

    def __str__(self) -> str:
        return f"{self.tool} -> {self.outcome}: {self.problem}\n    arguments: {self.arguments}"


class CallFailed(AssertionError):
    """A finding, raised so that hypothesis shrinks the arguments that caused it."""


@dataclass
class Harness:
    client: RawMcp
    home: Path
    paths: Paths
    daemon_pid: int = 0
    refs: dict[Ref, Any] = field(default_factory=dict)
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)
    findings: dict[tuple[str, str, str], Finding] = field(default_factory=dict)
    fuzz_calls: int = 0
    quarantined: bool = False  # after a hang or a daemon restart, the rest of this tool's run is skipped
    live_dirty: bool = True
    ended_dirty: bool = True
    live_uses: int = 0
    slowest: dict[str, tuple[float, str]] = field(default_factory=dict)  # per tool: seconds, arguments
    test_runs: list[str] = field(default_factory=list)  # every run a fuzzed debug_test started
    spare_live: str | None = None  # a live build a fuzzed debug_launch started while the live session was gone

    # -- calls

    def call(self, tool: str, arguments: Any, label: str | None = None) -> tuple[str, Any]:
        """One tools/call, checked; returns (outcome, the result's JSON for a result else the error). `label`: what
        the summary counts it under (the tool by default)."""
        label = label or tool
        params: dict[str, Any] = {"name": tool}
        if arguments is not MISSING:
            params["arguments"] = arguments
        began = time.monotonic()
        reply = self.client.request("tools/call", params)
        took = time.monotonic() - began
        outcome, problem = verdict(reply)
        self.outcomes.setdefault(label, Counter())[outcome] += 1
        self.slowest[label] = max(self.slowest.get(label, (0.0, "")), (took, repr(arguments)[:200]))
        if TRACE_CALLS:
            said = json.dumps(reply)[-300:] if outcome != "result" else ""
            print(f"{took * 1000:8.1f} ms {tool} {outcome} {repr(arguments)[:160]} {said}", file=sys.stderr, flush=True)
        pid = _daemon_pid(self.home)
        if pid != self.daemon_pid:
            problem = f"the daemon restarted (pid {self.daemon_pid} -> {pid}); {problem or 'the answer was fine'}"
            self.daemon_pid = pid
        if problem is not None:
            self._found(label, outcome, problem, arguments)
            if outcome == "no answer" or "restarted" in problem:
                self.quarantined = True
            raise CallFailed(f"{tool}: {outcome}: {problem}")
        if reply is None or "result" not in reply:
            return outcome, reply["error"] if reply else None
        payload = json.loads(reply["result"]["content"][0]["text"])
        return outcome, payload.get("error", payload) if outcome != "result" else payload

    def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """A harness call that must succeed."""
        outcome, payload = self.call(tool, arguments)
        assert outcome == "result", (tool, arguments, payload)
        assert isinstance(payload, dict)
        return payload

    def _found(self, tool: str, outcome: str, problem: str, arguments: Any) -> None:
        shown = repr(arguments)
        shown = shown if len(shown) <= 600 else f"{shown[:600]}… ({len(shown):,} characters)"
        key = (tool, outcome, _kind(problem))
        kept = self.findings.get(key)
        if kept is None or len(shown) < len(kept.arguments):  # keep the smallest (hypothesis shrinks towards it)
            self.findings[key] = Finding(tool, outcome, problem, shown)

    def fuzz(self, tool: str, drawn: Any, label: str | None = None) -> None:
        if self.quarantined:
            return
        self.prepare(tool, drawn)
        arguments = resolve(drawn, self.refs)
        self.fuzz_calls += 1
        try:
            outcome, payload = self.call(tool, arguments, label)
        finally:
            self.after(tool, arguments)
        self.track(tool, arguments, outcome, payload)

    # -- the live and ended sessions, the finished test run

    def prepare(self, tool: str, drawn: Any) -> None:
        uses = _refs_in(drawn)
        if LIVE in uses:
            self.live_uses += 1
            if self.live_uses % 20 == 0:  # shed the patterns, watches and polls piling up on it
                self.live_dirty = True
        if self.live_dirty and (LIVE in uses or COUNTER_ADDRESS in uses):
            self.relaunch_live()
        if self.ended_dirty and ENDED in uses:
            self.relaunch_ended()

    def after(self, tool: str, arguments: Any) -> None:
        """Notice what the call may have done to the sessions the harness keeps."""
        sid = arguments.get("sessionId") if isinstance(arguments, dict) else None
        if tool in ("debug_stop", "debug_delete_session") and sid is not None:
            self.live_dirty |= sid == self.refs.get(LIVE)
            self.ended_dirty |= sid == self.refs.get(ENDED)

    def track(self, tool: str, arguments: Any, outcome: str, payload: Any) -> None:
        if outcome in (ErrorCode.PROCESS_EXITED.value, ErrorCode.SESSION_NOT_FOUND.value):
            sid = arguments.get("sessionId") if isinstance(arguments, dict) else None
            self.live_dirty |= sid == self.refs.get(LIVE)
        if tool == "debug_launch" and outcome == "result" and arguments.get("command") == str(self.paths.live):
            self.live_dirty = True  # a second live process: stopped with the old one when the live one is renewed
            self.spare_live = payload["sessionId"]
        if tool == "debug_trace" and outcome == "result" and payload.get("mode") == "pending" \
                and payload.get("activePatterns"):  # staged patterns would weigh on every later launch
            self.ok("debug_trace", remove=payload["activePatterns"])
        if tool == "debug_test" and outcome == "result":
            self.test_runs.append(payload["testRunId"])
        if tool == "debug_test_status" and outcome == ErrorCode.TEST_RUN_NOT_FOUND.value \
                and arguments.get("testRunId") == self.refs.get(RUN):
            self.finish_test_run()

    def relaunch_live(self) -> None:
        for sid in (self.refs.get(LIVE), self.spare_live):
            if sid is not None:
                self.call("debug_stop", {"sessionId": sid})  # it may be gone already: SESSION_NOT_FOUND is fine
        self.spare_live = None
        launched = self.ok("debug_launch", command=str(self.paths.live), projectRoot=str(self.paths.project))
        self.refs[LIVE] = launched["sessionId"]
        read = self.ok("debug_read", sessionId=launched["sessionId"], targets=[{"variable": "gCounter"}])
        self.refs[COUNTER_ADDRESS] = read["results"][0]["address"]
        self.live_dirty = False

    def relaunch_ended(self) -> None:
        launched = self.ok("debug_launch", command=str(self.paths.once), projectRoot=str(self.paths.project))
        self.wait_ended(launched["sessionId"])
        self.refs[ENDED] = launched["sessionId"]
        self.ended_dirty = False

    def wait_ended(self, sid: str) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            sessions = self.ok("debug_list_sessions")["sessions"]
            if any(s["sessionId"] == sid and s["status"] != "running" for s in sessions):
                return
            time.sleep(0.05)
        raise AssertionError(f"{sid} did not end within 20 s")

    def settle_test_runs(self) -> None:
        """Wait for every test run the fuzz started: a daemon shut down under traced runs takes long to exit."""
        deadline = time.monotonic() + 120
        for run in self.test_runs:  # TEST_RUN_NOT_FOUND: finished, and dropped for newer ones
            while (answer := self.call("debug_test_status", {"testRunId": run}))[0] == "result" \
                    and answer[1].get("status") == "running":
                assert time.monotonic() < deadline, f"test run {run} still running after 2 minutes"

    def stop_leftovers(self, wait_s: float = 15) -> list[dict[str, Any]]:
        """Sessions still running `wait_s` after everything the fuzz launched should have ended (the live session is
        stopped first), each then stopped so that the daemon can shut down at once; returns them as listed."""
        if self.refs.get(LIVE) is not None:
            self.call("debug_stop", {"sessionId": self.refs[LIVE]})
        deadline = time.monotonic() + wait_s
        while running := [s for s in self.ok("debug_list_sessions")["sessions"] if s["status"] == "running"]:
            if time.monotonic() > deadline:
                for session in running:
                    self.call("debug_stop", {"sessionId": session["sessionId"]})
                break
            time.sleep(0.2)
        return running

    def finish_test_run(self) -> None:
        started = self.ok("debug_test", projectRoot=str(self.paths.build), framework="generic",
                          command=str(self.paths.once))
        self.refs[RUN] = started["testRunId"]
        deadline = time.monotonic() + 60
        while self.ok("debug_test_status", testRunId=started["testRunId"]).get("status") == "running":
            assert time.monotonic() < deadline, "the harness's test run did not finish"


def _refs_in(value: Any) -> set[Ref]:
    if isinstance(value, Ref):
        return {value}
    if isinstance(value, dict):
        return set().union(*(_refs_in(item) for item in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_refs_in(item) for item in value)) if value else set()
    return set()


def _daemon_pid(home: Path) -> int:
    try:
        return int((home / "strobe.pid").read_text().strip())
    except (OSError, ValueError):
        return 0


def fuzz_settings(database: Path) -> settings:
    return settings(
        max_examples=EXAMPLES, deadline=None, derandomize=not FULL,
        database=DirectoryBasedExampleDatabase(database) if FULL else None,  # derandomize means no database
        phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink], print_blob=FULL,
        suppress_health_check=list(HealthCheck))


# ---- the test --------------------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def hypothesis_home(tmp_path: Path) -> Iterator[None]:
    """hypothesis keeps its files (the example database of `make fuzz`, its caches) in this test's temporary
    directory, not in the repository's .hypothesis."""
    before = getattr(hypothesis_configuration, "__hypothesis_home_directory")  # a module global, not an attribute
    hypothesis_configuration.set_hypothesis_home_dir(tmp_path / "hypothesis")
    yield
    hypothesis_configuration.set_hypothesis_home_dir(before)


@pytest.fixture
def fuzz_paths(tmp_path: Path) -> Paths:
    build = tmp_path / "build"
    build.mkdir()
    source = build / "fuzz_target.c"
    source.write_text(FUZZ_TARGET)
    for name, defines in (("fuzz_live", ["-DFOREVER"]), ("fuzz_once", [])):
        subprocess.run(["gcc", "-g", "-O0", *defines, "-o", str(build / name), str(source)], check=True)
    project = tmp_path / "project"
    project.mkdir()
    notes = build / "notes.txt"
    notes.write_text("not a program")
    return Paths(live=build / "fuzz_live", once=build / "fuzz_once", build=build, project=project, notes=notes)


@pytest.fixture
def harness(strobe_home: Path, fuzz_paths: Paths, tmp_path: Path) -> Iterator[Harness]:
    with (tmp_path / "strobe-mcp.stderr").open("wb") as stderr:
        client = RawMcp(strobe_home, stderr)
        try:
            client.initialize()
            harness = Harness(client, strobe_home, fuzz_paths, daemon_pid=_daemon_pid(strobe_home))
            yield harness
            if not harness.quarantined:  # when the test failed before it waited for them
                with contextlib.suppress(Exception):
                    harness.settle_test_runs()
                    harness.stop_leftovers(wait_s=5)
        finally:
            client.close()


def test_every_tool_answers_fuzzed_arguments_with_a_result_or_a_coded_error(
    harness: Harness, strobe_home: Path, tmp_path: Path
) -> None:
    started = time.monotonic()
    listed = harness.client.request("tools/list")
    assert listed is not None and "result" in listed, listed
    tools = {tool["name"]: tool["inputSchema"] for tool in listed["result"]["tools"]}
    assert set(tools) <= KNOWN_TOOLS, f"new tools {set(tools) - KNOWN_TOOLS}: list their unsafe fields in UNSAFE first"
    assert harness.daemon_pid, "no daemon pid after initialize"
    harness.relaunch_live()
    harness.relaunch_ended()
    harness.finish_test_run()
    setup_calls = harness.client.requests

    for tool, arguments in edge_calls(harness.paths):
        with contextlib.suppress(CallFailed):  # recorded as a finding
            harness.fuzz(tool, arguments, f"{tool} (edge calls)")
    harness.quarantined = False
    for name, schema in tools.items():
        strategy = SchemaStrategies(name, harness.paths).arguments(schema)
        run_hypothesis(functools.partial(harness.fuzz, name), strategy, tmp_path / "hypothesis" / "examples")
        harness.quarantined = False

    # Beyond the tools' arguments: unknown tools, and requests malformed around them.
    names = st.sampled_from(["debug_teleport", "", "DEBUG_QUERY", "debug_query ", "\x00", "a" * 5000]) | st.text()
    run_hypothesis(lambda drawn: harness.fuzz(drawn, MISSING, "(unknown tools)"), names,
                   tmp_path / "hypothesis" / "examples")
    for message in MALFORMED_REQUESTS:
        reply = harness.client.exchange(message, timeout=10)
        outcome, problem = verdict(reply)
        harness.outcomes.setdefault("(malformed requests)", Counter())[outcome] += 1
        if problem is not None:
            harness._found("(malformed requests)", outcome, problem, message)

    # The daemon still answers: on this connection, and on a fresh one (the SDK's client, as an agent has).
    still_answers(harness, strobe_home)
    report(harness, setup_calls, time.monotonic() - started)
    assert not harness.findings, "\n".join(str(finding) for finding in harness.findings.values())


def still_answers(harness: Harness, home: Path) -> None:
    """After the fuzz: a ping, a launch, a read, a query and a stop on the same connection, a call on a fresh one,
    and the same daemon process all along. Whatever fails is a finding."""
    def ping() -> None:
        reply = harness.client.request("ping")
        assert reply is not None and reply.get("result") == {}, reply

    def launch_read_query_stop() -> None:
        harness.relaunch_live()  # a launch and a read
        harness.ok("debug_query", sessionId=harness.refs[LIVE], eventType="stdout")
        harness.ok("debug_stop", sessionId=harness.refs[LIVE])

    def fresh_connection() -> None:
        assert anyio.run(_list_sessions, home)

    def every_session_ended() -> None:
        running = harness.stop_leftovers()
        assert not running, f"sessions still running once all their programs should have ended: {running}"

    checks: list[tuple[str, Callable[[], None]]] = [
        ("ping", ping), ("a launch, a read, a query and a stop", launch_read_query_stop),
        ("the fuzzed test runs' end", harness.settle_test_runs), ("every session's end", every_session_ended),
        ("a fresh connection", fresh_connection)]
    for what, check in checks:
        try:
            check()
        except Exception as exc:
            harness._found("(after the fuzz)", "failed", f"{what}: {type(exc).__name__}: {exc}"[:500], None)
    harness.test_runs.clear()
    if _daemon_pid(home) != harness.daemon_pid or not _alive(harness.daemon_pid):
        harness._found("(after the fuzz)", "failed", f"the daemon {harness.daemon_pid} is gone", None)


async def _list_sessions(home: Path) -> list[dict[str, Any]]:
    async with connect(home) as client:
        sessions: list[dict[str, Any]] = (await client.call("debug_list_sessions"))["sessions"]
        return sessions


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def run_hypothesis(body: Callable[[Any], None], strategy: SearchStrategy[Any], database: Path) -> None:
    """Run `body` on EXAMPLES draws; a failure was recorded as a finding when it happened (hypothesis shrank it
    and re-raised it here, or found it flaky: the daemon's state moves on between calls)."""

    @fuzz_settings(database)
    @given(strategy)
    def run(drawn: Any) -> None:
        body(drawn)

    try:
        run()
    except Exception as exc:  # recorded already; a harness failure (not a CallFailed) is not
        if not _only_findings(exc):
            raise


def _only_findings(exc: BaseException) -> bool:
    if isinstance(exc, CallFailed):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_findings(inner) for inner in exc.exceptions)
    return isinstance(exc.__cause__, CallFailed) or type(exc).__name__ in ("Flaky", "FlakyFailure")


def report(harness: Harness, setup_calls: int, elapsed: float) -> None:
    total = harness.client.requests
    print(f"\n== strobe fuzz: {total:,} requests in {elapsed:.1f} s ({harness.fuzz_calls:,} fuzzed tool calls, "
          f"{setup_calls} to set up, the rest the harness's own and the malformed calls); "
          f"{EXAMPLES} examples per tool, {'random' if FULL else 'derandomized'}")
    for tool, outcomes in sorted(harness.outcomes.items()):
        shown = ", ".join(f"{outcome} {count}" for outcome, count in outcomes.most_common())
        took, arguments = harness.slowest.get(tool, (0.0, ""))
        print(f"   {tool}: {sum(outcomes.values())} ({shown}); slowest {took * 1000:.0f} ms: {arguments[:100]}")
    print(f"== findings: {len(harness.findings)}")
    for finding in harness.findings.values():
        print(f"   {finding}")
    log = harness.home / "daemon.log"
    errors = [line for line in log.read_text(errors="replace").splitlines() if " ERROR " in line] \
        if log.exists() else []
    print(f"== daemon.log: {len(errors)} ERROR lines (shown, not asserted)")
    for line in errors[:20]:
        print(f"   {line[:300]}")


def test_a_method_or_tool_name_of_the_wrong_type_is_answered(strobe_home: Path, tmp_path: Path) -> None:
    """Each on a connection of its own: the proxy's stdin thread died on them (unhashable in its safe-to-repeat
    check), and the connection never answered again."""
    answered = []
    messages: list[dict[str, Any]] = [{"method": ["tools/call"]}, {"method": "tools/call", "params": {"name": ["x"]}}]
    for i, message in enumerate(messages):
        with (tmp_path / f"strobe-mcp-{i}.stderr").open("wb") as stderr:
            client = RawMcp(strobe_home, stderr)
            try:
                client.initialize()
                _, problem = verdict(client.exchange(message, timeout=3))
                answered.append(problem is None and client.request("ping", timeout=3) is not None)
            finally:
                client.close(timeout=2)
    assert all(answered), answered
