"""The runtime registry: native and CPython; the other language runtimes are recognised at spawn/exec/attach and
traced as native code until their runtime is registered."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from strobe.daemon.runtimes import RUNTIMES, RuntimeKind, detect_kind, runtime_for, values_for
from strobe.daemon.runtimes.cpython import interpreter_version, tracer_state
from strobe.daemon.symbols import TraceableFunction
from strobe.instrument.protocol import ModuleInfo, PySetupDone
from strobe.instrument.requests import HookOptions
from strobe.symbols.index import FunctionInfo

OPTIONS = HookOptions(hot_calls_per_second=1, sample_every=1)


def modules(*names: str) -> list[ModuleInfo]:
    return [ModuleInfo(name=n, path=f"/usr/lib/{n}", base="0x1000", size=1) for n in names]


@pytest.mark.parametrize(("binary", "loaded", "kind"), [
    ("/home/me/app/build/server", ["server", "libc.so.6"], RuntimeKind.NATIVE),
    ("/usr/bin/python3.11", ["python3.11", "libc.so.6"], RuntimeKind.CPYTHON),
    ("/home/me/proj/.venv/bin/python", ["python3.11", "libc.so.6"], RuntimeKind.CPYTHON),  # a venv's symlink
    ("/home/me/.pyenv/versions/3.13.1/bin/python3.13", [], RuntimeKind.CPYTHON),  # before its modules are known
    ("/opt/app/embedder", ["embedder", "libpython3.12.so.1.0"], RuntimeKind.CPYTHON),
    ("/home/me/.pyenv/shims/python", ["bash", "libc.so.6"], RuntimeKind.NATIVE),  # a script named python
    ("/home/me/tool.py", ["python3.12", "libc.so.6"], RuntimeKind.CPYTHON),  # a #! script: its interpreter runs
    ("/usr/bin/node", ["node", "libc.so.6"], RuntimeKind.NODE),
    ("/opt/app/electron-like", ["electron-like", "libnode.so.115"], RuntimeKind.NODE),
    ("/home/me/node_modules/@oven/bun-linux-x64/bin/bun", [], RuntimeKind.BUN),
    ("/home/me/node_modules/bun/bin/bun.exe", ["bun.exe", "libc.so.6"], RuntimeKind.BUN),
    ("/home/me/node_modules/deno/deno", ["deno"], RuntimeKind.DENO),
    ("/usr/bin/pythonic-tool", [], RuntimeKind.NATIVE),
])
def test_detect_kind(binary: str, loaded: list[str], kind: RuntimeKind) -> None:
    assert detect_kind(binary, modules(*loaded)) is kind


def test_registered_runtimes_and_native_for_the_others() -> None:
    assert list(RUNTIMES) == [RuntimeKind.NATIVE, RuntimeKind.CPYTHON, RuntimeKind.NODE, RuntimeKind.BUN]
    for kind in (RuntimeKind.CPYTHON, RuntimeKind.NODE, RuntimeKind.BUN):
        assert runtime_for(kind) is RUNTIMES[kind]
    for kind in (RuntimeKind.NATIVE, RuntimeKind.DENO):
        assert runtime_for(kind) is RUNTIMES[RuntimeKind.NATIVE]


@pytest.mark.parametrize(("binary", "loaded", "version"), [
    ("/usr/bin/python3.11", [], (3, 11)),
    ("/home/me/.pyenv/versions/3.13.1/bin/python3.13", [], (3, 13)),
    ("/opt/app/embedder", ["libc.so.6", "libpython3.12.so.1.0"], (3, 12)),
    ("/home/me/proj/.venv/bin/python", ["libc.so.6"], None),
])
def test_interpreter_version(binary: str, loaded: list[str], version: tuple[int, int] | None) -> None:
    assert interpreter_version(binary, modules(*loaded)) == version


def test_python_values_render_what_the_tracer_rendered() -> None:
    values = values_for(RuntimeKind.CPYTHON)
    args = '[["self",{"__type__":"shop.Cart","owner":"ann"}],["n",3]]'
    assert values.arguments(args) == [{"__type__": "shop.Cart", "owner": "ann"}, 3]
    assert values.argument_names(args) == ["self", "n"]
    assert values.return_value("[1,2]") == [1, 2] and values.return_type("[1,2]") == "list"
    assert values.return_type('{"__type__":"shop.Cart"}') == "shop.Cart"
    assert [values.return_type(v) for v in ("null", "true", "3", "2.5", '"s"', '{"a":1}')] == [
        "None", "bool", "int", "float", "str", "dict"]
    assert values_for().argument_names(b"\0" * 8) is None  # native arguments carry no names


def test_native_values_render_raw_registers() -> None:
    values = values_for()
    assert values.arguments((7).to_bytes(8, "little") + (1 << 40).to_bytes(8, "little")) == [7, hex(1 << 40)]
    assert values.return_type(1 << 40) == "pointer" and values.return_type(None) == "null"
    assert values.return_value('{"a": 1}') == {"a": 1}


class FakePython:
    """An agent handle of a CPython process as CPythonRuntime drives it: py_setup answers `state`; commands are
    kept, and answered through the session's reply path (tracer_state(...).resolve) when `answer` is set."""

    def __init__(self, state: str, error: str | None = None, answer: dict[str, object] | None = None) -> None:
        self.pid, self.modules, self.runtime_state = 4242, [], None
        self.state, self.error, self.answer = state, error, answer
        self.bootstraps: list[str] = []
        self.commands: list[dict[str, object]] = []

    def py_setup(self, bootstrap: str) -> PySetupDone:
        self.bootstraps.append(bootstrap)
        return PySetupDone.model_validate({"type": "py_setup_done", "requestId": 1, "state": self.state,
                                           "error": self.error})

    def py_command(self, command: str) -> None:
        self.commands.append(json.loads(command))
        if self.answer is not None:
            reply = {"v": 1, "pid": self.pid, "reply": self.commands[-1]["id"], **self.answer}
            tracer_state(cast(Any, self)).resolve(json.dumps(reply).encode())


