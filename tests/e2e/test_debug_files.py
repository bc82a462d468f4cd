"""Stripped programs whose DWARF lives in a separate debug file, over MCP: found through the build-id directory of
a global debug directory (a temp one set by symbols.debugDirectories, never the real /usr/lib/debug), through
debug_launch's symbolsPath, and through .gnu_debuglink. Functions are found by pattern and traced with typed
arguments (gdb, finding the debug file the same way, is the oracle), a crash is symbolized with function and
file:line, and debug_read reads a global. Without a debug file, the launch says where it looked and what to do."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from strobe.symbols.elf import read_elf_info
from tests.conftest import Control, StrobeClient, poll, write_settings

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SOURCE = Path(__file__).parents[1] / "targets" / "debugfile.c"
CRASH_LINE = SOURCE.read_text().splitlines().index("    *target = value + g_level;") + 1


@dataclass(frozen=True)
class Split:
    binary: Path  # stripped
    debug: Path  # where its debug file was put
    global_dir: Path  # the global debug directory Strobe (and gdb) are told about
    symbols_path: str | None  # what debug_launch is given
    gdb_setup: tuple[str, ...]  # gdb options that make it find the debug file the same way


def _run(*command: str | Path) -> None:
    subprocess.run([str(part) for part in command], check=True, capture_output=True)


def split_build(root: Path, variant: str) -> Split:
    """debugfile.c built with -g, its DWARF moved into a separate file placed for `variant`, the binary stripped."""
    root.mkdir(parents=True, exist_ok=True)
    full, debug, binary = root / "full", root / "full.debug", root / "bin" / "debugfile"
    binary.parent.mkdir()
    global_dir = root / "global-debug"
    global_dir.mkdir()
    _run("gcc", "-g", "-O0", "-Wl,--build-id", "-o", full, SOURCE)
    _run("objcopy", "--only-keep-debug", full, debug)
    gdb_dir = ("-iex", f"set debug-file-directory {global_dir}")
    if variant == "build-id":
        _run("strip", "--strip-all", "-o", binary, full)
        build_id = read_elf_info(full).build_id
        assert build_id
        place = global_dir / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug"
        place.parent.mkdir(parents=True)
        shutil.move(debug, place)
        return Split(binary, place, global_dir, None, gdb_dir)
    if variant == "symbolsPath":
        _run("strip", "--strip-debug", "-o", binary, full)
        place = root / "elsewhere" / "my-symbols.dbg"
        place.parent.mkdir()
        shutil.move(debug, place)
        return Split(binary, place, global_dir, str(place), (*gdb_dir, "-ex", f"symbol-file {place}"))
    assert variant == "debuglink"
    _run("strip", "--strip-all", "-o", binary, full)
    place = binary.parent / "debugfile.debug"
    shutil.move(debug, place)
    _run("objcopy", f"--add-gnu-debuglink={place}", binary)
    return Split(binary, place, global_dir, None, gdb_dir)


def gdb_arguments(split: Split, control: Path) -> dict[str, str]:
    """gdb's `info args` at the first call of measure() in the stripped binary, the debug file found its way."""
    (control / "go").touch()
    (control / "end").touch()
    out = subprocess.run(
        ["gdb", "-batch", "-nx", *split.gdb_setup, "-ex", "break measure", "-ex", "run", "-ex", "info args",
         "-ex", "kill", "--args", str(split.binary), "wait", str(control)],
        capture_output=True, text=True, timeout=120, check=False).stdout
    found = dict(re.findall(r"^(\w+) = (.*)$", out, re.MULTILINE))
    assert found, f"gdb found no arguments:\n{out}"
    (control / "go").unlink()
    (control / "end").unlink()
    return found


async def launch(strobe: StrobeClient, split: Split, project: Path, control: Control, mode: str) -> str:
    extra = {"symbolsPath": split.symbols_path} if split.symbols_path else {}
    launched = await strobe.call("debug_launch", command=str(split.binary), args=[mode, str(control.directory)],
                                 projectRoot=str(project), **extra)
    sid = str(launched["sessionId"])

    async def ready() -> bool | None:
        page = await strobe.call("debug_query", sessionId=sid, eventType="stdout")
        return True if any(e["text"] == "ready\n" for e in page["events"]) else None

    await poll(ready, 30, "the target to be ready")
    return sid


