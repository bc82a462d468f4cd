"""The Node runtime's host parts without a process: which functions a pattern selects, how event files are read,
how values are typed."""

from __future__ import annotations

import threading
from pathlib import Path

from strobe.daemon.runtimes.node import JsScripts, js_type
from strobe.daemon.runtimes.node_events import NodeEvents
from strobe.symbols.js_index import index_source
from strobe.symbols.js_project import JsIndex
from strobe.symbols.patterns import parse_js_pattern

AUTH = """
function check(user) { return user.startsWith("a"); }
class Session { open(user) { return check(user); } }
module.exports = { check, Session };
"""


def test_a_pattern_matches_a_name_or_its_module_qualified_name(tmp_path: Path) -> None:
    path = tmp_path / "auth.js"
    path.write_text(AUTH)
    scripts = JsScripts(JsIndex(tuple(index_source(AUTH, str(path)))))

    def selected(text: str) -> list[str]:
        return selected_in(scripts, text, tmp_path)

    assert selected("check") == ["auth.check"]
    assert selected("auth.check") == ["auth.check"]
    assert selected("Session.*") == ["auth.Session.open"]
    assert selected("auth.**") == ["auth.check", "auth.Session.open"]
    assert selected("@usercode") == ["auth.check", "auth.Session.open"]
    assert selected("other.check") == []


def test_a_package_is_indexed_when_a_pattern_names_it(tmp_path: Path) -> None:
    (tmp_path / "auth.js").write_text(AUTH)
    package = tmp_path / "node_modules" / "left-pad"
    package.mkdir(parents=True)
    (package / "package.json").write_text("{}")
    (package / "index.js").write_text("function leftPad(s, n) { return s.padStart(n); }\nmodule.exports = leftPad;\n")
    scripts = JsScripts(JsIndex(tuple(index_source(AUTH, str(tmp_path / "auth.js")))), tmp_path)

    def selected(text: str) -> list[str]:
        return selected_in(scripts, text, tmp_path)

    assert selected("**.leftPad") == [] and len(scripts) == 2  # a glob does not walk node_modules
    assert selected("left-pad.leftPad") == ["left-pad.leftPad"]
    assert len(scripts) == 3 and scripts.packages["left-pad"] is not None
    assert selected("**.leftPad") == ["left-pad.leftPad"]  # indexed now: positions count past the project's
    assert selected("@usercode") == ["auth.check", "auth.Session.open"]  # never a package's files
    assert selected("check") == ["auth.check"]
    assert selected("nothere.f") == [] and scripts.packages["nothere"] is None
    other = JsScripts(JsIndex(()), tmp_path)
    assert selected_in(other, "@file:node_modules/left-pad/index.js", tmp_path) == ["left-pad.leftPad"]
    scoped = tmp_path / "node_modules" / "@acme" / "util"
    scoped.mkdir(parents=True)
    (scoped / "package.json").write_text("{}")
    (scoped / "main.js").write_text("exports.trim = (s) => s.trim();\n")
    assert selected_in(other, "@file:node_modules/@acme/util/", tmp_path) == ["@acme/util.trim"]


def selected_in(scripts: JsScripts, text: str, root: Path) -> list[str]:
    return [f.name for f in scripts.functions_at(scripts.positions(parse_js_pattern(text, str(root))))]


def test_event_files_are_delivered_a_whole_line_at_a_time(tmp_path: Path) -> None:
    got: list[tuple[int, bytes]] = []
    delivered = threading.Event()

    def deliver(pid: int, line: bytes) -> None:
        got.append((pid, line))
        delivered.set()

    events = NodeEvents()
    events.watch(tmp_path, deliver)
    try:
        (tmp_path / "events-42.jsonl").write_bytes(b'{"v":1,"n":1}\n{"v":1,"n"')
        assert delivered.wait(5)
        events.drain(tmp_path)
        assert got == [(42, b'{"v":1,"n":1}')]  # the half-written line waits for its end
        with open(tmp_path / "events-42.jsonl", "ab") as out:
            out.write(b':2}\n')
        events.drain(tmp_path)
        assert got[-1] == (42, b'{"v":1,"n":2}')
        (tmp_path / "other.txt").write_text("ignored\n")
    finally:
        events.forget(tmp_path)
    assert len(got) == 2


def test_javascript_types_of_rendered_values() -> None:
    assert [js_type(v) for v in (None, True, 3, 2.5, "x", [1], {"a": 1}, {"__type__": "Cart"})] == [
        "null", "boolean", "number", "number", "string", "Array", "Object", "Cart"]
