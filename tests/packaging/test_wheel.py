"""Strobe ships as a wheel whose package data is the compiled agent.

The wheel is built the way a release is: an sdist of the repository (MANIFEST.in carries agent/), then a wheel
from the unpacked sdist, whose setup.py compiles the agent into strobe/_agent/agent.js. It is installed, not
editable, into a fresh virtualenv, offline from the wheelhouse scripts/bootstrap.sh fills, and that install's
`strobe mcp` traces a C program for a real MCP client. The daemon cannot have compiled the agent: the installed
package holds no TypeScript, the unpacked sdist is deleted before the install, and the agent cache stays empty.
Nothing here touches the real home: pip and the daemon get a temporary HOME, pip a temporary cache.
"""

from __future__ import annotations

import email.parser
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.conftest import Control, StrobeClient, poll

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

REPO = Path(__file__).resolve().parents[2]
WHEELHOUSE = REPO / ".venv" / "wheelhouse"  # filled by scripts/bootstrap.sh
PACKAGED_AGENT = "strobe/_agent/agent.js"


@dataclass(frozen=True)
class Installed:
    venv: Path
    wheel: Path
    wheel_names: list[str]
    strobe_file: Path  # strobe/__init__.py as the fresh venv's python imports it
    site_packages: Path
    scratch: Path  # a private HOME and working directory for the processes under test


def quiet_env(scratch: Path) -> dict[str, str]:
    """The environment for pip and the builds: no user configuration, no real home, no index, no PYTHONPATH."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PIP_", "PYTHON")) and key not in {"VIRTUAL_ENV", "HOME"}
    }
    return {
        **env,
        "HOME": str(scratch),
        "XDG_CACHE_HOME": str(scratch / ".cache"),
        "XDG_CONFIG_HOME": str(scratch / ".config"),
        "PIP_CACHE_DIR": str(scratch / "pip-cache"),
        "PIP_CONFIG_FILE": os.devnull,
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_INPUT": "1",
    }


def run(argv: list[str | Path], env: dict[str, str], cwd: Path, hint: str = "") -> str:
    done = subprocess.run([str(a) for a in argv], env=env, cwd=cwd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"{argv} failed ({done.returncode}){hint}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """Build the sdist and the wheel, install the wheel with its dependencies into a fresh virtualenv."""
    if not (WHEELHOUSE / ".stamp").is_file():
        pytest.fail(f"no wheelhouse at {WHEELHOUSE}: run scripts/bootstrap.sh (make setup) first")
    work = tmp_path_factory.mktemp("wheel")
    scratch = work / "home"
    scratch.mkdir()
    env = quiet_env(scratch)

    # The sdist, from the repository as it is (including uncommitted changes); it must carry the agent's sources.
    build_sdist = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    sdist = work / "sdist" / run([sys.executable, "-c", build_sdist, work / "sdist"], env, REPO).split()[-1]
    unpacked = work / "unpacked"
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
        archive.extractall(unpacked, filter="data")
    assert any(n.endswith("/agent/src/index.ts") for n in names) and any(n.endswith("/setup.py") for n in names)
    assert not any("_agent/agent.js" in n for n in names), "the compiled agent must not be in the sdist"
    (source,) = unpacked.iterdir()

    # The wheel, from the sdist, with .venv as the build environment (bootstrap installs the build requirements).
    wheels = work / "wheels"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", wheels, source], env, work)
    (wheel,) = wheels.glob("strobe-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        wheel_names = archive.namelist()
        agent_js = archive.read(PACKAGED_AGENT).decode()
    assert "PROTOCOL_VERSION" in agent_js and len(agent_js) > 10_000, "the packaged agent is not the compiled agent"
    assert not [n for n in wheel_names if n.endswith(".ts")], "no TypeScript belongs in the wheel"
    assert "strobe/instrument/nodetracer/preload.cjs" in wheel_names, "the Node preload belongs in the wheel"
    assert "strobe/export/timeline.html" in wheel_names, "debug_export's HTML page belongs in the wheel"
    shutil.rmtree(unpacked)  # from here on no agent sources exist anywhere an installed strobe could look

    # A fresh virtualenv, the wheel installed normally, its dependencies from the wheelhouse only.
    venv = work / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv], env, work)
    python = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", python]
    stale = "; if a dependency is missing, the wheelhouse is stale: run scripts/bootstrap.sh (make setup)"
    run([*pip, "install", "-q", "--find-links", WHEELHOUSE, wheel], env, work, stale)
    strobe_file = Path(run([python, "-c", "import strobe; print(strobe.__file__)"], env, scratch).strip())
    yield Installed(venv, wheel, wheel_names, strobe_file, strobe_file.parent.parent, scratch)
    shutil.rmtree(work, ignore_errors=True)  # a venv with frida and numpy is too big to leave in pytest's tmp


def test_uv_tool_install_of_the_wheel_gives_a_working_strobe_command(installed: Installed) -> None:
    """`uv tool install strobe-*.whl`, the way a user installs a command-line tool: its own environment, the
    `strobe` command on the tool bin directory, the version the package declares."""
    env = quiet_env(installed.scratch)
    tools, bin_dir = installed.scratch / "uv-tools", installed.scratch / "uv-bin"
    env.update({"UV_TOOL_DIR": str(tools), "UV_TOOL_BIN_DIR": str(bin_dir), "UV_CACHE_DIR": str(tools / "cache"),
                "UV_NO_CONFIG": "1", "UV_PYTHON_DOWNLOADS": "never"})
    uv = Path(sys.executable).parent / "uv"
    run([uv, "tool", "install", "--offline", "--no-index", "--find-links", WHEELHOUSE, "--python", sys.executable,
         installed.wheel], env, installed.scratch, "; if a dependency is missing, run scripts/bootstrap.sh")
    strobe = bin_dir / "strobe"
    assert strobe.is_file(), sorted(p.name for p in bin_dir.iterdir()) if bin_dir.is_dir() else "no bin dir"
    version = run([strobe, "--version"], env, installed.scratch).strip()
    (metadata,) = installed.site_packages.glob("strobe-*.dist-info/METADATA")
    declared = email.parser.HeaderParser().parsestr(metadata.read_text())["Version"]
    assert version == f"strobe {declared}", version
    # The tool's own environment holds the compiled agent, apart from the repository and the test venv.
    (agent,) = tools.glob("strobe/lib/python*/site-packages/strobe/_agent/agent.js")
    assert "PROTOCOL_VERSION" in agent.read_text()
    run([uv, "tool", "uninstall", "strobe"], env, installed.scratch)
    assert not strobe.exists()


@asynccontextmanager
async def connect_installed(installed: Installed, home: Path) -> AsyncIterator[StrobeClient]:
    """An MCP session with the fresh venv's `strobe mcp`, started away from the repository."""
    params = StdioServerParameters(
        command=str(installed.venv / "bin" / "strobe"),
        args=["mcp"],
        env={"STROBE_HOME": str(home), "HOME": str(installed.scratch)},
        cwd=installed.scratch,
    )
    async with AsyncExitStack() as stack:
        read, write = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        yield StrobeClient(session)


