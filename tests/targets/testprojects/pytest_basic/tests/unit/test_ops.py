import sys

import pytest
from calc.ops import add


def test_add() -> None:
    print("adding two and two")
    assert add(2, 2) == 4


def test_add_negative() -> None:
    result = add(-2, -3)
    assert result == -6, "sum of negatives"


@pytest.mark.skip(reason="not on this machine")
def test_skipped() -> None:
    raise AssertionError("never runs")


@pytest.mark.xfail(reason="known rounding issue")
def test_rounding() -> None:
    assert add(1, 1) == 3


class TestAddition:
    @pytest.mark.parametrize("a,b", [(1, 2), (3, 4)])
    def test_commutes(self, a: int, b: int) -> None:
        assert add(a, b) == add(b, a)

    def test_platform(self) -> None:
        assert sys.platform
