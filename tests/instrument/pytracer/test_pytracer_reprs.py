"""Rules of reprs.py and outbox.py's codec, checked in this interpreter on the text the host injects (executed into
a private namespace; no tracer is installed). The per-version behaviour is covered by test_pytracer_values.py."""

from __future__ import annotations

import collections
import enum
import functools
import re
import sys
import types
from typing import Any

import pytest

from strobe.instrument.pytracer import SOURCE_PATHS


@pytest.fixture(scope="module")
def ns() -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "_strobe_reprs_test"}
    for path in SOURCE_PATHS[:2]:  # reprs.py, outbox.py
        exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace


def render(ns: dict[str, Any], value: object, **limits: int) -> object:
    return ns["Renderer"](**limits).render(value)


def read(ns: dict[str, Any], obj: object, name: str) -> object:
    return ns["static_attr"](obj, name, "obj")


def test_bounds(ns: dict[str, Any]) -> None:
    assert render(ns, {str(i): i for i in range(25)}) == {**{str(i): i for i in range(20)}, "…": "5 more"}
    assert render(ns, "é" * 201) == "é" * 200 + "…(201 chars)"
    assert render(ns, [[1]], depth=0) == "<list>"
    assert render(ns, [[1]], depth=1) == ["<list>"]
    assert render(ns, -(2**53)) == -(2**53) and render(ns, 2**53 + 1) == str(2**53 + 1)
    assert render(ns, 2**5000) == "<int of 5001 bits>"
    assert render(ns, bytearray(b"\x01" * 40)) == {"bytes": "01" * 32, "len": 40}
    shared = [1]
    assert render(ns, [shared, shared]) == [[1], [1]]  # repeated, not a cycle


def test_subclasses_of_builtins_render_as_their_base_without_their_methods(ns: dict[str, Any]) -> None:
    class Loud(str):
        def __str__(self) -> str:
            raise AssertionError("ran")

    class Count(int):
        def __index__(self) -> int:
            raise AssertionError("ran")

    assert render(ns, Loud("quiet")) == "quiet" and render(ns, Count(7)) == 7
    ordered = collections.OrderedDict(a=1)
    assert render(ns, ordered) == {"__type__": "collections.OrderedDict", "a": 1}
    assert render(ns, collections.defaultdict(list, k=[1])) == {"__type__": "collections.defaultdict", "k": [1]}


def test_enums(ns: dict[str, Any]) -> None:
    class Perm(enum.Flag):
        R, W = 1, 2

    class Level(enum.IntEnum):
        LOW = 1

    assert render(ns, Level.LOW) == f"{__name__}.{Level.__qualname__}.LOW"
    combined = render(ns, Perm.R | Perm.W)
    assert combined in (f"{__name__}.{Perm.__qualname__}.R|W", {"__type__": f"{__name__}.{Perm.__qualname__}",
                                                               "value": 3})


def test_a_rendering_that_fails_says_why(ns: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object) -> object:
        raise RuntimeError("boom")

    monkeypatch.setattr(ns["Renderer"], "_expand", broken)
    assert render(ns, [1]) == "<unrenderable: RuntimeError>"


def test_exception_messages_run_no_program_code(ns: dict[str, Any]) -> None:
    class Custom(Exception):
        def __str__(self) -> str:
            raise AssertionError("ran")

    class Key:
        def __repr__(self) -> str:
            raise AssertionError("ran")

    message = ns["exc_message"]
    assert message(ValueError("plain")) == "plain"
    assert message(Custom("a", 2)) == "a, 2"
    assert message(KeyError(Key())) == f"<{__name__}.{Key.__qualname__} object>"
    assert message(ValueError("x" * 600)) == "x" * 500 + "…(600 chars)"


def test_static_reads(ns: dict[str, Any]) -> None:
    class Slots:
        __slots__ = ("set_", "unset")

        def __init__(self) -> None:
            self.set_ = 1

    class Lazy:
        kind = "class attribute"

        @functools.cached_property
        def cached(self) -> int:
            raise AssertionError("ran")

        def method(self) -> None:
            pass

    class Dynamic:
        def __getattr__(self, name: str) -> object:
            raise AssertionError("ran")

    class Guard:
        def __get__(self, obj: object, owner: type) -> object:
            raise AssertionError("ran")

        def __set__(self, obj: object, value: object) -> None:
            raise AssertionError("ran")

    class Guarded:
        field = Guard()

    slots, lazy = Slots(), Lazy()
    error = ns["ChainError"]
    assert read(ns, slots, "set_") == 1
    with pytest.raises(error, match=re.escape("`obj.unset` is not set")):
        read(ns, slots, "unset")
    assert read(ns, lazy, "kind") == "class attribute"
    assert read(ns, lazy, "method") is Lazy.__dict__["method"]
    with pytest.raises(error, match=r"functools.cached_property descriptor: not read \(it would run code\)"):
        read(ns, lazy, "cached")
    lazy.__dict__["cached"] = 5  # once computed, it is a plain instance attribute
    assert read(ns, lazy, "cached") == 5
    with pytest.raises(error, match=r"has no attribute `x` stored; its .*Dynamic.__getattr__ was not run"):
        read(ns, Dynamic(), "x")
    with pytest.raises(error, match="Guard descriptor: not read"):
        read(ns, Guarded(), "field")
    assert isinstance(read(ns, Guarded, "field"), Guard)  # on the class: the descriptor object itself
    module = types.ModuleType("virtual")
    module.__dict__["__getattr__"] = lambda name: 1
    with pytest.raises(error, match="its __getattr__ was not run"):
        read(ns, module, "anything")


def test_chains(ns: dict[str, Any]) -> None:
    parse, chain = ns["parse_chain"], ns["read_chain"]
    assert chain(parse("collections.abc.Mapping")) is sys.modules["collections.abc"].Mapping
    assert chain(parse("os.path.sep")) == "/"
    for invalid in ["", "a.", "a b", "a[0]", "f()", "1x", None, "x" * 501]:
        with pytest.raises(ns["ChainError"], match="not a dotted name"):
            parse(invalid)


def test_codec_matches_the_json_module_and_rejects_trailing_data(ns: dict[str, Any],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    value = {"a": [1, 2.5, None, True, "é\n", {"b": []}], "s": "\udcff", "o": object()}
    dumps, loads = ns["json_codec"]()
    monkeypatch.setitem(sys.modules, "_json", None)  # `import _json` fails: the json module's encoder
    fallback_dumps, fallback_loads = ns["json_codec"]()
    assert dumps(value) == fallback_dumps(value)
    assert '"o":"<unrenderable: object>"' in dumps(value)
    assert loads('{"cmd": "flush", "id": 1}') == fallback_loads('{"cmd": "flush", "id": 1}')
    with pytest.raises(ValueError, match="extra data"):
        loads('{"cmd": "flush"} x')
