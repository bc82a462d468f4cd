"""Shapes of messages on both sides of the agent <-> host boundary in one vocabulary, and their differences.

The agent's side comes from agent_ts.protocol_facts() (the TypeScript compiler's reading of
agent/src/common/protocol.ts and requests.ts); the host's from Python annotations: the pydantic models of
agent->host messages in strobe.instrument.protocol and the TypedDicts of host->agent requests in
strobe.instrument.requests. A shape is a dict such as {"kind": "string"}, {"kind": "array", "of": shape} or
{"kind": "object", "fields": {name: {"optional": bool, "type": shape}}} (agent_ts.cjs lists the kinds).
`differences(agent, host, "TraceBatch")` returns one line per disagreement, naming the message and field;
`value_errors(value, agent, where)` checks a value the host sends.

    differences(ts.shape("HooksRequest"), python_shape(HooksRequest), "HooksRequest")  # [] when they agree
"""

from __future__ import annotations

import json
import types
from typing import Any, Literal, NotRequired, Required, Union, get_args, get_origin, get_type_hints, is_typeddict

from pydantic import BaseModel

Shape = dict[str, Any]
UNKNOWN: Shape = {"kind": "unknown"}


class AgentTypes:
    """The interfaces and aliases of protocol.ts and requests.ts, with `ref`s resolved by name."""

    def __init__(self, facts: dict[str, Any]) -> None:
        self.interfaces: dict[str, dict[str, Any]] = facts["interfaces"]
        self.aliases: dict[str, Shape] = facts["aliases"]
        self.consts: dict[str, Any] = facts["consts"]

    def shape(self, name: str) -> Shape:
        if name in self.interfaces:
            return {"kind": "object", "fields": self.interfaces[name]}
        if name in self.aliases:
            return self.resolve(self.aliases[name])
        raise KeyError(f"protocol.ts and requests.ts declare no interface or type named {name}")

    def resolve(self, shape: Shape) -> Shape:
        return self.shape(shape["name"]) if shape["kind"] == "ref" else shape

    def tag(self, name: str) -> str | None:
        """The `type` tag of an interface, if it is a message."""
        field = self.interfaces[name].get("type")
        if field is None or field["type"]["kind"] != "literal" or len(field["type"]["values"]) != 1:
            return None
        tag: str = field["type"]["values"][0]
        return tag

    def agent_messages(self) -> dict[str, str]:
        """tag -> interface name of every member of the AgentMessage union (agent -> host)."""
        union = self.aliases["AgentMessage"]
        members = union["of"] if union["kind"] == "union" else [union]
        out = {}
        for member in members:
            tag = self.tag(member["name"])
            assert tag is not None, f"AgentMessage member {member['name']} has no `type` tag"
            out[tag] = member["name"]
        return out

    def host_requests(self) -> dict[str, str]:
        """tag -> interface name of every other tagged interface (host -> agent)."""
        sent = set(self.agent_messages().values())
        tags = {name: self.tag(name) for name in self.interfaces if name not in sent}
        return {tag: name for name, tag in tags.items() if tag is not None}


def python_shape(annotation: Any) -> Shape:
    """The shape of a Python annotation as the host uses it for JSON."""
    if annotation is Any:
        return UNKNOWN
    if annotation is type(None):
        return {"kind": "null"}
    if annotation is str:
        return {"kind": "string"}
    if annotation is bool:
        return {"kind": "boolean"}
    if annotation in (int, float):
        return {"kind": "number"}
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return {"kind": "literal", "values": list(args)}
    if origin in (Union, types.UnionType):
        members = [python_shape(a) for a in args]
        if all(m["kind"] == "literal" for m in members):
            return {"kind": "literal", "values": [v for m in members for v in m["values"]]}
        return {"kind": "union", "of": members}
    if origin is list:
        return {"kind": "array", "of": python_shape(args[0])}
    if origin is tuple:
        return {"kind": "tuple", "items": [python_shape(a) for a in args]}
    if origin is dict:
        assert args[0] is str, f"JSON objects have string keys, not {args[0]}"
        return {"kind": "record", "value": python_shape(args[1])}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {"kind": "object", "fields": _model_fields(annotation)}
    if is_typeddict(annotation):
        return {"kind": "object", "fields": _typeddict_fields(annotation)}
    raise TypeError(f"no JSON shape for {annotation!r}")


def _model_fields(model: type[BaseModel]) -> dict[str, Any]:
    fields = {}
    for name, info in model.model_fields.items():
        optional = not info.is_required()
        shape = python_shape(info.annotation)
        if optional and info.default is None and shape["kind"] == "union":
            # `x: T | None = None` is the host's way to accept an absent `x?: T`.
            rest = [m for m in shape["of"] if m["kind"] != "null"]
            shape = rest[0] if len(rest) == 1 else {"kind": "union", "of": rest}
        fields[info.alias or name] = {"optional": optional, "type": shape}
    return fields


