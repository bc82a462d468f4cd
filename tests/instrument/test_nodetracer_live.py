"""Functions added while a node program runs (instrument/nodetracer/live.cjs): the plan's `live` number goes up and
the modules the program already loaded get their rewritten code through V8's live edit; each thread answers in
edits-<pid>-<thread>.json. Real node processes, hand-written plans and rewritten sources (test_nodetracer.py's
Project); waits poll files against a deadline."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.instrument.test_nodetracer import ENTER, RETURN, Project, args_of, project, sha1, wait_for

__all__ = ["project"]  # the fixture

WORK = """\
function first(i) {
  return i;
}
function second(i) {
  return -i;
}
module.exports = { tick(i) { return first(i) + second(i); } };
"""
WORK_FIRST = """\
function first(i) { return __strobe.c(1, this, arguments, () => {
  return i;
}); }
function second(i) {
  return -i;
}
module.exports = { tick(i) { return first(i) + second(i); } };
"""
WORK_BOTH = """\
function first(i) { return __strobe.c(1, this, arguments, () => {
  return i;
}); }
function second(i) { return __strobe.c(2, this, arguments, () => {
  return -i;
}); }
module.exports = { tick(i) { return first(i) + second(i); } };
"""
SCALE = """\
let factor = 10;
export function scale(i) {
  return i * factor;
}
export function grow() { factor += 1; }
"""
SCALE_REWRITTEN = """\
let factor = 10;
export function scale(i) { return __strobe.c(3, this, arguments, () => {
  return i * factor;
}); }
export function grow() { factor += 1; }
"""
LATER = """\
function later(x) {
  return x;
}
module.exports = { later };
"""
LATER_REWRITTEN = """\
function later(x) { return __strobe.c(4, this, arguments, () => {
  return x;
}); }
module.exports = { later };
"""
WAITING = """\
async function waiting() {
  await new Promise((resolve) => setTimeout(resolve, 60000).unref());
}
module.exports = { waiting };
"""
WAITING_REWRITTEN = """\
async function waiting() {return __strobe.a(5,this,arguments,async()=>{
  await new Promise((resolve) => setTimeout(resolve, 60000).unref());
})}
module.exports = { waiting };
"""
LOOP = """\
const fs = require('fs');
const path = require('path');
const { tick } = require('./work.js');
const { waiting } = require('./waiting.js');
waiting();
import('./scale.mjs').then(({ scale, grow }) => {
  let calls = 0;
  const timer = setInterval(() => {
    tick(calls);
    grow();
    scale(calls++);
    if (calls === 3) fs.writeFileSync(path.join(__dirname, 'ready'), '');
    if (fs.existsSync(process.argv[2])) { clearInterval(timer); console.log('calls', calls); }
  }, 2);
  setTimeout(() => { clearInterval(timer); console.log('deadline'); }, 25000).unref();
});
"""


def answer(project: Project, pid: int, live: int, thread: int = 0) -> dict[str, Any] | None:
    path = project.strobe / f"edits-{pid}-{thread}.json"
    try:
        found = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None
    return found if found["live"] >= live else None


def start_loop(project: Project, first_plan: str = WORK) -> subprocess.Popen[str]:
    """The loop running with work.js loaded (wrapping `first_plan`'s functions) and nothing else listed."""
    project.source("loop.js", LOOP)
    project.source("waiting.js", WAITING)
    project.source("scale.mjs", SCALE)
    if first_plan == WORK:
        project.source("work.js", WORK)
        project.plan(on=[])
    else:
        project.source("work.js", WORK, first_plan)
        project.plan(on=[1])
    proc = project.start("loop.js", str(project.root / "stop"))
    wait_for(lambda: (project.src / "ready").exists() or proc.poll() is not None, "the loop to run")
    assert proc.poll() is None, proc.communicate()
    return proc


def stop(project: Project, proc: subprocess.Popen[str]) -> str:
    (project.root / "stop").touch()
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0 and out.startswith("calls "), (out, err)
    return out


def test_modules_already_loaded_get_the_rewritten_code_and_keep_their_state(project: Project) -> None:
    proc = start_loop(project)
    try:
        project.source("work.js", WORK, WORK_BOTH)
        project.source("scale.mjs", SCALE, SCALE_REWRITTEN)
        project.source("later.js", LATER, LATER_REWRITTEN)
        project.plan(on=[1, 2, 3, 4], live=1)
        wait_for(lambda: answer(project, proc.pid, 1) is not None, "the program's answer")
        got = answer(project, proc.pid, 1)
        assert got is not None
        # later.js is not loaded: it is substituted when it loads, so it is not in the answer
        work, scale = str(project.src / "work.js"), str(project.src / "scale.mjs")
        assert got == {"live": 1, "thread": 0, "files": {work: None, scale: None},
                       "from": {work: sha1(WORK), scale: sha1(SCALE)}}  # the texts they ran
        wait_for(lambda: len([e for e in project.events() if e[:2] == [RETURN, 3]]) >= 3, "calls of scale()")
        stop(project, proc)
    finally:
        proc.kill()
        proc.wait()
    events = project.events()
    for fid in (1, 2, 3):
        entered = [args_of(e)[0][1] for e in events if e[:2] == [ENTER, fid]]
        assert len(entered) >= 3 and entered == list(range(entered[0], entered[0] + len(entered))), (fid, entered)
        assert entered[0] >= 3  # calls before the edit were not recorded: the module was loaded untraced
    # scale.mjs kept its module state: factor grew by one per tick before the edit and went on growing
    scaled = [(args_of(e)[0][1], r[6]["return"]) for e, r in zip(
        [e for e in events if e[:2] == [ENTER, 3]], [e for e in events if e[:2] == [RETURN, 3]], strict=False)]
    assert all(result == i * (11 + i) for i, result in scaled), scaled


def test_a_module_loaded_under_an_earlier_plan_is_edited_when_the_plan_says_so(project: Project) -> None:
    proc = start_loop(project, first_plan=WORK_FIRST)
    try:
        wait_for(lambda: any(e[:2] == [ENTER, 1] for e in project.events()), "calls of first()")
        work = str(project.src / "work.js")
        project.source("work.js", WORK, WORK_BOTH)
        project.plan(on=[1, 2], live=1)  # running WORK_FIRST, which this plan does not name: left alone
        wait_for(lambda: answer(project, proc.pid, 1) is not None, "the program's answer")
        refused = answer(project, proc.pid, 1)
        assert refused is not None and "not the text of the file as indexed" in refused["files"][work], refused
        project.files[work]["earlier"] = [sha1(WORK_FIRST)]
        project.plan(on=[1, 2], live=2)
        wait_for(lambda: answer(project, proc.pid, 2) is not None, "the program's second answer")
        assert answer(project, proc.pid, 2) == {"live": 2, "thread": 0, "files": {work: None},
                                                "from": {work: sha1(WORK_FIRST)}}
        wait_for(lambda: len([e for e in project.events() if e[:2] == [ENTER, 2]]) >= 3, "calls of second()")
        stop(project, proc)
    finally:
        proc.kill()
        proc.wait()


def test_a_waiting_function_or_a_changed_file_is_refused_with_why(project: Project) -> None:
    proc = start_loop(project)
    try:
        project.source("waiting.js", WAITING, WAITING_REWRITTEN)
        changed = WORK.replace("-i", "-2 * i")
        project.source("work.js", WORK, WORK_BOTH, indexed=changed)  # as if indexed after an edit on disk
        project.plan(on=[1, 2, 5], live=1)
        wait_for(lambda: answer(project, proc.pid, 1) is not None, "the program's answer")
        files = answer(project, proc.pid, 1)["files"]  # type: ignore[index]
        assert "waiting now (a suspended async function or generator)" in files[str(project.src / "waiting.js")]
        assert "not the text of the file as indexed" in files[str(project.src / "work.js")]
        stop(project, proc)
    finally:
        proc.kill()
        proc.wait()
    assert not [e for e in project.events() if e[1] in (1, 2, 5)]  # nothing recorded from what was refused


def test_a_thread_started_after_the_plan_answers_at_once_with_nothing_loaded(project: Project) -> None:
    project.source("work.js", WORK, WORK_BOTH)
    project.source("main.js", "const { tick } = require('./work.js');\nconsole.log('sum', tick(4));\n")
    project.plan(on=[1, 2], live=3)  # functions were added while earlier processes ran
    run = project.run("main.js")
    assert run.returncode == 0 and run.stdout == "sum 0\n", run.stderr
    pid = run.batches[0]["pid"]
    assert answer(project, pid, 3) == {"live": 3, "thread": 0, "files": {}, "from": {}}
    assert [e[1] for e in run.events if e[0] == ENTER] == [1, 2]  # loaded under the plan: substituted
    assert Path(project.strobe / f"edits-{pid}-0.json").stat().st_mode & 0o777 == 0o600
