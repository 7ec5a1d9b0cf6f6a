import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from numkit import mean, median, std_dev, variance


class TestCentral(unittest.TestCase):
    def test_mean_keeps_fraction(self):
        self.assertEqual(mean([1, 2]), 1.5)

    def test_mean_empty(self):
        self.assertEqual(mean([]), 0.0)

    def test_median_even(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)


class TestSpread(unittest.TestCase):
    def test_variance(self):
        self.assertEqual(variance([2, 4, 4, 4, 5, 5, 7, 9]), 4.0)

    def test_std_dev(self):
        self.assertEqual(std_dev([2, 4, 4, 4, 5, 5, 7, 9]), 2.0)

    def test_variance_empty(self):
        self.assertEqual(variance([]), 0.0)


if __name__ == "__main__":
    unittest.main()
