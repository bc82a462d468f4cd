"""The demo behind `make demo`: build a buggy C program and debug it through a real MCP session with
`strobe mcp`, printing every request and response as an agent would see them.

Runs against a private STROBE_HOME in a temporary directory and shuts its daemon down at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

HERE = Path(__file__).resolve().parent
BOLD, DIM, RESET = ("\033[1m", "\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "", "")


def build() -> Path:
    out = HERE / "build" / "inventory"
    out.parent.mkdir(exist_ok=True)
    subprocess.run(["gcc", "-g", "-O0", "-o", str(out), str(HERE / "inventory.c")], check=True)
    print(f"{DIM}built {out} with debug info{RESET}\n")
    return out


async def call(session: ClientSession, tool: str, arguments: dict[str, Any], note: str) -> dict[str, Any]:
    print(f"{BOLD}# {note}{RESET}")
    print(f"→ {tool} {json.dumps(arguments)}")
    result = await session.call_tool(tool, arguments)
    payload: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    print("← " + json.dumps(payload, indent=2).replace("\n", "\n  ") + "\n")
    if result.is_error:
        raise SystemExit(f"demo: {tool} failed")
    return payload


async def demo(binary: Path, home: Path) -> None:
    params = StdioServerParameters(command=sys.executable, args=["-m", "strobe", "mcp"], env={"STROBE_HOME": str(home)})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        info = await session.initialize()
        tools = await session.list_tools()
        print(f"{BOLD}# connected to {info.server_info.name} {info.server_info.version}{RESET}")
        print("  tools: " + ", ".join(tool.name for tool in tools.tools) + "\n")

        sid = await run_to_end(
            session, binary, "The user says the stock value is wrong. Launch the program under Strobe."
        )
        await call(session, "debug_list_sessions", {}, "It ran to completion: how did it end?")
        await call(session, "debug_query", {"sessionId": sid, "eventType": "stderr"},
                   "Read stderr first, as nextSteps suggests.")
        await call(session, "debug_query", {"sessionId": sid, "eventType": "stdout"},
                   "The stock value is too high by 999.00. What did it print?")
        await call(session, "debug_stop", {"sessionId": sid}, "Enough output: drop this run's data.")

        await call(
            session, "debug_trace", {"add": ["stock_value", "line_value"], "projectRoot": str(HERE)},
            "Where does 999.00 come from? Trace the two functions that compute the value, from the next launch on.",
        )
        sid = await run_to_end(session, binary, "Run it again, traced.")
        enters = await call(
            session, "debug_query", {"sessionId": sid, "eventType": "function_enter", "verbose": True},
            "Which rows did stock_value sum? Each line_value call shows the row it was given.",
        )
        exits = await call(
            session, "debug_query", {"sessionId": sid, "eventType": "function_exit", "verbose": True},
            "And what did each row add, and stock_value return?",
        )
        rows = [e for e in enters["events"] if e["function"] == "line_value"]
        added = [e["returnValue"] for e in exits["events"] if e["function"] == "line_value"]
        total = next(e for e in enters["events"] if e["function"] == "stock_value")
        print(f"{BOLD}# stock_value was called with n = {argument(total, 'n')} but line_value ran {len(rows)} times: "
              f"the last row is {argument(rows[-1], 'row')}, which returned "
              f"{added[-1]}. The loop in stock_value runs one row too far (i <= n): "
              f"it should be i < n.{RESET}\n")
        await call(session, "debug_stop", {"sessionId": sid}, "Done: stop the session and drop its data.")


async def run_to_end(session: ClientSession, binary: Path, note: str) -> str:
    """Launch the program and wait (polling debug_list_sessions) until it has exited; returns the session id."""
    launched = await call(session, "debug_launch", {"command": str(binary), "projectRoot": str(HERE)}, note)
    sid: str = launched["sessionId"]
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        sessions = (await session.call_tool("debug_list_sessions", {})).structured_content["sessions"]
        if next(s for s in sessions if s["sessionId"] == sid)["status"] != "running":
            break
        await anyio.sleep(0.1)
    return sid


def argument(event: dict[str, Any], name: str) -> str:
    """One argument of a verbose function_enter event, as Strobe shows it."""
    return json.dumps(event["arguments"][event["argumentNames"].index(name)])


def main() -> int:
    binary = build()
    home = Path(tempfile.mkdtemp(prefix="strobe-demo-"))
    try:
        anyio.run(demo, binary, home)
    finally:
        subprocess.run([sys.executable, "-m", "strobe", "shutdown"], env={**os.environ, "STROBE_HOME": str(home)},
                       check=False)
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
