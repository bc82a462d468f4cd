"""The tool table: a name, an input model, an LLM-facing description and an async handler per tool."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from strobe.daemon.sessions import SessionManager
from strobe.daemon.trace_requests import DEFAULT_CLIENT
from strobe.paths import StrobePaths
from strobe.settings import SettingsSource

Progress = Callable[[float, float | None, str | None], Awaitable[None]]  # (progress, total, message)


@dataclass(frozen=True)
class ToolContext:
    manager: SessionManager
    paths: StrobePaths
    progress: Progress | None = None  # this call's MCP progress notifications (a no-op if the client asked none)
    client: object = None  # the connection this server serves (service.py builds one per connection)

    @property
    def settings(self) -> SettingsSource:
        return self.manager.settings

    @property
    def connection(self) -> object:
        """The key of this call's client for what it keeps between calls (staged patterns)."""
        return self.client if self.client is not None else DEFAULT_CLIENT


Handler = Callable[[ToolContext, Any], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Tool:
    name: str
    model: type[BaseModel]
    description: str
    handler: Handler

    def input_schema(self) -> dict[str, Any]:
        schema = self.model.model_json_schema()
        schema.pop("title", None)
        return schema
