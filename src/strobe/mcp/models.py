"""Tool inputs as pydantic models: the JSON schemas clients see and the validation limits, in one place.

Models are strict (no "50" for 50) and forbid unknown keys, so a typo'd parameter is an error the
agent can fix rather than a silently ignored filter.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from strobe.store.query import parse_time

EVENT_TYPES = ("function_enter", "function_exit", "stdout", "stderr", "crash", "variable_snapshot")
MAX_QUERY_LIMIT = 500


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class LaunchRequest(StrictModel):
    command: str = Field(min_length=1, description="Path to the executable (absolute, or relative to cwd/projectRoot).")
    args: list[str] = Field(default_factory=list, description="Command-line arguments.")
    cwd: str | None = Field(default=None, description="Working directory; default: the executable's directory.")
    projectRoot: str = Field(min_length=1, description="Absolute path of the project (user-code detection, settings).")
    env: dict[str, str] = Field(default_factory=dict, description="Extra environment variables for the process.")


class FunctionMatch(StrictModel):
    equals: str | None = None
    contains: str | None = None
    matches: str | None = Field(default=None, description="Regular expression, searched anywhere in the name.")

    @field_validator("matches")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from exc
        return value


class SourceFileMatch(StrictModel):
    equals: str | None = None
    contains: str | None = None


class ReturnValueMatch(StrictModel):
    equals: Any = Field(default=None, description="Match return values equal to this JSON value.")
    isNull: bool | None = Field(default=None, description="true: only null returns; false: only non-null.")


class ThreadNameMatch(StrictModel):
    contains: str


class QueryRequest(StrictModel):
    sessionId: str = Field(min_length=1)
    eventType: Literal[
        "function_enter", "function_exit", "stdout", "stderr", "crash", "variable_snapshot"
    ] | None = None
    function: FunctionMatch | None = None
    sourceFile: SourceFileMatch | None = None
    returnValue: ReturnValueMatch | None = None
    threadName: ThreadNameMatch | None = None
    timeFrom: int | str | None = Field(
        default=None, description='Nanoseconds since session start, "2s" since start, or "-5s" before the latest event.'
    )
    timeTo: int | str | None = Field(default=None, description="Same forms as timeFrom.")
    minDurationNs: int | None = Field(default=None, ge=0)
    pid: int | None = Field(default=None, ge=1)
    limit: int = Field(default=50, ge=1, le=MAX_QUERY_LIMIT, description="Events per page, 1-500 (default 50).")
    offset: int = Field(default=0, ge=0)
    verbose: bool = False

    @field_validator("timeFrom", "timeTo")
    @classmethod
    def _time(cls, value: int | str | None) -> int | str | None:
        if value is not None:
            parse_time(value)
        return value

    @model_validator(mode="after")
    def _non_empty_matchers(self) -> QueryRequest:
        # An empty (or all-null) matcher would silently filter nothing: say so instead.
        if self.function is not None and all(v is None for v in self.function.model_dump().values()):
            raise ValueError("function needs one of equals, contains, matches (not null)")
        if self.sourceFile is not None and all(v is None for v in self.sourceFile.model_dump().values()):
            raise ValueError("sourceFile needs equals or contains (not null)")
        if self.returnValue is not None and "equals" not in self.returnValue.model_fields_set \
                and self.returnValue.isNull is None:
            raise ValueError("returnValue needs equals or isNull (equals: null matches null returns)")
        return self


class TraceRequest(StrictModel):
    sessionId: str | None = Field(
        default=None, min_length=1, description="A running session; omit to stage patterns for the next launch."
    )
    add: list[str] = Field(default_factory=list, max_length=100, description="Patterns to start tracing.")
    remove: list[str] = Field(default_factory=list, max_length=100, description="Active patterns to stop tracing.")
    projectRoot: str | None = Field(
        default=None, description="Project root for settings and @usercode in pending mode."
    )


class StopRequest(StrictModel):
    sessionId: str = Field(min_length=1)
    retain: bool = Field(default=False, description="Keep the session's events for later queries.")


class ListSessionsRequest(StrictModel):
    pass


class DeleteSessionRequest(StrictModel):
    sessionId: str = Field(min_length=1)
