import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from statkit.central import mean, median, mode


class TestMean(unittest.TestCase):
    def test_mean_of_ints_keeps_fraction(self):
        self.assertEqual(mean([1, 2]), 1.5)

    def test_mean_empty(self):
        self.assertEqual(mean([]), 0.0)


class TestMedian(unittest.TestCase):
    def test_median_odd_length(self):
        self.assertEqual(median([5, 1, 3]), 3.0)

    def test_median_even_length(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)


class TestMode(unittest.TestCase):
    def test_mode_single_winner(self):
        self.assertEqual(mode([2, 7, 7, 1]), 7)

    def test_mode_tie_goes_to_smallest(self):
        self.assertEqual(mode([3, 1, 3, 1]), 1)


if __name__ == "__main__":
    unittest.main()
