"""The MCP server: lists the tools and turns each call into a handler call with errors that teach.

One `Server` serves every connection; each connection is its own MCP session. Tool failures come
back as results with isError set and {"error": {"code", "message"}} so the agent can correct itself.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import mcp_types as types
import pydantic
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from strobe import __version__
from strobe.errors import ErrorCode, StrobeError
from strobe.mcp import debug_tools, input_tools, query_tools, read_tools, session_tools, testrun_tools, trace_tools
from strobe.mcp.export_tools import TOOLS as EXPORT_TOOLS
from strobe.mcp.registry import Tool, ToolContext
from strobe.mcp.stack_tools import TOOLS as STACK_TOOLS

log = logging.getLogger(__name__)

TOOLS: dict[str, Tool] = {
    tool.name: tool for tool in (
        *session_tools.TOOLS, *trace_tools.TOOLS, *query_tools.TOOLS, *read_tools.TOOLS, *testrun_tools.TOOLS,
        *debug_tools.TOOLS, *input_tools.TOOLS, *EXPORT_TOOLS,
        *STACK_TOOLS,
    )
}

INSTRUCTIONS = (
    "Strobe is a debugger for the user's own programs. Launch with debug_launch, read the program's "
    "output with debug_query (eventType 'stderr'/'stdout') before anything else, then narrow down; "
    "debug_stop ends a session."
)


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace $ref with the referenced definition so clients that ignore $defs still see the shape."""
    defs = schema.pop("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                target = dict(defs[ref.rsplit("/", 1)[1]])
                target.pop("title", None)
                merged = {**resolve(target), **{k: resolve(v) for k, v in node.items() if k != "$ref"}}
                return merged
            return {k: resolve(v) for k, v in node.items()}
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    result: dict[str, Any] = resolve(schema)
    return result


MAX_PROBLEMS = 10  # a validation message lists this many problems, then says how many more there are
MAX_NAME = 64  # a parameter name in it (an unknown key may be any length) is cut to this


def describe_validation_error(exc: pydantic.ValidationError) -> str:
    problems = []
    errors = exc.errors(include_url=False)
    for error in errors[:MAX_PROBLEMS]:
        where = ".".join(_clip(str(part), MAX_NAME) for part in error["loc"]) or "arguments"
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown parameter (check its spelling against the tool's input schema)"
        elif error["type"] == "missing":
            message = "required parameter is missing"
        given = error.get("input")
        got = json.dumps(given[:100] if isinstance(given, str) else given, default=str)[:80]  # never a whole 60 MB
        detail = "" if error["type"] in ("missing", "extra_forbidden") else f" (got {got})"
        problems.append(f"{where}: {message}{detail}")
    if len(errors) > MAX_PROBLEMS:
        problems.append(f"and {len(errors) - MAX_PROBLEMS} more problems (fix these first)")
    return "Invalid parameters: " + "; ".join(problems) + "."


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def describe_too_long(exc: OSError) -> str:
    path = str(exc.filename or "")
    shown = _clip(path, 160)
    return (f"A path is longer than the system allows (a name over 255 bytes, or a whole path over 4,095): '{shown}'. "
            "Pass a shorter path (a relative command is joined to cwd or projectRoot first).")


def _error_result(code: str, message: str) -> types.CallToolResult:
    payload = {"error": {"code": code, "message": message}}
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(payload))], structured_content=payload, is_error=True
    )


def build_server(context: ToolContext, on_activity: Callable[[int], None]) -> Server[Any]:
    """`on_activity(+1/-1)` brackets every tool call so the daemon knows when it is idle."""
    tools = [
        types.Tool(name=tool.name, description=tool.description, input_schema=_inline_refs(tool.input_schema()))
        for tool in TOOLS.values()
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = TOOLS.get(params.name)
        if tool is None:
            return _error_result(
                ErrorCode.VALIDATION_ERROR, f"Unknown tool '{params.name}'. Available: {', '.join(TOOLS)}."
            )
        on_activity(+1)
        started = time.monotonic()
        try:
            request = tool.model.model_validate(params.arguments or {})
            result = await tool.handler(dataclasses.replace(context, progress=ctx.session.report_progress), request)
        except pydantic.ValidationError as exc:
            return _error_result(ErrorCode.VALIDATION_ERROR, describe_validation_error(exc))
        except StrobeError as exc:
            log.info("%s -> %s: %s", tool.name, exc.code, exc.message)
            return _error_result(exc.code, exc.message)
        except Exception as exc:
            if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:  # the caller's path, wherever looked up
                message = describe_too_long(exc)
                log.info("%s -> %s: %s", tool.name, ErrorCode.VALIDATION_ERROR, message)
                return _error_result(ErrorCode.VALIDATION_ERROR, message)
            log.exception("%s failed", tool.name)
            return _error_result(
                ErrorCode.INTERNAL_ERROR,
                f"Strobe hit an internal error ({type(exc).__name__}: {exc}). The daemon is still running; "
                "retry, and see $STROBE_HOME/daemon.log for details.",
            )
        finally:
            on_activity(-1)
            log.debug("%s took %.1f ms", tool.name, (time.monotonic() - started) * 1000)
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(result, separators=(",", ":")))],
            structured_content=result,
        )

    return Server(
        "strobe",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
