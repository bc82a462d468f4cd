"""Python tracing end to end over MCP: a real interpreter (3.11, 3.12, 3.13: whichever this machine has) runs a
small project; its functions are selected by dotted name, file and project, before launch and on the live
process, with arguments, return values, exceptions, generators and an uncaught exception's crash event."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from strobe.instrument.command import pyenv_target
from tests.conftest import Control, StrobeClient, poll
from tests.e2e.test_debug_test import finished
from tests.instrument.pytracer.runner import interpreters
from tests.testing.adapters.harness import copy_project

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

APP = Path(__file__).parent.parent / "targets" / "python_app"
PYTHONS = interpreters()


@pytest.fixture
def shop(project: Path) -> Path:
    shutil.copytree(APP, project, dirs_exist_ok=True)
    return project


async def launch(client: StrobeClient, python: str, shop: Path, control: Control) -> str:
    launched = await client.call("debug_launch", command=python, args=["app.py", str(control.directory)],
                                 projectRoot=str(shop), cwd=str(shop))
    sid: str = launched["sessionId"]

    async def ready() -> bool | None:
        page = await client.call("debug_query", sessionId=sid, eventType="stdout")
        return True if any(e["text"] == "ready\n" for e in page["events"]) else None

    await poll(ready, 30, "the Python target to be ready")
    return sid


async def traced(client: StrobeClient, sid: str, count: int) -> list[dict[str, Any]]:
    """The session's function events, at least `count` of them at once: a query first has the tracer flush what
    it buffered, so calls made before the output the test waited for are there without polling."""
    events = await client.all_events(sid, verbose=True)
    found = [e for e in events if e["eventType"] in ("function_enter", "function_exit")]
    assert len(found) >= count, found
    return found


@pytest.mark.parametrize("python", PYTHONS)
async def test_runtime_patterns_arguments_returns_exceptions(
    strobe: StrobeClient, python: str, shop: Path, control: Control
) -> None:
    sid = await launch(strobe, python, shop, control)
    added = await strobe.call("debug_trace", sessionId=sid, add=["shop.cart.Cart.*", "shop.cart.checkout"])
    assert added["warnings"] == [], added
    assert added["hookedFunctions"] == 3  # Cart.add, Cart.total, checkout (Cart's generated methods have no source)

    await control.round(strobe, sid)
    events = await traced(strobe, sid, 2 * (1 + 4 + 1))
    assert Counter((e["function"], e["eventType"]) for e in events) == {
        ("shop.cart.checkout", "function_enter"): 1, ("shop.cart.checkout", "function_exit"): 1,
        ("shop.cart.Cart.add", "function_enter"): 4, ("shop.cart.Cart.add", "function_exit"): 4,
        ("shop.cart.Cart.total", "function_enter"): 1, ("shop.cart.Cart.total", "function_exit"): 1,
    }
    checkout = next(e for e in events if e["function"] == "shop.cart.checkout" and e["eventType"] == "function_enter")
    assert checkout["argumentNames"] == ["owner", "names"]
    assert checkout["arguments"] == ["user1", ["apple", "pear", "fig", "kiwi"]]
    assert checkout["sourceFile"] == str(shop / "shop" / "cart.py") and checkout["functionRaw"] == "checkout"
    adds = [e for e in events if e["function"] == "shop.cart.Cart.add"]
    enters = [e for e in adds if e["eventType"] == "function_enter"]
    assert all(e["parentEventId"] == checkout["id"] for e in enters)
    assert enters[0]["argumentNames"] == ["self", "item"]
    assert enters[0]["arguments"][1] == {"__type__": "shop.cart.Item", "name": "apple", "price": 10}
    exits = [e for e in adds if e["eventType"] == "function_exit"]
    assert [e.get("returnValue") for e in exits[:3]] == [1, 2, 3] and exits[0]["returnType"] == "int"
    assert exits[3]["exception"] == {"type": "ValueError", "message": "cart of user1 is full", "line": 22}
    assert "returnValue" not in exits[3]
    total = next(e for e in events if e["function"] == "shop.cart.Cart.total" and e["eventType"] == "function_exit")
    assert total["returnValue"] == 72.0 and total["returnType"] == "float" and total["durationNs"] > 0

    # Changed on the live process: Cart.add no more; serializationDepth 1 from now on.
    changed = await strobe.call("debug_trace", sessionId=sid, remove=["shop.cart.Cart.*"],
                                add=["shop.cart.Cart.total"], serializationDepth=1)
    assert changed["hookedFunctions"] == 2
    await control.round(strobe, sid)
    events = await traced(strobe, sid, 12 + 4)
    assert Counter(e["function"] for e in events[12:]) == {"shop.cart.checkout": 2, "shop.cart.Cart.total": 2}
    total = next(e for e in events[12:] if e["function"] == "shop.cart.Cart.total")
    assert total["arguments"] == [{"__type__": "shop.cart.Cart", "owner": "user2", "items": "<list>"}]


@pytest.mark.parametrize("python", PYTHONS)
async def test_pending_patterns_and_uncaught_exception(
    strobe: StrobeClient, python: str, shop: Path, control: Control
) -> None:
    staged = await strobe.call("debug_trace", add=["shop.cart.prices", "@file:app.py"])
    assert staged["mode"] == "pending"
    sid = await launch(strobe, python, shop, control)
    events = await traced(strobe, sid, 1)  # serve() was entered before "ready": hooked before __main__ ran
    assert events[0]["function"] == "app.serve" and events[0]["argumentNames"] == ["control"]

    await control.round(strobe, sid)
    events = await traced(strobe, sid, 1 + 2 * 4)
    prices = [e for e in events if e["function"] == "shop.cart.prices"]
    assert [(e["eventType"], e.get("returnValue")) for e in prices] == [
        ("function_enter", None), ("function_exit", 10), ("function_enter", None), ("function_exit", 20),
        ("function_enter", None), ("function_exit", 30), ("function_enter", None), ("function_exit", None)]
    assert [e.get("yielded") for e in prices if e["eventType"] == "function_exit"] == [True, True, True, None]
    assert [e.get("resumed") for e in prices if e["eventType"] == "function_enter"] == [None, True, True, True]

    (control.directory / "crash").touch()
    await strobe.wait_for_status(sid, "exited", 30)
    crash = await strobe.call("debug_query", sessionId=sid, eventType="crash")
    assert crash["totalCount"] == 1, crash
    event = crash["events"][0]
    assert event["exceptionType"] == "RuntimeError" and event["exceptionMessage"] == "order 1 cannot ship (2 pending)"
    assert event["function"] == "explode" and event["sourceFile"] == str(shop / "shop" / "cart.py")
    assert event["locals"] == {"order_id": 1, "pending": [1, 2]}
    assert [f["function"] for f in event["backtrace"]] == ["explode", "serve", "<module>"]
    assert event["threadName"] == "MainThread"


async def served_from_the_first_line(strobe: StrobeClient, sid: str, control: Control) -> list[dict[str, Any]]:
    """One round of app.py, traced with the staged patterns app.serve and shop.cart.checkout: serve() was
    entered before the program printed anything, so they were hooked before its first line."""
    await control.round(strobe, sid)
    events = await traced(strobe, sid, 3)
    assert [(e["function"], e["eventType"]) for e in events[:3]] == [
        ("app.serve", "function_enter"), ("shop.cart.checkout", "function_enter"),
        ("shop.cart.checkout", "function_exit")]
    return events


def _pyenv_version(prefix: str) -> str | None:
    root = Path(os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv")))
    versions = sorted(p.name for p in (root / "versions").glob(f"{prefix}.*")) if (root / "shims").is_dir() else []
    return versions[-1] if versions else None


def _launch_forms() -> list[Any]:
    forms: list[Any] = [pytest.param("module", id="python -m app"), pytest.param("venv", id="a venv's python"),
                        pytest.param("shebang", id="#!/usr/bin/env python3 script")]
    reason = None if _pyenv_version("3.12") else "no pyenv with a 3.12 here"
    forms.append(pytest.param("pyenv", id="a pyenv shim", marks=[pytest.mark.skipif(reason is not None,
                                                                                     reason=reason or "")]))
    return forms


@pytest.mark.parametrize("form", _launch_forms())
async def test_launch_forms(strobe: StrobeClient, form: str, shop: Path, control: Control) -> None:
    """The ways a developer starts a Python program; each is traced from its first line (pending patterns)."""
    python = shutil.which("python3")
    assert python is not None
    control_dir = str(control.directory)
    if form == "module":
        command, args, expect = python, ["-m", "app", control_dir], None
    elif form == "venv":
        subprocess.run([os.path.realpath(python), "-m", "venv", "--without-pip", str(shop / ".venv")], check=True)
        command, args, expect = ".venv/bin/python", ["app.py", control_dir], str(shop / ".venv" / "bin" / "python")
    elif form == "shebang":
        script = shop / "run.py"
        script.write_text("#!/usr/bin/env python3\nimport sys\nfrom app import serve\nserve(sys.argv[1])\n")
        script.chmod(0o755)
        command, args, expect = str(script), [control_dir], str(script)
    else:
        version = _pyenv_version("3.12")
        (shop / ".python-version").write_text(f"{version}\n")
        command, args, expect = "python3", ["app.py", control_dir], None
        root = Path(os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv")))
        command = str(root / "shims" / "python3")
    await strobe.call("debug_trace", add=["app.serve", "shop.cart.checkout"])
    launched = await strobe.call("debug_launch", command=command, args=args, projectRoot=str(shop), cwd=str(shop))
    sid = launched["sessionId"]
    await served_from_the_first_line(strobe, sid, control)
    sessions = {s["sessionId"]: s for s in (await strobe.call("debug_list_sessions"))["sessions"]}
    if expect is not None:
        assert sessions[sid]["binaryPath"] == expect
    if form == "pyenv":
        assert f"/versions/{_pyenv_version('3.12')}/" in sessions[sid]["binaryPath"]
    await strobe.call("debug_stop", sessionId=sid)


@pytest.mark.parametrize("python", PYTHONS[:1] + PYTHONS[-1:])
async def test_reads_and_watches_of_python_globals(
    strobe: StrobeClient, python: str, shop: Path, control: Control
) -> None:
    sid = await launch(strobe, python, shop, control)
    await control.round(strobe, sid)
    read = await strobe.call("debug_read", sessionId=sid, targets=[
        {"variable": "shop.cart.settings"}, {"variable": "shop.cart.TAX_RATE"}, {"variable": "__main__.rounds_done"},
        {"variable": "shop.cart.nothing"}, {"variable": "nowhere.x"}])
    assert read["results"][:3] == [
        {"target": "shop.cart.settings", "type": "dict", "value": {"currency": "EUR", "limits": {"items": 3}}},
        {"target": "shop.cart.TAX_RATE", "type": "float", "value": 0.2},
        {"target": "__main__.rounds_done", "type": "int", "value": 1}]
    assert read["results"][3] == {"target": "shop.cart.nothing", "error": "`shop.cart` has no attribute `nothing`"}
    assert "no loaded module named `nowhere`" in read["results"][4]["error"]

    # Watches: read at each traced call, only in the functions they are scoped to.
    watches = [{"variable": "__main__.rounds_done", "on": ["shop.cart.checkout"]},
               {"variable": "shop.cart.TAX_RATE", "label": "tax"}]
    traced_reply = await strobe.call("debug_trace", sessionId=sid, add=["shop.cart.checkout", "shop.cart.Cart.total"],
                                     watches={"add": watches})
    assert traced_reply["warnings"] == [] and len(traced_reply["activeWatches"]) == 2
    await control.round(strobe, sid)
    events = await traced(strobe, sid, 4)
    checkout = [e for e in events if e["function"] == "shop.cart.checkout"]
    total = [e for e in events if e["function"] == "shop.cart.Cart.total"]
    assert [e["watchValues"] for e in checkout] == [{"__main__.rounds_done": 2, "tax": 0.2}] * 2
    assert [e["watchValues"] for e in total] == [{"tax": 0.2}] * 2

    # A poll samples into the timeline.
    started = await strobe.call("debug_read", sessionId=sid, targets=[{"variable": "__main__.rounds_done"}],
                                poll={"intervalMs": 50, "durationMs": 300})
    assert started["polling"] is True and started["expectedSamples"] == 6

    async def sampled() -> list[dict[str, Any]] | None:
        page = await strobe.call("debug_query", sessionId=sid, eventType="variable_snapshot")
        states = page.get("polls", [])
        return page["events"] if states and states[0]["state"] == "complete" else None

    snapshots = await poll(sampled, 30, "the Python poll to complete")
    assert [s["values"] for s in snapshots] == [{"__main__.rounds_done": 2}] * 6


def _project_venv(project: Path) -> Path:
    """A virtualenv in the project with pytest from PyPI, as a developer's project has: the interpreter debug_test
    must run its tests with."""
    python3 = shutil.which("python3")
    assert python3 is not None
    venv = project / ".venv"
    subprocess.run([os.path.realpath(python3), "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
                    "--disable-pip-version-check", "pytest"], check=True)
    return venv / "bin" / "python"


async def test_a_traced_pytest_run_with_the_projects_interpreter(strobe: StrobeClient, tmp_path: Path) -> None:
    project = copy_project("pytest_basic", tmp_path)
    python = _project_venv(project)
    started = await strobe.call("debug_test", projectRoot=str(project), tracePatterns=["calc.ops.*"])
    sid = started["sessionId"]
    status = await finished(strobe, started["testRunId"])
    assert status["status"] == "completed", status
    result = status["result"]
    assert {k: result["summary"][k] for k in ("passed", "failed", "skipped")} == {"passed": 5, "failed": 2,
                                                                                  "skipped": 2}
    negative = next(f for f in result["failures"] if "test_add_negative" in f["name"])
    assert negative["rerunCommand"].startswith(".venv/bin/python -m pytest ")
    assert negative["suggestedTraces"][0] == "calc.ops.*"
    # The traced run: the project's interpreter ran the tests, and calc.ops's calls are on the timeline.
    sessions = {s["sessionId"]: s for s in (await strobe.call("debug_list_sessions"))["sessions"]}
    assert sessions[sid]["binaryPath"] in (str(python), os.path.realpath(python))
    events = await strobe.all_events(sid, verbose=True, eventType="function_exit")
    adds = [e for e in events if e["function"] == "calc.ops.add"]
    assert {e["returnValue"] for e in adds} >= {4, -5}
    divides = [e for e in events if e["function"] == "calc.ops.divide" and "exception" in e]
    assert divides and divides[0]["exception"]["type"] == "ZeroDivisionError"


def _build_extension(python: str, project: Path) -> None:
    """fastmath.c as a C extension of `python`, with debug info, next to vector.py."""
    paths = json.loads(subprocess.run(
        [python, "-c", "import json, sysconfig; print(json.dumps([sysconfig.get_paths()['include'], "
                       "sysconfig.get_config_var('EXT_SUFFIX')]))"], check=True, capture_output=True, text=True).stdout)
    include, suffix = paths
    subprocess.run(["gcc", "-shared", "-fPIC", "-g", "-O0", f"-I{include}", str(project / "fastmath.c"), "-o",
                    str(project / f"fastmath{suffix}")], check=True)


@pytest.mark.parametrize("python", PYTHONS[:1] + PYTHONS[-1:])
async def test_python_and_c_extension_functions_in_one_timeline(
    strobe: StrobeClient, python: str, shop: Path, control: Control
) -> None:
    _build_extension(python, shop)
    launched = await strobe.call("debug_launch", command=python, args=["vector.py", str(control.directory)],
                                 projectRoot=str(shop), cwd=str(shop))
    sid = launched["sessionId"]
    await control.round(strobe, sid)  # fastmath is imported by now: a module loaded after launch
    added = await strobe.call("debug_trace", sessionId=sid, add=["vector.norm2", "fm_dot"])
    assert added["warnings"] == [] and added["hookedFunctions"] == 2, added
    await control.round(strobe, sid)
    events = await traced(strobe, sid, 4)
    assert [(e["function"], e["eventType"]) for e in events] == [
        ("vector.norm2", "function_enter"), ("fm_dot", "function_enter"), ("fm_dot", "function_exit"),
        ("vector.norm2", "function_exit")]
    assert events[0]["arguments"] == [[1.0, 2.0, 2.0]] and events[3]["returnValue"] == 9.0
    assert events[1]["arguments"][2] == 3 and events[1]["sourceFile"].endswith("fastmath.c")
    assert events[2]["returnValue"] == 9.0  # a double returned in xmm0


SDIST = "more-itertools==10.5.0"  # pure Python; its sdist carries its unittest suite (tests/)


async def test_a_real_project_from_pypi_traced_through_its_own_tests(strobe: StrobeClient, tmp_path: Path) -> None:
    """An sdist from PyPI, unpacked as a developer's checkout: its unittest suite runs under debug_test with one of
    its functions traced by dotted name."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "--quiet",
                    "--disable-pip-version-check", "--dest", str(tmp_path / "dist"), SDIST], check=True)
    (archive,) = (tmp_path / "dist").iterdir()
    shutil.unpack_archive(archive, tmp_path)
    (project,) = (p for p in tmp_path.iterdir() if p.name.startswith("more-itertools-"))
    started = await strobe.call("debug_test", projectRoot=str(project), test="tests.test_more.ChunkedTests",
                                tracePatterns=["more_itertools.more.chunked"])
    assert started["framework"] == "unittest"
    status = await finished(strobe, started["testRunId"])
    assert status["status"] == "completed", status
    summary = status["result"]["summary"]
    assert summary["failed"] == 0 and summary["passed"] >= 5, summary
    enters = await strobe.all_events(started["sessionId"], verbose=True, eventType="function_enter")
    chunked = [e for e in enters if e["function"] == "more_itertools.more.chunked"]
    assert chunked and all(e["argumentNames"] == ["iterable", "n", "strict"] for e in chunked)
    assert chunked[0]["sourceFile"] == str(project / "more_itertools" / "more.py")


