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

        launched = await call(
            session, "debug_launch", {"command": str(binary), "projectRoot": str(HERE)},
            "The user says the stock value is wrong. Launch the program under Strobe.",
        )
        sid = launched["sessionId"]
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            sessions = (await session.call_tool("debug_list_sessions", {})).structured_content["sessions"]
            if next(s for s in sessions if s["sessionId"] == sid)["status"] != "running":
                break
            await anyio.sleep(0.1)
        await call(session, "debug_list_sessions", {}, "It ran to completion: how did it end?")
        await call(session, "debug_query", {"sessionId": sid, "eventType": "stderr"},
                   "Read stderr first, as nextSteps suggests.")
        await call(session, "debug_query", {"sessionId": sid, "eventType": "stdout"},
                   "The stock value is too high by 999.00. What did it print?")
        print(f"{BOLD}# 999.00 is exactly the TEMPLATE row (999 x 1.00): stock_value() loops one item too far "
              f"(i <= n). Function tracing (debug_trace) would show its arguments next.{RESET}\n")
        await call(session, "debug_stop", {"sessionId": sid}, "Done: stop the session and drop its data.")


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
