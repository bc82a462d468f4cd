"""Arithmetic helpers. `mean` has a bug on purpose: it divides by zero for an empty list."""


def add(a: int, b: int) -> int:
    return a + b


def divide(a: float, b: float) -> float:
    return a / b


def mean(values: list[float]) -> float:
    return divide(sum(values), len(values))
