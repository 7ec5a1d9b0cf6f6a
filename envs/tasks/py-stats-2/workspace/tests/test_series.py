import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from series.rank import percentile
from series.window import moving_average


class TestMovingAverage(unittest.TestCase):
    def test_pairs(self):
        self.assertEqual(moving_average([1, 2, 3, 4], 2), [1.5, 2.5, 3.5])

    def test_too_short(self):
        self.assertEqual(moving_average([5, 5], 3), [])


class TestPercentile(unittest.TestCase):
    def test_unsorted_input(self):
        self.assertEqual(percentile([40, 15, 50, 20, 35], 40), 20)

    def test_empty(self):
        self.assertIsNone(percentile([], 50))


if __name__ == "__main__":
    unittest.main()