async def run_now(fn: Any) -> Any:
    return fn()


def python_function(qualname: str, line: int) -> TraceableFunction:
    info = FunctionInfo(f"app.{qualname}", qualname, f"app.{qualname}", line, 0, "/p/app.py", line, False, 1)
    return TraceableFunction(info, "/p/app.py", line, "cpython")


@pytest.mark.anyio
async def test_cpython_targets_go_in_the_install_config_then_by_command() -> None:
    runtime, handle = RUNTIMES[RuntimeKind.CPYTHON], FakePython("waiting")
    run: Any = run_now
    assert await runtime.apply_hooks(run, handle, [(3, python_function("serve", 10))], [], OPTIONS) == {}
    assert handle.commands == [] and handle.bootstraps == []  # not set up yet: kept for the install config
    assert await runtime.prepare(run, handle, 2) == []
    (bootstrap,) = handle.bootstraps
    assert '"qualname":"serve"' in bootstrap and '"depth":2' in bootstrap
    assert "@SINK@" in bootstrap and "@CONTROL_FD@" in bootstrap
    assert await runtime.apply_hooks(run, handle, [(4, python_function("stop", 20))], [3], OPTIONS) == {}
    assert [c["cmd"] for c in handle.commands] == ["targets"]  # waiting: queued by the agent, nobody waits
    assert handle.commands[0]["targets"] == [{"id": 4, "file": "/p/app.py", "line": 20, "qualname": "stop"}]


@pytest.mark.anyio
async def test_cpython_installed_tracer_confirms_or_refuses_targets() -> None:
    runtime, run = RUNTIMES[RuntimeKind.CPYTHON], cast(Any, run_now)
    handle = FakePython("installed", answer={"targets": 1, "ok": True})
    await runtime.prepare(run, handle, 3)
    assert await runtime.apply_hooks(run, handle, [(1, python_function("serve", 10))], [], OPTIONS) == {}
    refusing = FakePython("installed", answer={"error": "sys.monitoring: every tool id is in use"})
    await runtime.prepare(run, refusing, 3)
    failed = await runtime.apply_hooks(run, refusing, [(1, python_function("serve", 10))], [], OPTIONS)
    assert failed == {1: "sys.monitoring: every tool id is in use"}


@pytest.mark.anyio
async def test_cpython_that_cannot_be_traced_says_why() -> None:
    runtime, run = RUNTIMES[RuntimeKind.CPYTHON], cast(Any, run_now)
    handle = FakePython("unsupported", error="this process exports no CPython C API (PyGILState_Ensure)")
    (warning,) = await runtime.prepare(run, handle, 3)
    assert "Python functions cannot be traced in pid 4242: this process exports no CPython C API" in warning
    assert "native functions (with debug info) are still traced" in warning
    failed = await runtime.apply_hooks(run, handle, [(1, python_function("serve", 10))], [], OPTIONS)
    assert failed == {1: "Python functions cannot be traced here: this process exports no CPython C API "
                         "(PyGILState_Ensure)"}
