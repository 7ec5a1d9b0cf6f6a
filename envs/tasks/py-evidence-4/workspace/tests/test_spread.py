import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from statkit.spread import value_range, variance


class TestVariance(unittest.TestCase):
    def test_variance_population(self):
        self.assertEqual(variance([1, 2, 3, 4]), 1.25)

    def test_variance_empty(self):
        self.assertEqual(variance([]), 0.0)


class TestValueRange(unittest.TestCase):
    def test_value_range(self):
        self.assertEqual(value_range([4, 9, 1]), 8)

    def test_value_range_empty(self):
        self.assertEqual(value_range([]), 0)


if __name__ == "__main__":
    unittest.main()
