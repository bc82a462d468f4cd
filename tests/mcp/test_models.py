"""Tool input models, the validation errors agents see, schema inlining, QueryRequest -> EventFilter."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from strobe.mcp.app import _inline_refs, describe_validation_error
from strobe.mcp.models import (
    DeleteSessionRequest,
    LaunchRequest,
    ListSessionsRequest,
    QueryRequest,
    StopRequest,
    TestRequest,
    TestStatusRequest,
    TraceRequest,
)
from strobe.mcp.query_tools import to_filter
from strobe.store.query import UNSET, EventFilter, TextMatch, TimeBound
from strobe.store.schema import EventKind


def rejected(model: type[pydantic.BaseModel], data: dict[str, Any]) -> str:
    with pytest.raises(pydantic.ValidationError) as info:
        model.model_validate(data)
    message = describe_validation_error(info.value)
    assert message.startswith("Invalid parameters: ") and message.endswith(".")
    return message


# ---- QueryRequest --------------------------------------------------------------------------------


def test_minimal_query_defaults() -> None:
    req = QueryRequest.model_validate({"sessionId": "s"})
    assert (req.limit, req.offset, req.verbose) == (50, 0, False)
    assert req.function is None and req.returnValue is None and req.timeFrom is None


@pytest.mark.parametrize("limit", [0, 501, -1])
def test_limit_out_of_range(limit: int) -> None:
    message = rejected(QueryRequest, {"sessionId": "s", "limit": limit})
    assert message.startswith("Invalid parameters: limit: ")
    assert f"(got {limit})" in message


@pytest.mark.parametrize("limit", [1, 500])
def test_limit_bounds_accepted(limit: int) -> None:
    assert QueryRequest.model_validate({"sessionId": "s", "limit": limit}).limit == limit


def test_limit_as_string_rejected() -> None:
    message = rejected(QueryRequest, {"sessionId": "s", "limit": "50"})
    assert message == 'Invalid parameters: limit: Input should be a valid integer (got "50").'


@pytest.mark.parametrize(
    ("field", "value"), [("verbose", "true"), ("verbose", 1), ("offset", 1.0), ("pid", True)]
)
def test_strict_types(field: str, value: Any) -> None:
    message = rejected(QueryRequest, {"sessionId": "s", field: value})
    assert f"{field}:" in message


def test_unknown_key_rejected() -> None:
    message = rejected(QueryRequest, {"sessionId": "s", "limt": 5})
    assert message == (
        "Invalid parameters: limt: unknown parameter (check its spelling against the tool's input schema)."
    )


def test_unknown_nested_key_rejected() -> None:
    message = rejected(QueryRequest, {"sessionId": "s", "function": {"equal": "main"}})
    assert "function.equal: unknown parameter" in message


def test_missing_session_id() -> None:
    assert rejected(QueryRequest, {}) == "Invalid parameters: sessionId: required parameter is missing."


def test_empty_session_id() -> None:
    assert rejected(QueryRequest, {"sessionId": ""}).startswith("Invalid parameters: sessionId: ")


def test_several_problems_reported_together() -> None:
    message = rejected(QueryRequest, {"limit": 0, "bogus": 1})
    assert "sessionId: required parameter is missing" in message
    assert "limit: " in message
    assert "bogus: unknown parameter" in message
    assert message.count("; ") == 2


def test_bad_regex_in_function_matches() -> None:
    message = rejected(QueryRequest, {"sessionId": "s", "function": {"matches": "parse_("}})
    assert message.startswith("Invalid parameters: function.matches: ")
    assert "not a valid regular expression" in message
    assert '(got "parse_(")' in message


def test_good_regex_accepted() -> None:
    req = QueryRequest.model_validate({"sessionId": "s", "function": {"matches": r"^parse_\w+$"}})
    assert req.function is not None and req.function.matches == r"^parse_\w+$"


@pytest.mark.parametrize("field", ["timeFrom", "timeTo"])
def test_bad_time_string(field: str) -> None:
    message = rejected(QueryRequest, {"sessionId": "s", field: "5 minutes ago"})
    assert message.startswith(f"Invalid parameters: {field}: ")
    assert "'5 minutes ago' is not a time" in message
    assert '"-5s"' in message


@pytest.mark.parametrize("value", [1_500_000_000, -5, "2s", "-500ms", "-1m"])
def test_good_time_values(value: int | str) -> None:
    assert QueryRequest.model_validate({"sessionId": "s", "timeFrom": value}).timeFrom == value


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("function", "function needs one of equals, contains, matches"),
        ("sourceFile", "sourceFile needs equals or contains"),
        ("returnValue", "returnValue needs equals or isNull"),
    ],
)
def test_empty_match_objects_rejected(field: str, text: str) -> None:
    message = rejected(QueryRequest, {"sessionId": "s", field: {}})
    assert message.startswith("Invalid parameters: arguments: ")
    assert text in message


@pytest.mark.parametrize(
    ("field", "value"),
    [("function", {"equals": None}), ("sourceFile", {"contains": None}), ("returnValue", {"isNull": None})],
)
def test_match_object_with_only_nulls_rejected(field: str, value: dict[str, Any]) -> None:
    rejected(QueryRequest, {"sessionId": "s", field: value})


def test_thread_name_requires_contains() -> None:
    message = rejected(QueryRequest, {"sessionId": "s", "threadName": {}})
    assert "threadName.contains: required parameter is missing" in message


@pytest.mark.parametrize(
    ("field", "value"),
    [("eventType", "function_call"), ("minDurationNs", -1), ("pid", 0), ("offset", -1)],
)
def test_other_field_limits(field: str, value: Any) -> None:
    assert f"{field}:" in rejected(QueryRequest, {"sessionId": "s", field: value})


FULL_QUERY: dict[str, Any] = {
    "sessionId": "server-2026-02-05-14h32",
    "eventType": "function_exit",
    "function": {"equals": "main", "contains": "ai", "matches": "^m"},
    "sourceFile": {"equals": "/p/main.c", "contains": "main"},
    "returnValue": {"equals": {"ok": True}, "isNull": False},
    "threadName": {"contains": "worker"},
    "timeFrom": "-5s",
    "timeTo": 9_000_000_000,
    "minDurationNs": 1000,
    "pid": 42,
    "limit": 500,
    "offset": 10,
    "verbose": True,
}


def test_full_query_accepted() -> None:
    req = QueryRequest.model_validate(FULL_QUERY)
    assert req.model_dump(exclude_unset=True) == FULL_QUERY


# ---- other requests ------------------------------------------------------------------------------


def test_launch_request_requires_command_and_project_root() -> None:
    message = rejected(LaunchRequest, {})
    assert "projectRoot: required parameter is missing" in message
    assert "projectRoot: required parameter is missing" in rejected(LaunchRequest, {"command": "/bin/true"})
    assert "give exactly one of command (start a program) or pid" in rejected(LaunchRequest, {"projectRoot": "/p"})


def test_launch_request_empty_command_rejected() -> None:
    assert rejected(LaunchRequest, {"command": "", "projectRoot": "/p"}).startswith(
        "Invalid parameters: command: "
    )


def test_launch_request_defaults_and_strictness() -> None:
    req = LaunchRequest.model_validate({"command": "./app", "projectRoot": "/p"})
    assert (req.args, req.cwd, req.env) == ([], None, {})
    assert "args" in rejected(LaunchRequest, {"command": "./app", "projectRoot": "/p", "args": "--x"})
    assert "env.N" in rejected(LaunchRequest, {"command": "./app", "projectRoot": "/p", "env": {"N": 1}})


def test_small_requests() -> None:
    assert StopRequest.model_validate({"sessionId": "s"}).retain is False
    assert "retain" in rejected(StopRequest, {"sessionId": "s", "retain": "yes"})
    ListSessionsRequest.model_validate({})
    assert "x: unknown parameter" in rejected(ListSessionsRequest, {"x": 1})
    assert "sessionId: required parameter is missing" in rejected(DeleteSessionRequest, {})


# ---- schema --------------------------------------------------------------------------------------


def _find_keys(node: Any, keys: set[str]) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        found += [k for k in node if k in keys]
        for value in node.values():
            found += _find_keys(value, keys)
    elif isinstance(node, list):
        for item in node:
            found += _find_keys(item, keys)
    return found


@pytest.mark.parametrize("model", [QueryRequest, LaunchRequest, StopRequest, DeleteSessionRequest])
def test_inline_refs_removes_refs(model: type[pydantic.BaseModel]) -> None:
    schema = _inline_refs(model.model_json_schema())
    assert _find_keys(schema, {"$ref", "$defs"}) == []


def test_inline_refs_keeps_nested_shapes() -> None:
    raw = QueryRequest.model_json_schema()
    assert _find_keys(raw, {"$ref"})  # the raw schema does use references
    schema = _inline_refs(raw)
    function = next(s for s in schema["properties"]["function"]["anyOf"] if s.get("type") == "object")
    assert set(function["properties"]) == {"equals", "contains", "matches"}
    assert function["additionalProperties"] is False
    thread = next(s for s in schema["properties"]["threadName"]["anyOf"] if s.get("type") == "object")
    assert thread["required"] == ["contains"]
    assert schema["properties"]["limit"]["maximum"] == 500
    assert schema["required"] == ["sessionId"]


# ---- to_filter -----------------------------------------------------------------------------------


def test_to_filter_minimal() -> None:
    assert to_filter(QueryRequest.model_validate({"sessionId": "s"})) == EventFilter()


def test_to_filter_full() -> None:
    req = QueryRequest.model_validate(
        {
            "sessionId": "s",
            "eventType": "stderr",
            "function": {"contains": "parse"},
            "sourceFile": {"equals": "/p/a.c"},
            "returnValue": {"equals": None},
            "threadName": {"contains": "w"},
            "timeFrom": "-5s",
            "timeTo": 100,
            "minDurationNs": 5,
            "pid": 3,
        }
    )
    assert to_filter(req) == EventFilter(
        kind=EventKind.STDERR,
        function=TextMatch(contains="parse"),
        source_file=TextMatch(equals="/p/a.c"),
        return_equals=None,
        return_is_null=None,
        thread_name_contains="w",
        time_from=TimeBound(-5_000_000_000, relative=True),
        time_to=TimeBound(100, relative=False),
        min_duration_ns=5,
        pid=3,
    )


def test_to_filter_return_equals_absent_is_unset() -> None:
    flt = to_filter(QueryRequest.model_validate({"sessionId": "s", "returnValue": {"isNull": False}}))
    assert flt.return_equals is UNSET
    assert flt.return_is_null is False


def test_to_filter_explicit_null_is_none() -> None:
    flt = to_filter(QueryRequest.model_validate({"sessionId": "s", "returnValue": {"equals": None}}))
    assert flt.return_equals is None
    assert flt.return_is_null is None


@pytest.mark.parametrize("value", [0, "0x10", {"a": [1]}, False, 2.5])
def test_to_filter_return_equals_values(value: Any) -> None:
    flt = to_filter(QueryRequest.model_validate({"sessionId": "s", "returnValue": {"equals": value}}))
    assert flt.return_equals == value and type(flt.return_equals) is type(value)


@pytest.mark.parametrize(
    "event_type", ["function_enter", "function_exit", "stdout", "stderr", "crash", "variable_snapshot"]
)
def test_to_filter_event_types(event_type: str) -> None:
    flt = to_filter(QueryRequest.model_validate({"sessionId": "s", "eventType": event_type}))
    assert flt.kind is EventKind.from_wire(event_type)
    assert flt.kind is not None and flt.kind.wire_name == event_type


def test_to_filter_all_function_match_fields() -> None:
    req = QueryRequest.model_validate(
        {"sessionId": "s", "function": {"equals": "a", "contains": "b", "matches": "c"}}
    )
    assert to_filter(req).function == TextMatch(equals="a", contains="b", matches="c")


@pytest.mark.parametrize(("model", "arguments", "problem"), [
    (QueryRequest, {"sessionId": "s" * 257}, "sessionId"),
    (QueryRequest, {"sessionId": "s", "function": {"contains": "f" * 4097}}, "function.contains"),
    (QueryRequest, {"sessionId": "s", "offset": 2**63}, "offset"),
    (QueryRequest, {"sessionId": "s", "minDurationNs": 2**64}, "minDurationNs"),
    (QueryRequest, {"sessionId": "s", "timeFrom": -(2**63) - 1}, "timeFrom"),
    (QueryRequest, {"sessionId": "s", "pid": 2**31}, "pid"),
    (QueryRequest, {"sessionId": "s", "returnValue": {"equals": 2**64}}, "returnValue.equals"),
    (QueryRequest, {"sessionId": "s", "returnValue": {"equals": "x" * 5000}}, "returnValue.equals"),
    (LaunchRequest, {"command": "/bin/true", "projectRoot": "relative/dir"}, "projectRoot"),
    (LaunchRequest, {"command": "/bin/true", "projectRoot": "/p", "args": ["a" * 131_073]}, "args.0"),
    (LaunchRequest, {"command": "c" * 4097, "projectRoot": "/p"}, "command"),
    (TraceRequest, {"projectRoot": "here", "add": ["main"]}, "projectRoot"),
    (TraceRequest, {"add": ["p" * 4097]}, "add.0"),
    (TestRequest, {"projectRoot": "."}, "projectRoot"),
    (TestRequest, {"projectRoot": "/p", "env": {"K": "v" * 131_073}}, "env.K"),
    (TestStatusRequest, {"testRunId": "r" * 257}, "testRunId"),
])
def test_every_string_and_integer_is_bounded(model: type[pydantic.BaseModel], arguments: dict[str, Any],
                                             problem: str) -> None:
    """Oversized strings, integers beyond 64 bits and relative project roots are validation errors, never
    something the daemon stores, resolves against its own directory, or fails on deep inside."""
    with pytest.raises(pydantic.ValidationError) as info:
        model.model_validate(arguments)
    assert [".".join(map(str, e["loc"])) for e in info.value.errors()] == [problem]
    assert len(describe_validation_error(info.value)) < 400  # the message never echoes the whole input


def test_long_arguments_within_the_kernels_limit_are_accepted() -> None:
    request = LaunchRequest.model_validate({"command": "/bin/true", "projectRoot": "/p", "args": ["a" * 131_072],
                                            "env": {"K": "v" * 131_072}})
    assert len(request.args[0]) == 131_072


def test_launch_takes_command_or_pid_not_both() -> None:
    from strobe.mcp.models import LaunchRequest

    assert LaunchRequest.model_validate({"pid": 42, "projectRoot": "/p"}).pid == 42
    assert LaunchRequest.model_validate({"command": "./a", "projectRoot": "/p"}).pid is None
    for bad, says in [({"pid": 42, "command": "./a"}, "not both"), ({}, "exactly one of command"),
                      ({"pid": 42, "env": {"A": "1"}}, "env only apply when starting"), ({"pid": 0}, "greater than")]:
        with pytest.raises(pydantic.ValidationError, match=says):
            LaunchRequest.model_validate({**bad, "projectRoot": "/p"})