def _typeddict_fields(cls: Any) -> dict[str, Any]:
    # NotRequired read from the annotations themselves: __required_keys__ misses it under
    # `from __future__ import annotations` before Python 3.12.
    fields = {}
    for name, hint in get_type_hints(cls, include_extras=True).items():
        optional = not cls.__total__
        if get_origin(hint) in (NotRequired, Required):
            optional = get_origin(hint) is NotRequired
            hint = get_args(hint)[0]
        fields[name] = {"optional": optional, "type": python_shape(hint)}
    return fields


def _show(shape: Shape) -> str:
    kind = shape["kind"]
    if kind == "literal":
        return " | ".join(json.dumps(v) for v in shape["values"])
    if kind == "array":
        return f"{_show(shape['of'])}[]"
    if kind == "tuple":
        return "[" + ", ".join(_show(i) for i in shape["items"]) + "]"
    if kind == "record":
        return f"Record<string, {_show(shape['value'])}>"
    if kind == "object":
        return "{" + ", ".join(shape["fields"]) + "}"
    if kind == "union":
        return " | ".join(_show(m) for m in shape["of"])
    if kind == "ref":
        return str(shape["name"])
    return str(kind)


def differences(agent: Shape, host: Shape, where: str, ts: AgentTypes) -> list[str]:
    """Every disagreement between the agent's shape and the host's, each naming where it is."""
    agent = ts.resolve(agent)
    if agent["kind"] == "unknown" or host["kind"] == "unknown":
        return []
    if agent["kind"] != host["kind"]:
        return [f"{where}: the agent says {_show(agent)}, the host {_show(host)}"]
    kind = agent["kind"]
    if kind == "literal" and sorted(agent["values"]) != sorted(host["values"]):
        return [f"{where}: the agent allows {_show(agent)}, the host {_show(host)}"]
    if kind == "array":
        return differences(agent["of"], host["of"], f"{where}[]", ts)
    if kind == "record":
        return differences(agent["value"], host["value"], f"{where}{{}}", ts)
    if kind == "tuple":
        if len(agent["items"]) != len(host["items"]):
            return [f"{where}: the agent says {_show(agent)}, the host {_show(host)}"]
        return [d for i, (a, h) in enumerate(zip(agent["items"], host["items"], strict=True))
                for d in differences(a, h, f"{where}[{i}]", ts)]
    if kind == "union":
        canonical = [json.dumps(ts.resolve(m), sort_keys=True) for m in agent["of"]]
        if sorted(canonical) != sorted(json.dumps(m, sort_keys=True) for m in host["of"]):
            return [f"{where}: the agent says {_show(agent)}, the host {_show(host)}"]
        return []
    if kind == "object":
        return _field_differences(agent["fields"], host["fields"], where, ts)
    return []


def _field_differences(agent: dict[str, Any], host: dict[str, Any], where: str, ts: AgentTypes) -> list[str]:
    out = [f"{where}.{name}: in the agent's interface, not in the host's" for name in agent if name not in host]
    out += [f"{where}.{name}: in the host's model, not in the agent's interface" for name in host if name not in agent]
    for name in agent.keys() & host.keys():
        a, h = agent[name], host[name]
        if a["optional"] != h["optional"]:
            out.append(f"{where}.{name}: {'optional' if a['optional'] else 'required'} in the agent, "
                       f"{'optional' if h['optional'] else 'required'} in the host")
        out += differences(a["type"], h["type"], f"{where}.{name}", ts)
    return sorted(out)


def value_errors(value: Any, shape: Shape, where: str, ts: AgentTypes) -> list[str]:
    """Why `value` (as the host would post it) is not what the agent's shape declares."""
    shape = ts.resolve(shape)
    kind = shape["kind"]
    wrong = [f"{where}: {value!r} is not {_show(shape)}"]
    if kind == "unknown":
        return []
    if kind in ("string", "number", "boolean", "null"):
        expected: dict[str, tuple[type, ...]] = {"string": (str,), "number": (int, float), "boolean": (bool,),
                                                 "null": (type(None),)}
        ok = isinstance(value, expected[kind]) and (kind == "boolean" or not isinstance(value, bool))
        return [] if ok else wrong
    if kind == "literal":
        return [] if value in shape["values"] else wrong
    if kind == "array":
        if not isinstance(value, list):
            return wrong
        return [e for i, item in enumerate(value) for e in value_errors(item, shape["of"], f"{where}[{i}]", ts)]
    if kind == "tuple":
        if not isinstance(value, list | tuple) or len(value) != len(shape["items"]):
            return wrong
        return [e for i, (item, s) in enumerate(zip(value, shape["items"], strict=True))
                for e in value_errors(item, s, f"{where}[{i}]", ts)]
    if kind == "record":
        if not isinstance(value, dict):
            return wrong
        return [e for k, v in value.items() for e in value_errors(v, shape["value"], f"{where}.{k}", ts)]
    if kind == "union":
        return [] if any(not value_errors(value, m, where, ts) for m in shape["of"]) else wrong
    if not isinstance(value, dict):
        return wrong
    fields = shape["fields"]
    out = [f"{where}.{name}: not in the agent's interface" for name in value if name not in fields]
    for name, field in fields.items():
        if name not in value:
            if not field["optional"]:
                out.append(f"{where}.{name}: missing (required by the agent)")
            continue
        out += value_errors(value[name], field["type"], f"{where}.{name}", ts)
    return out