@pytest.mark.parametrize("variant", ["build-id", "symbolsPath", "debuglink"])
async def test_a_stripped_program_is_traced_read_and_symbolized_through_its_debug_file(
    strobe: StrobeClient, strobe_home: Path, project: Path, control: Control, tmp_path: Path, variant: str
) -> None:
    split = split_build(tmp_path / "build", variant)
    assert not read_elf_info(split.binary).has_dwarf
    write_settings(strobe_home, {"symbols.debugDirectories": [str(split.global_dir)]})
    oracle = gdb_arguments(split, control.directory)
    assert list(oracle) == ["box", "scale", "label"]

    sid = await launch(strobe, split, project, control, "crash")
    traced = await strobe.call("debug_trace", sessionId=sid, add=["meas*"])  # found by pattern
    assert traced["hookedFunctions"] == 1, traced
    got = (await strobe.call("debug_read", sessionId=sid, targets=[{"variable": "g_level"}]))["results"][0]
    assert got["value"] == 7, got
    (control.directory / "go").touch()

    async def typed() -> list[dict[str, Any]] | None:
        events = await strobe.all_events(sid, verbose=True, eventType="function_enter",
                                         function={"equals": "measure"})
        return events if len(events) == 3 and all("argumentNames" in e for e in events) else None

    enters = await poll(typed, 30, "three typed calls of measure")
    first = enters[0]
    assert first["argumentNames"] == list(oracle)
    assert first["arguments"][1] == int(oracle["scale"]) == 10
    assert [e["arguments"][1] for e in enters] == [10, 20, 30]
    label = re.fullmatch(r'0x[0-9a-f]+ "(.*)"', oracle["label"])
    assert label is not None and label.group(1) in str(first["arguments"][2])
    assert first["argumentTypes"][1] == "int"

    await strobe.wait_for_status(sid, "crashed", timeout=30)
    crash = (await strobe.all_events(sid, eventType="crash"))[0]
    assert crash["function"] == "crash_here"
    assert crash["sourceFile"] == str(SOURCE) and crash["line"] == CRASH_LINE
    assert [f.get("function") for f in crash["backtrace"][:2]] == ["crash_here", "main"]


async def test_without_a_debug_file_the_launch_says_where_it_looked_and_what_to_do(
    strobe: StrobeClient, strobe_home: Path, project: Path, control: Control, tmp_path: Path
) -> None:
    split = split_build(tmp_path / "build", "build-id")
    split.debug.unlink()
    write_settings(strobe_home, {"symbols.debugDirectories": [str(split.global_dir)]})
    await strobe.call("debug_trace", add=["measure"])  # staged for the launch
    launched = await strobe.call("debug_launch", command=str(split.binary), args=["wait", str(control.directory)],
                                 projectRoot=str(project))
    hint = next((w for w in launched.get("warnings", []) if "separate debug file" in w), None)
    assert hint is not None, launched
    assert str(split.global_dir / ".build-id") in hint  # the places searched
    assert "-dbgsym" in hint and "symbolsPath" in hint  # and how to fix it
    error = await strobe.error("debug_trace", sessionId=launched["sessionId"], add=["measure"])  # the running program
    assert error.code == "NO_DEBUG_SYMBOLS" and str(split.global_dir / ".build-id") in error.message
    assert "symbolsPath" in error.message
    (control.directory / "go").touch()
    (control.directory / "end").touch()
    await strobe.wait_for_status(launched["sessionId"], "exited", timeout=30)


async def test_a_bad_symbols_path_is_refused_before_the_launch(
    strobe: StrobeClient, strobe_home: Path, project: Path, control: Control, tmp_path: Path
) -> None:
    split = split_build(tmp_path / "build", "symbolsPath")
    write_settings(strobe_home, {"symbols.debugDirectories": [str(split.global_dir)]})
    error = await strobe.error("debug_launch", command=str(split.binary), args=["wait", str(control.directory)],
                               projectRoot=str(project), symbolsPath=str(tmp_path / "missing.debug"))
    assert error.code == "VALIDATION_ERROR" and "does not exist" in error.message
    error = await strobe.error("debug_launch", command=str(split.binary), args=["wait", str(control.directory)],
                               projectRoot=str(project), symbolsPath=str(split.binary))
    assert error.code == "VALIDATION_ERROR" and "no .debug_info" in error.message
    assert (await strobe.call("debug_list_sessions"))["sessions"] == []
