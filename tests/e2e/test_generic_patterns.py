"""debug_trace over MCP with patterns that name generic (Rust) and template (C++) functions without their arguments:
one pattern hooks every instantiation `nm -C` lists (tests/targets/rust_generics, tests/targets/templates.cpp), and
each one's calls come back under its own name; a pattern that spells the arguments hooks that instantiation only."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Control, StrobeClient, poll
from tests.symbols.test_patterns import STD_STRING, nm_instances

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def launch_ready(client: StrobeClient, binary: Path, project: Path, control: Control) -> str:
    launched = await client.call("debug_launch", command=str(binary), args=[str(control.directory)],
                                 projectRoot=str(project))
    sid = str(launched["sessionId"])

    async def ready() -> bool | None:
        page = await client.call("debug_query", sessionId=sid, eventType="stdout")
        return True if any(e["text"] == "ready\n" for e in page["events"]) else None

    await poll(ready, 30, f"{binary.name} to be ready")
    return sid


async def returns(client: StrobeClient, sid: str) -> Counter[tuple[str, Any]]:
    exits = await client.all_events(sid, eventType="function_exit", verbose=True)
    return Counter((e["function"], e["returnValue"]) for e in exits)


async def printed(client: StrobeClient, sid: str) -> list[str]:
    return [e["text"] for e in await client.all_events(sid, eventType="stdout")]


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed")
async def test_rust_generic_method_every_instantiation(
    strobe: StrobeClient, rust_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    binary = rust_target("rust_generics")
    instances = nm_instances(binary, "print_all")
    assert len(instances) == 3  # Printer<u32> with &str and f64, Printer<String> with i64
    sid = await launch_ready(strobe, binary, project, control)
    traced = await strobe.call("debug_trace", sessionId=sid, add=["rust_generics::app::*::print_all"])
    assert traced["hookedFunctions"] == len(instances), traced
    await control.round(strobe, sid)
    # Cargo's default (legacy) mangling: the index names the impl by its parameter and lists every argument last.
    assert await returns(strobe, sid) == {
        ("rust_generics::app::Printer<W>::print_all<u32, &str>", 2): 1,
        ("rust_generics::app::Printer<W>::print_all<u32, f64>", 3): 1,
        ("rust_generics::app::Printer<W>::print_all<alloc::string::String, i64>", 1): 1,
    }
    assert {'42: "a"\n', "42: 2.5\n", '"named": 7\n', "items [1, 2]\n"} <= set(await printed(strobe, sid))

    await strobe.call("debug_trace", sessionId=sid, remove=["rust_generics::app::*::print_all"])
    narrower = await strobe.call("debug_trace", sessionId=sid, add=["rust_generics::app::Printer::print_all<u32, f64>"])
    assert narrower["hookedFunctions"] == 1, narrower
    await control.round(strobe, sid)
    assert (await returns(strobe, sid))[("rust_generics::app::Printer<W>::print_all<u32, f64>", 3)] == 2
    await strobe.call("debug_stop", sessionId=sid)


async def test_cpp_member_template_every_instantiation(
    strobe: StrobeClient, cpp_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    binary = cpp_target("templates")
    instances = nm_instances(binary, "print_all")
    assert len(instances) == 3  # Printer<int> with double and const char*, Printer<std::string> with int
    sid = await launch_ready(strobe, binary, project, control)
    traced = await strobe.call("debug_trace", sessionId=sid, add=["app::*::print_all"])
    assert traced["hookedFunctions"] == len(instances), traced
    await control.round(strobe, sid)
    assert await returns(strobe, sid) == {
        ("app::Printer<int>::print_all<double>", 2): 1,
        ("app::Printer<int>::print_all<char const*>", 1): 1,
        (f"app::Printer<{STD_STRING} >::print_all<int>", 3): 1,
    }
    assert {"42: 1.5\n", "42: a\n", "named: 9\n", "items 2\n"} <= set(await printed(strobe, sid))

    await strobe.call("debug_trace", sessionId=sid, remove=["app::*::print_all"])
    spelled = await strobe.call("debug_trace", sessionId=sid, add=["app::Printer<int>::*", "app::Stack::push"])
    assert spelled["hookedFunctions"] == 4, spelled  # Printer<int>: two print_all; Stack<int>, Stack<double>: push
    await control.round(strobe, sid)
    enters = await strobe.all_events(sid, eventType="function_enter")
    assert Counter(e["function"] for e in enters) == {
        "app::Printer<int>::print_all<double>": 2, "app::Printer<int>::print_all<char const*>": 2,
        f"app::Printer<{STD_STRING} >::print_all<int>": 1,  # from the first round only
        "app::Stack<int>::push": 2, "app::Stack<double>::push": 1,
    }
    await strobe.call("debug_stop", sessionId=sid)
