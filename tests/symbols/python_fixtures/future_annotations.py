# ruff: noqa
"""With postponed annotations no annotation is compiled, so lambdas inside them are no code objects."""

from __future__ import annotations


def annotated(x: (lambda: int)() = (lambda: 0)()) -> (lambda: int)():
    return x


value: (lambda: int)() = 1


class Holder:
    field: (lambda: int)() = 2

    def method(self, y: (lambda: str)()) -> None:
        pass
