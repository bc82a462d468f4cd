"""debug_input: more text for a running program's standard input, or its end-of-file."""

from __future__ import annotations

from typing import Any

from strobe.mcp.models import InputRequest
from strobe.mcp.registry import Tool, ToolContext


async def send_input(ctx: ToolContext, req: InputRequest) -> dict[str, Any]:
    data = (req.text or "").encode()
    feed = await ctx.manager.send_input(req.sessionId, data, req.close)
    result: dict[str, Any] = {"success": True, "bytes": len(data), "stdinOpen": not req.close}
    if feed.pending:  # the program has not read it all yet: the pipe holds 64 KiB
        result["waitingBytes"] = feed.pending
    result["nextSteps"] = (f"Read what the program made of it: debug_query({{sessionId: '{req.sessionId}', "
                           "eventType: 'stdout'}).")
    return result


TOOLS = (
    Tool(
        "debug_input",
        InputRequest,
        "Send text to the standard input of a program you launched with debug_launch {keepStdinOpen: true}, or "
        "close that input (close: true) so a program reading to end-of-file finishes. Use it for interactive "
        "programs (a REPL, a prompt, a server reading commands); for input known in advance, launch with stdin or "
        "stdinFile instead. The text is written as is: end each line with \\n. Returns {success, bytes, stdinOpen} "
        "(waitingBytes: what the program has not read yet). Fails with SESSION_NOT_FOUND (unknown session), "
        "PROCESS_EXITED (it has ended) or VALIDATION_ERROR (its stdin is already closed, or it was launched without "
        "keepStdinOpen, stdin or stdinFile).\n"
        'Example: {"sessionId": "calc-2026-02-05-14h32", "text": "2 + 3\\n", "close": true}',
        send_input,
    ),
)
