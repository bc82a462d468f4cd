"""Session orchestration without Frida: the SessionManager and its collaborators driven through fake processes
(tests/daemon/fakes.py) and a real SQLite store. What a session records as its processes start, fork, exec,
crash and end, and what each process is given."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from tests.daemon.fakes import FakeImages, FakeLauncher, module, services

from strobe.daemon import crash_store, lifecycle
from strobe.daemon.sessions import SessionManager
from strobe.errors import ProcessExited
from strobe.instrument.command import ResolvedCommand
from strobe.store import sessions as store_sessions
from strobe.store.reader import Reader
from strobe.store.schema import EventKind
from strobe.store.sessions import SessionStatus

pytestmark = pytest.mark.anyio
T = TypeVar("T")
APP = "/proj/app"
TOOL = "/proj/tool"
COMMAND = ResolvedCommand([APP], APP, "/proj")


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[tuple[SessionManager, FakeLauncher, FakeImages]]:
    launcher = FakeLauncher()
    images = FakeImages({
        APP: [module(APP, ["app::run", "app::parse", "app::tiny"], unhookable=["app::tiny"])],
        TOOL: [module(TOOL, ["tool::main", "app::parse"])],
    })
    manager = SessionManager(services(tmp_path, launcher, images))
    await manager.start()
    yield manager, launcher, images
    await manager.close()


async def until(check: Callable[[], Awaitable[T | None]], what: str, timeout: float = 10.0) -> T:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = await check()
        if found:
            return found
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


async def processes(manager: SessionManager, session_id: str) -> dict[int, Any]:
    record = await manager.get_record(session_id)
    rows = (await manager.session_processes([record.key]))[record.key]
    return {row.pid: row for row in rows}


async def ended(manager: SessionManager, session_id: str) -> Any:
    async def check() -> Any:
        record = await manager.get_record(session_id)
        return record if not manager.is_running(session_id) and record.status is not SessionStatus.RUNNING else None

    return await until(check, f"session {session_id} to end")


async def test_launch_hook_exit_settle(world: Any, tmp_path: Path) -> None:
    manager, launcher, _ = world
    await manager.tracing.stage_patterns(["app::*"], [], "/proj")
    launched = await manager.launch(COMMAND, "/proj", {}, manager.settings.for_project("/proj"))
    handle = launcher.handles[launched.pid]
    assert launched.hooked == 2 and len(handle.hooked) == 2  # hooked before it was resumed
    assert launcher.resumed == [launched.pid]
    assert any("Could not hook app::tiny" in w for w in launched.warnings)
    launcher.end(launched.pid, code=3)
    record = await ended(manager, launched.session_id)
    assert (record.status, record.exit_code) == (SessionStatus.EXITED, 3)


async def test_trace_reaches_every_process_and_warns_once(world: Any) -> None:
    manager, launcher, _ = world
    launched = await manager.launch(COMMAND, "/proj", {}, manager.settings.for_project("/proj"))
    child = launcher.fork(launched.pid)
    await until(lambda: _resumed(launcher, child.pid), "the child to be resumed")
    state = await manager.tracing.trace(launched.session_id, ["app::*"], [], manager.settings.for_project("/proj"))
    assert state.hooked == 2 and state.matched == 3
    assert [w for w in state.warnings if "app::tiny" in w] == [
        "Could not hook app::tiny: unable to intercept function (too small to hook, or not code)."]
    assert launcher.handles[launched.pid].hooked == child.hooked and len(child.hooked) == 2
    await manager.stop(launched.session_id, retain=True)


async def test_a_child_adopted_then_crashing(world: Any) -> None:
    manager, launcher, _ = world
    await manager.tracing.stage_patterns(["app::run"], [], "/proj")
    launched = await manager.launch(COMMAND, "/proj", {}, manager.settings.for_project("/proj"))
    child = launcher.fork(launched.pid)
    await until(lambda: _resumed(launcher, child.pid), "the child to be resumed")
    assert len(child.hooked) == 1  # a fork runs its parent's image: the same hooks, before it runs
    launcher.crash(child.pid)
    await until(lambda: _acked(child), "the crash to be acknowledged")
    launcher.end(child.pid)
    rows = await until(lambda: _status(manager, launched.session_id, child.pid, SessionStatus.CRASHED),
                       "the child's row to say crashed")
    assert rows[child.pid].signal == "SIGSEGV" and rows[child.pid].parent_pid == launched.pid
    assert manager.is_running(launched.session_id)  # the launched process carries on
    launcher.end(launched.pid, code=0)
    record = await ended(manager, launched.session_id)
    assert record.status is SessionStatus.EXITED


async def test_stop_during_launch(world: Any) -> None:
    manager, launcher, images = world
    await manager.tracing.stage_patterns(["app::*"], [], "/proj")
    images.hold = asyncio.Event()  # the index is still loading: hooking waits
    launch = asyncio.ensure_future(manager.launch(COMMAND, "/proj", {}, manager.settings.for_project("/proj")))
    live = await until(lambda: _first_live(manager), "the session to be recorded")
    await manager.stop(live.record.id, retain=True)
    images.hold.set()
    with pytest.raises(ProcessExited):
        await launch
    record = await manager.get_record(live.record.id)
    assert record.status is SessionStatus.STOPPED
    assert live.pid not in launcher.resumed  # never ran a single instruction
    assert not manager.is_running(live.record.id)


async def test_exec_rebinds_the_launched_process(world: Any) -> None:
    manager, launcher, _ = world
    launched = await manager.launch(COMMAND, "/proj", {}, manager.settings.for_project("/proj"))
    await manager.tracing.trace(launched.session_id, ["app::parse"], [], manager.settings.for_project("/proj"))
    new = launcher.exec(launched.pid, TOOL)
    await until(lambda: _resumed(launcher, new.pid, times=2), "the new image to be resumed")
    assert len(new.hooked) == 1  # the patterns matched again in the new program: its own app::parse
    rows = await processes(manager, launched.session_id)
    assert rows[launched.pid].binary_path == TOOL and rows[launched.pid].status is SessionStatus.RUNNING
    state = await manager.tracing.trace(launched.session_id, ["tool::*"], [], manager.settings.for_project("/proj"))
    assert state.hooked == 2 and len(new.hooked) == 2
    launcher.end(launched.pid, code=0)
    assert (await ended(manager, launched.session_id)).status is SessionStatus.EXITED


async def test_daemon_shutdown_with_live_children(tmp_path: Path) -> None:
    launcher = FakeLauncher()
    images = FakeImages({APP: [module(APP, ["app::run"])]})
    manager = SessionManager(services(tmp_path, launcher, images))
    await manager.start()
    launched = await manager.launch(COMMAND, "/proj", {}, manager.settings.for_project("/proj"))
    children = [launcher.fork(launched.pid) for _ in range(2)]
    for child in children:
        await until(lambda child=child: _resumed(launcher, child.pid), "the children to be resumed")
    launcher.end(launched.pid, code=0)  # the launched process ends first; its children go on
    await until(lambda: _status(manager, launched.session_id, launched.pid, SessionStatus.EXITED),
                "the launched process's row")
    assert manager.is_running(launched.session_id)
    await manager.close()  # the children are killed; the session is kept, as each process ended
    assert sorted(launcher.killed) == sorted(child.pid for child in children)
    reader = Reader(manager.paths.database)  # the manager has closed its own
    try:
        record = await reader.run(lambda c: store_sessions.get_session(c, launched.session_id))
        rows = await reader.run(lambda c: store_sessions.session_processes(c, [record.key]))
    finally:
        reader.close()
    assert record is not None and record.retained
    statuses = {row.pid: row.status for row in rows[record.key]}
    assert statuses == {launched.pid: SessionStatus.EXITED,
                        **{child.pid: SessionStatus.STOPPED for child in children}}


async def _resumed(launcher: FakeLauncher, pid: int, times: int = 1) -> bool:
    return launcher.resumed.count(pid) >= times


async def _acked(handle: Any) -> bool:
    return bool(handle.crash_acks)


async def _first_live(manager: SessionManager) -> Any:
    found = manager.sessions.all()
    return found[0] if found else None


async def _status(manager: SessionManager, session_id: str, pid: int, status: SessionStatus) -> Any:
    rows = await processes(manager, session_id)
    return rows if pid in rows and rows[pid].status is status else None


async def test_maintenance_purges_old_sessions_with_their_files_and_keeps_running_ones(world: Any) -> None:
    manager, launcher, _ = world
    done = await manager.launch(COMMAND, "/proj", {}, manager.settings.for_project("/proj"))
    launcher.end(done.pid, code=0)
    await ended(manager, done.session_id)
    live = await manager.launch(COMMAND, "/proj", {}, manager.settings.for_project("/proj"))
    await manager.stop(done.session_id, retain=True)
    dump = manager.paths.reads_dir / done.session_id
    dump.mkdir(parents=True)
    (dump / "buffer.bin").write_bytes(b"x")
    manager.tests.runner.details_dir.mkdir(parents=True, exist_ok=True)
    (manager.tests.runner.details_dir / "run-1.log").write_text("output")
    manager.tests.runner.note_session("run-1", done.session_id)
    record = await manager.get_record(done.session_id)
    await manager.services.write(lambda c: c.execute("UPDATE sessions SET ended_at = 0 WHERE key = ?", (record.key,)))
    purged = await manager.maintain()
    assert [(p.id, p.why) for p in purged] == [(done.session_id, "older than 7 days")]
    assert [r.id for r in await manager.list_sessions()] == [live.session_id]
    assert not dump.exists() and not list(manager.tests.runner.details_dir.iterdir())
    launcher.end(live.pid, code=0)
    await ended(manager, live.session_id)


async def test_a_session_does_not_end_before_its_crash_event_is_stored(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Symbolizing a crash may outlast the crashing thread's bounded wait (the first index of a library's debug
    # file takes seconds): the process dies first, and the session must still end with its crash event stored.
    manager, launcher, _ = world
    entered, release = threading.Event(), threading.Event()
    describe = crash_store.describe_crash

    def slow_describe(*args: Any) -> Any:
        entered.set()
        release.wait(10)
        return describe(*args)

    monkeypatch.setattr(crash_store, "describe_crash", slow_describe)
    monkeypatch.setattr(lifecycle, "KERNEL_STATUS_TIMEOUT_S", 0.0)  # no exit status to wait for from the kernel
    launched = await manager.launch(COMMAND, "/proj", {}, manager.settings.for_project("/proj"))
    launcher.crash(launched.pid, "SIGABRT")
    await until(lambda: asyncio.to_thread(entered.wait, 0.05), "the crash to be symbolized")
    launcher.end(launched.pid)  # gone before the report was acknowledged
    for _ in range(20):  # the session settles as far as it may meanwhile
        await asyncio.sleep(0.01)
    assert manager.is_running(launched.session_id)
    release.set()
    record = await ended(manager, launched.session_id)
    assert record.status is SessionStatus.CRASHED
    crashes = await manager.services.read(
        lambda c: c.execute("SELECT COUNT(*) FROM events WHERE session = ? AND kind = ?",
                            (record.key, int(EventKind.CRASH))).fetchone()[0])
    assert crashes == 1