def test_wheel_is_a_regular_install_with_the_compiled_agent(installed: Installed) -> None:
    assert PACKAGED_AGENT in installed.wheel_names
    # The fresh venv's python imports strobe from its own site-packages, not from the repository's src/.
    assert installed.strobe_file == installed.venv.joinpath(
        "lib", f"python{sys.version_info.major}.{sys.version_info.minor}", "site-packages", "strobe", "__init__.py"
    ), installed.strobe_file
    package = installed.site_packages / "strobe"
    assert (package / "_agent" / "agent.js").is_file()
    assert not list(package.rglob("*.ts")) and not (package / "_agent" / "src").exists()
    # Not editable: no .pth or direct_url pointing back at the source tree.
    for pth in installed.site_packages.glob("*.pth"):
        assert str(REPO) not in pth.read_text(), f"{pth.name} points at the repository"
    (dist_info,) = installed.site_packages.glob("strobe-*.dist-info")
    direct_url = dist_info / "direct_url.json"
    if direct_url.exists():
        assert not json.loads(direct_url.read_text()).get("dir_info", {}).get("editable"), direct_url.read_text()


async def test_installed_wheel_traces_a_c_program_over_mcp(
    installed: Installed, strobe_home: Path, c_target: Callable[[str], Path], project: Path, control: Control
) -> None:
    binary = c_target("traced")
    try:
        async with connect_installed(installed, strobe_home) as client:
            sid = (
                await client.call(
                    "debug_launch", command=str(binary), args=[str(control.directory)], projectRoot=str(project)
                )
            )["sessionId"]

            async def ready() -> bool | None:
                page = await client.call("debug_query", sessionId=sid, eventType="stdout")
                return True if any(e["text"] == "ready\n" for e in page["events"]) else None

            await poll(ready, 30, "the target to be ready")
            traced = await client.call("debug_trace", sessionId=sid, add=["add", "multiply"])
            assert traced["hookedFunctions"] == 2, traced
            await control.round(client, sid)

            events = await client.all_events(sid, eventType="function_enter")
            assert Counter(e["function"] for e in events) == {"add": 15, "multiply": 1}
            exits = await client.all_events(sid, eventType="function_exit", verbose=True)
            assert [e["returnValue"] for e in exits if e["function"] == "multiply"] == [42]
            assert sum(e["function"] == "add" for e in exits) == 15

            # The daemon that served this is the fresh venv's, with the fresh venv's frida loaded.
            daemon = int((strobe_home / "strobe.pid").read_text())
            argv0 = Path(f"/proc/{daemon}/cmdline").read_bytes().split(b"\0")[0].decode()
            assert Path(argv0).parent == installed.venv / "bin", argv0
            maps = Path(f"/proc/{daemon}/maps").read_text()
            assert str(installed.site_packages / "frida") in maps and str(REPO) not in maps

            await client.call("debug_stop", sessionId=sid)
    finally:
        env = {"STROBE_HOME": str(strobe_home), "HOME": str(installed.scratch)}
        run([installed.venv / "bin" / "strobe", "shutdown"], env, installed.scratch)

    # The packaged agent was used as it is: nothing was compiled into the agent cache. (The strobe_home fixture
    # fails the test if any process started under this home is left behind.)
    compiled = sorted(path.name for path in (strobe_home / "cache").glob("agent*.js"))
    assert compiled == [], f"the daemon compiled an agent instead of using the packaged one: {compiled}"
