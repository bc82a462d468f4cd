import unittest

from shapes.geometry import scale


class TestResize(unittest.TestCase):
    def test_double(self) -> None:
        self.assertEqual(scale(2, 2), 4)

    def test_flatten(self) -> None:
        self.assertEqual(scale(5, 0), 0)
