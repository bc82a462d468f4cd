"""debug_read of variables resolved from DWARF, end to end on C, C++ and Rust programs built now:
scalars, '.' and '->' chains, nested structs by depth, an inherited member, arrays, enums, statics,
and the per-target errors (unknown variable or field, null pointer in the chain, limits)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Control, StrobeClient, poll

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def launch_ready(client: StrobeClient, binary: Path, project: Path, control: Control) -> str:
    sid = (await client.call("debug_launch", command=str(binary), args=[str(control.directory)],
                             projectRoot=str(project)))["sessionId"]

    async def ready() -> bool | None:
        page = await client.call("debug_query", sessionId=sid, eventType="stdout")
        return True if any(e["text"] == "ready\n" for e in page["events"]) else None

    await poll(ready, 30, "the target to be ready")
    return sid


async def read(client: StrobeClient, sid: str, *variables: str, depth: int = 1) -> dict[str, dict[str, Any]]:
    results = (await client.call("debug_read", sessionId=sid, depth=depth,
                                 targets=[{"variable": v} for v in variables]))["results"]
    assert [r["target"] for r in results] == list(variables)
    return {r["target"]: r for r in results}


async def test_c_scalars_chains_structs_arrays_and_errors(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, c_target("memory"), project, control)
    got = await read(strobe, sid, "g_counter", "g_tempo", "s_hidden", "g_mode", "g_config_ptr->next->name",
                     "g_config_ptr->inner.pos.y", "g_config.limits", "g_config.limits[2]",
                     "g_config_ptr->next->next->id", "g_null_ptr->id", "g_config.nope", "g_nothing_like_this")
    assert got["g_counter"]["value"] == 42 and got["g_counter"]["type"] == "int" and got["g_counter"]["size"] == 4
    assert got["g_tempo"]["value"] == 120.5
    assert got["s_hidden"]["value"] == 7
    assert got["g_mode"]["value"] == "MODE_RUN"
    assert got["g_config_ptr->next->name"]["value"] == "second"
    assert got["g_config_ptr->inner.pos.y"]["value"] == 20
    assert got["g_config.limits"]["value"] == [1, 2, 3, 4] and got["g_config.limits"]["type"] == "int[4]"
    assert got["g_config.limits[2]"]["value"] == 3
    assert got["g_config_ptr->next->next->id"]["error"] == "Null pointer at g_config_ptr->next->next"
    assert got["g_null_ptr->id"]["error"] == "Null pointer at g_null_ptr"
    assert "has no field 'nope'" in got["g_config.nope"]["error"] and "limits" in got["g_config.nope"]["error"]
    assert got["g_nothing_like_this"]["error"].startswith("Variable 'g_nothing_like_this' not found")
    # Each address is the variable's own: the counter moves after a round, and the read follows it.
    await control.round(strobe, sid)
    after = await read(strobe, sid, "g_counter", "g_config.inner.pos.x")
    assert after["g_counter"]["value"] == 43 and after["g_config.inner.pos.x"]["value"] == 20
    assert after["g_counter"]["address"] == got["g_counter"]["address"]


async def test_c_struct_expansion_follows_depth(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, c_target("memory"), project, control)
    shallow = (await read(strobe, sid, "g_config"))["g_config"]
    assert shallow["type"] == "Config" and "value" not in shallow
    fields = shallow["fields"]
    assert fields["id"] == {"type": "int", "value": 1}
    assert fields["name"] == {"type": "char*", "value": "primary"}
    assert fields["inner"] == {"type": "Inner", "value": "<struct>"}
    assert fields["limits"] == {"type": "int[4]", "value": [1, 2, 3, 4]}
    assert fields["flags"]["value"] == 0x80
    assert fields["next"]["value"].startswith("0x")
    deep = (await read(strobe, sid, "g_config", depth=3))["g_config"]["fields"]
    assert deep["inner"]["fields"]["ratio"] == {"type": "double", "value": 1.5}
    assert deep["inner"]["fields"]["pos"]["fields"]["x"] == {"type": "int", "value": 10}
    middle = (await read(strobe, sid, "g_config", depth=2))["g_config"]["fields"]
    assert middle["inner"]["fields"]["pos"] == {"type": "Point", "value": "<struct>"}


async def test_expression_limits_are_per_target_errors(
    strobe: StrobeClient, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, c_target("memory"), project, control)
    five = "g_config_ptr->next->next->next->next->id"
    got = await read(strobe, sid, five, "g_counter->x", "g_counter")
    assert "4" in got[five]["error"] and "dereference" in got[five]["error"]
    assert "not a pointer" in got["g_counter->x"]["error"]
    assert got["g_counter"]["value"] == 42


async def test_cpp_inherited_member_namespaces_and_class_statics(
    strobe: StrobeClient, cpp_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, cpp_target("memory_cpp"), project, control)
    got = await read(strobe, sid, "audio::g_engine.base_field", "audio::g_engine_ptr->voices",
                     "audio::Engine::instances", "audio::g_engine_ptr->self->gain", "audio::g_engine")
    assert got["audio::g_engine.base_field"]["value"] == 11
    assert got["audio::g_engine_ptr->voices"]["value"] == 8
    assert got["audio::Engine::instances"]["value"] == 3
    assert got["audio::g_engine_ptr->self->gain"]["value"] == 0.5
    fields = got["audio::g_engine"]["fields"]
    assert fields["base_field"]["value"] == 11 and fields["voices"]["value"] == 8
    await control.round(strobe, sid)
    assert (await read(strobe, sid, "audio::g_engine.voices"))["audio::g_engine.voices"]["value"] == 9


async def test_rust_statics(
    strobe: StrobeClient, rust_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    sid = await launch_ready(strobe, rust_target("rust_memory"), project, control)
    got = await read(strobe, sid, "rust_memory::SETTINGS", "rust_memory::SETTINGS.limits.high",
                     "rust_memory::SETTINGS.channels", "rust_memory::COUNTER", depth=2)
    settings = got["rust_memory::SETTINGS"]["fields"]
    assert settings["rate"]["value"] == 48000 and settings["gain"]["value"] == 0.75
    assert settings["limits"]["fields"]["low"]["value"] == 20
    assert got["rust_memory::SETTINGS.limits.high"]["value"] == 20000
    assert got["rust_memory::SETTINGS.channels"]["value"] == [1, 2, 6]
    counter = got["rust_memory::COUNTER"]
    await control.round(strobe, sid)
    again = (await read(strobe, sid, "rust_memory::COUNTER", depth=3))["rust_memory::COUNTER"]
    assert counter["type"] == "AtomicU64"
    assert counter["fields"]["v"]["fields"]["value"] == {"type": "u64", "value": 5}
    assert again["fields"]["v"]["fields"]["value"] == {"type": "u64", "value": 6}
    assert (await read(strobe, sid, "rust_memory::COUNTER.v.value"))["rust_memory::COUNTER.v.value"]["value"] == 6
