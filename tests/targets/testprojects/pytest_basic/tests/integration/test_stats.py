from calc.ops import mean


def test_mean() -> None:
    assert mean([1.0, 2.0, 3.0]) == 2.0


def test_mean_of_nothing() -> None:
    assert mean([]) == 0.0
