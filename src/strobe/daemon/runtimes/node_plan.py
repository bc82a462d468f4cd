"""A Node session's plan as the daemon keeps it and exchanges it with the preload through the session's directory
(instrument/nodetracer/): `plan.json` (which functions are wrapped and recorded, which files are replaced by which
rewrite), the rewrites themselves under `src/`, and the `edits-<pid>-<thread>.json` answers to a live edit (the
preload's live.cjs); then which added functions V8 left with their old code (symbols/js_liveedit.py), from the texts
each file ran. One plan per session directory, shared by every process of the session (`plan_for`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from strobe.daemon.runtimes.base import AgentHandle
from strobe.instrument import nodetracer
from strobe.paths import private_dir, private_opener
from strobe.symbols.js_index import JsFunction
from strobe.symbols.js_liveedit import unmapped
from strobe.symbols.js_transform import WrapResult, wrap_functions

PLAN_VERSION = 1
MAX_EARLIER = 32  # rewritten texts of a file remembered (a module loaded under an earlier plan runs one of them)
_EDITS_FILE = re.compile(r"^edits-(\d+)-(\d+)\.json$")


@dataclass
class NodePlan:
    """What one session's Node processes wrap and record (written to <dir>/plan.json)."""

    directory: Path
    targets: dict[int, JsFunction] = field(default_factory=dict)  # slot -> function
    depth: int = 3
    running: set[int] = field(default_factory=set)  # pids that run: their loaded modules need a live edit
    live: int = 0  # raised when functions are added while processes run (the preload's live edits)
    texts: dict[str, FileTexts] = field(default_factory=dict)  # file -> its text and the rewrites written of it
    lock: threading.Lock = field(default_factory=threading.Lock)

    def write(self) -> list[str]:
        """Rewrite the files that define a target and write the plan; returns warnings (functions skipped)."""
        with self.lock:
            warnings: list[str] = []
            by_file: dict[str, list[tuple[int, JsFunction]]] = {}
            for slot, function in self.targets.items():
                by_file.setdefault(function.file, []).append((slot, function))
            files: dict[str, dict[str, str | list[str]]] = {}
            sources = private_dir(self.directory / "src")
            for number, (path, targets) in enumerate(sorted(by_file.items())):
                try:
                    text = _source_text(path)
                except OSError as exc:
                    warnings.append(f"{path}: cannot be read ({exc.strerror}); its functions are not traced")
                    continue
                result = wrap_functions(text, targets)
                warnings += [f"{skipped.function.module}.{skipped.function.name}: {skipped.reason}"
                             for skipped in result.skipped]
                rewritten = sources / f"{number}-{Path(path).name}"
                _write_private(rewritten, result.source)
                digest = hashlib.sha1(text.encode()).hexdigest()
                known = self.texts.get(path)
                if known is None or known.sha1 != digest:
                    known = self.texts[path] = FileTexts(digest, text)
                files[path] = {"sha1": digest, "transformed": str(rewritten), "earlier": list(known.rewrites)}
                known.add(result)
            names = {str(slot): list(f.params) if f.params is not None else None for slot, f in self.targets.items()}
            plan = {"v": PLAN_VERSION, "depth": self.depth, "on": sorted(self.targets), "names": names, "files": files,
                    "live": self.live}
            temporary = self.directory / f"plan.json.{os.getpid()}.tmp"
            _write_private(temporary, json.dumps(plan))
            os.replace(temporary, self.directory / "plan.json")
            return warnings

    def misses(self, file: str, ran: str | None, functions: list[JsFunction]) -> dict[JsFunction, str]:
        """The `functions` (added to `file`'s rewrite) that V8 left with their old code in a script that ran the
        text with sha1 `ran` (None: it already ran the current rewrite), each with why."""
        with self.lock:  # write() adds rewrites meanwhile
            known = self.texts.get(file)
            if known is None or ran is None:
                return {}
            if ran not in known.rewrites and ran != known.sha1:
                return dict.fromkeys(functions, "the text it ran is no longer known")
            current = known.rewrites[next(reversed(known.rewrites))]
            old = known.rewrites.get(ran)
        return unmapped(known.text, old, current, functions)

    def edits(self, pid: int, live: int) -> tuple[dict[str, str | None], dict[str, str]] | None:
        """What process `pid` answered to the plan's `live` number, merged over its threads: per loaded file, None
        (it runs the rewritten code now) or why not, and the sha1 of the text each replaced script ran; None until
        its main thread has answered."""
        answers: dict[int, dict[str, Any]] = {}
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return None
        for name in names:
            found = _EDITS_FILE.match(name)
            if found is None or int(found.group(1)) != pid:
                continue
            try:
                answer = json.loads((self.directory / name).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(answer, dict) and isinstance(answer.get("live"), int) and answer["live"] >= live \
                    and isinstance(answer.get("files"), dict):
                answers[int(found.group(2))] = answer
        if 0 not in answers:
            return None
        files: dict[str, str | None] = {}
        ran: dict[str, str] = {}
        for thread in sorted(answers):
            for file, why in answers[thread]["files"].items():
                if isinstance(file, str) and (why is None or isinstance(why, str)) and files.get(file) is None:
                    files[file] = why
            came = answers[thread].get("from")
            for file, digest in (came.items() if isinstance(came, dict) else ()):
                if isinstance(file, str) and isinstance(digest, str):
                    ran.setdefault(file, digest)
        return files, ran


@dataclass
class FileTexts:
    """A traced file's text as indexed and the rewrites written of it since (newest last, at most MAX_EARLIER):
    a module loaded under an earlier plan runs one of them."""

    sha1: str
    text: str
    rewrites: dict[str, WrapResult] = field(default_factory=dict)  # sha1 of the rewritten text -> how it was made

    def add(self, result: WrapResult) -> None:
        digest = hashlib.sha1(result.source.encode()).hexdigest()
        self.rewrites.pop(digest, None)
        self.rewrites[digest] = result
        while len(self.rewrites) > MAX_EARLIER:
            del self.rewrites[next(iter(self.rewrites))]


def _source_text(path: str) -> str:
    """A module's text as Node compiles it: UTF-8, without a byte order mark."""
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    return text[1:] if text.startswith("\ufeff") else text


def _write_private(path: Path, text: str) -> None:
    fd = private_opener(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)


def session_dir(pid: int) -> Path | None:
    """The tracer directory a Node process was started with (its environment's STROBE_NODE_DIR)."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    prefix = f"{nodetracer.DIR_VARIABLE}=".encode()
    for entry in environ:
        if entry.startswith(prefix):
            return Path(os.fsdecode(entry[len(prefix):]))
    return None


_PLANS: dict[Path, NodePlan] = {}
_PLANS_LOCK = threading.Lock()


def plan_for(handle: AgentHandle) -> NodePlan | None:
    """The plan of the session a Node process belongs to (kept on its handle)."""
    plan = getattr(handle, "runtime_state", None)
    if isinstance(plan, NodePlan):
        return plan
    directory = session_dir(handle.pid)
    if directory is None:
        return None
    with _PLANS_LOCK:
        plan = _PLANS.setdefault(directory, NodePlan(directory))
    handle.runtime_state = plan
    return plan


def forget_plan(directory: Path) -> None:
    """The session of `directory` has ended: its plan goes."""
    with _PLANS_LOCK:
        _PLANS.pop(directory, None)
