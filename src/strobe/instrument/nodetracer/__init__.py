"""The Node.js side of JavaScript tracing: a preload the daemon puts into the node processes it launches.

The host never imports the JavaScript; it starts node (or bun) with

    env = {**os.environ, **environment(session_dir, os.environ.get("NODE_OPTIONS"))}
    # NODE_OPTIONS='... --require "/abs/.../preload.cjs"', STROBE_NODE_DIR=session_dir
    # (bun <file>: bun_environment, BUN_OPTIONS='... --preload /abs/.../preload.cjs')

after writing `session_dir/plan.json` (atomically: a temporary file, then os.replace):

    {"v": 1, "depth": 3, "on": [7], "names": {"7": ["a", "b"]},
     "files": {"/abs/app.js": {"sha1": "<hex sha1 of the UTF-8 source>", "transformed": "/abs/rewritten/app.js"}}}

and reads the events from `session_dir/events-<pid>.jsonl` (one per process; child node processes inherit the
environment and are traced too), one batch per line in the Python tracer's format (the daemon's
runtimes/cpython_ingest.py reads it): `{"v":1,"n":<count>,"pid":<pid>,"threads":[[tid,name]],"events":[...],
"dropped":<total so far>,"errors":[...]}`, each event `[kind, id, ts_ns, tid, seq, parent_seq, payload]`.
plan.cjs, outbox.cjs and recorder.cjs state the details in their docstrings; preload.cjs is the entry point,
hooks.mjs the ES module load hook it registers.
"""

from __future__ import annotations

import re
from pathlib import Path

DIRECTORY = Path(__file__).parent
PRELOAD = DIRECTORY / "preload.cjs"
HOOKS = DIRECTORY / "hooks.mjs"
# Every file the preload loads (a wheel must carry them all).
SOURCES = tuple(DIRECTORY / name for name in ("preload.cjs", "hooks.mjs", "plan.cjs", "outbox.cjs",
                                                "recorder.cjs", "values.cjs", "bun.cjs", "live.cjs", "tsnode.cjs"))
DIR_VARIABLE = "STROBE_NODE_DIR"
BUN_OPTIONS_VARIABLE = "STROBE_BUN_OPTIONS"  # the BUN_OPTIONS the program was given, without the preload
PLAN_FILE = "plan.json"
EVENTS_GLOB = "events-*.jsonl"
MAX_PLAN_BYTES = 64 << 20


def events_file(directory: Path, pid: int) -> Path:
    """Where process `pid` appends its batches."""
    return directory / f"events-{pid}.jsonl"


def node_options(existing: str | None = None) -> str:
    """NODE_OPTIONS with the preload required after the options already there (node reads a double-quoted value,
    with backslash escapes, as one)."""
    quoted = '"' + str(PRELOAD).replace("\\", "\\\\").replace('"', '\\"') + '"'
    return _after(existing, f"--require {quoted}")


def bun_options(existing: str | None = None) -> str:
    """BUN_OPTIONS with the preload preloaded after the options already there (Bun ignores NODE_OPTIONS, and
    takes quotes literally: a space is escaped with a backslash)."""
    escaped = re.sub(r"([\\\s'\"])", r"\\\1", str(PRELOAD))
    return _after(existing, f"--preload {escaped}")


def _after(existing: str | None, option: str) -> str:
    return f"{existing} {option}" if existing and existing.strip() else option


def environment(directory: Path, existing_node_options: str | None = None) -> dict[str, str]:
    """The variables to add to a traced node program's environment."""
    return {"NODE_OPTIONS": node_options(existing_node_options), DIR_VARIABLE: str(directory)}


def bun_test_argv(argv: list[str]) -> list[str]:
    """`bun test ...` with the preload: as an option of the test subcommand (after `test`), where Bun's test runner
    reads `--preload`; BUN_OPTIONS cannot carry it (see bun_environment). Unchanged when there is no `test`."""
    if "test" not in argv[1:]:
        return list(argv)
    at = argv.index("test", 1) + 1
    return [*argv[:at], "--preload", str(PRELOAD), *argv[at:]]


def bun_environment(directory: Path, existing_bun_options: str | None = None) -> dict[str, str]:
    """The variables to add to a traced `bun <file>` program's environment. Bun puts BUN_OPTIONS before its own
    arguments, where an option turns a subcommand into a script name (`bun --preload x test` runs the package's
    "test" script), so only a file run gets it, and the preload puts the user's BUN_OPTIONS back (BUN_OPTIONS_VARIABLE)
    for the processes the program starts."""
    return {"BUN_OPTIONS": bun_options(existing_bun_options), BUN_OPTIONS_VARIABLE: existing_bun_options or "",
            DIR_VARIABLE: str(directory)}
