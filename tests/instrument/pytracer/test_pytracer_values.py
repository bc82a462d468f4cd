"""Arguments are rendered as bounded JSON without running any of the program's code (programs/values.py records
every dunder, property or metaclass hook that runs), under every interpreter."""

from __future__ import annotations

from typing import Any

import pytest
from tests.instrument.pytracer.runner import (
    ENTER,
    PROGRAMS,
    UNWIND,
    Run,
    assert_clean,
    interpreters,
    run_program,
    targets,
)

PROGRAM = PROGRAMS / "values.py"


@pytest.fixture(scope="module", params=interpreters())
def python(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def rendered(python: str, tmp_path_factory: pytest.TempPathFactory, depth: int) -> tuple[Run, dict[str, Any]]:
    run = run_program(python, PROGRAM, tmp_path_factory.mktemp("values"),
                      {"targets": targets(PROGRAM, "show", "fail_loud"), "depth": depth})
    assert_clean(run)
    assert "RAN=\n" in run.stdout  # nothing of the program's ran from the tracer
    (enter,) = run.of(1, ENTER)
    return run, dict(enter[6]["args"])


def test_values_at_the_default_depth(python: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    run, values = rendered(python, tmp_path_factory, 3)
    assert values == {
        "cycle": [1, "<cycle list>"],
        "node": {"name": "root", "self": "<cycle dict>"},
        "deep": [[["<list>"]]],
        "point": {"__type__": "__main__.Point", "x": 1, "y": 2, "label": "p"},
        "slotted": {"__type__": "__main__.Slotted", "a": 1, "b": [2]},
        "trap": {"__type__": "__main__.Trap", "visible": "plain attribute"},
        "sneaky": {"__type__": "__main__.Sneaky", "field": 5},
        "klass": "<class __main__.WithMeta>",
        "instance": "<__main__.WithMeta object>",
        "sub": [1, 2],
        "color": "__main__.Color.RED",
        "raw": {"bytes": "00ff616263", "len": 5},
        "big": str(2**70),
        "nan": "nan",
        "inf": "-inf",
        "long": "x" * 200 + "…(300 chars)",
        "many": [*range(20), "…5 more"],
        "mapping": {"1": "one", "(1, 2)": "pair", "<__main__.Plain>": "object key"},
        "queue": [1, 2],
        "pair": {"__type__": "__main__.Pair", "left": 1, "right": 2},
        "frozen": [3],
        "empty": [],
        "error": {"__type__": "KeyError", "message": "'k'"},
        "function": "<function show>",
    }
    (unwind,) = run.of(2, UNWIND)
    assert unwind[6]["exception"]["type"] == "__main__.Loud"
    assert unwind[6]["exception"]["message"] == "quiet args"  # Loud.__str__ is the program's: not called


def test_depth_one_summarises_nested_containers(python: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    _, values = rendered(python, tmp_path_factory, 1)
    assert values["deep"] == ["<list>"]
    assert values["node"] == {"name": "root", "self": "<dict>"}
    assert values["slotted"] == {"__type__": "__main__.Slotted", "a": 1, "b": "<list>"}
    assert values["point"]["x"] == 1
