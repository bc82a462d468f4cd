"""Areas and scaling. `scale` rejects a zero factor, which one integration test trips over on purpose."""

import math


class Circle:
    def __init__(self, radius: float) -> None:
        self.radius = radius

    def area(self) -> float:
        return math.pi * self.radius**2


def rectangle_area(width: float, height: float) -> float:
    return width * height


def scale(size: float, factor: float) -> float:
    if factor == 0:
        raise ValueError("factor must not be zero")
    return size * factor