def _real_python3() -> str:
    """python3 on PATH as the interpreter it runs (a pyenv shim resolved: following a shim's helpers takes
    seconds, which `uv run` would do when it finds a shim first on PATH)."""
    python3 = shutil.which("python3")
    assert python3 is not None
    return str(pyenv_target(Path(python3), Path.cwd()) or os.path.realpath(python3))


async def test_uv_run_is_followed_to_the_interpreter(strobe: StrobeClient, shop: Path, control: Control) -> None:
    """`uv run` starts the interpreter as its child: the session follows it there and traces it from its first
    line, like a direct launch."""
    uv = Path(sys.executable).parent / "uv"  # a dev dependency (pyproject.toml)
    await strobe.call("debug_trace", add=["app.serve", "shop.cart.checkout"])
    launched = await strobe.call("debug_launch", command=str(uv), args=["run", "--no-project", "app.py",
                                                                       str(control.directory)],
                                 projectRoot=str(shop), cwd=str(shop),
                                 env={"UV_CACHE_DIR": str(shop / ".uv"), "UV_PYTHON": _real_python3()})
    sid = launched["sessionId"]
    events = await served_from_the_first_line(strobe, sid, control)
    assert events[0]["pid"] != launched["pid"]  # uv's child
    await strobe.call("debug_stop", sessionId=sid)


async def test_usercode_is_the_projects_files_not_its_virtualenv(
    strobe: StrobeClient, shop: Path, control: Control
) -> None:
    """@usercode selects the functions of the project's own files: never a virtualenv's or installed packages'."""
    venv_lib = shop / ".venv" / "lib" / "python3.11" / "site-packages" / "vendored"
    venv_lib.mkdir(parents=True)
    (venv_lib / "__init__.py").write_text("def helper():\n    return 1\n")
    sid = await launch(strobe, PYTHONS[0].values[0], shop, control)
    added = await strobe.call("debug_trace", sessionId=sid, add=["@usercode"])
    # app.py: serve; shop/cart.py: Cart.add, Cart.total, prices, checkout, explode; vector.py: norm2, main
    assert added["hookedFunctions"] == 8 and added["warnings"] == [], added
    await control.round(strobe, sid)
    events = await traced(strobe, sid, 2)
    assert {e["function"] for e in events} == {"shop.cart.checkout", "shop.cart.Cart.add", "shop.cart.prices",
                                               "shop.cart.Cart.total"}
