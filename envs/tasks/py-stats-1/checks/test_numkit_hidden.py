import unittest

from numkit import mean, median, std_dev, variance
from numkit.central import mean as central_mean
from numkit.spread import variance as spread_variance


class TestMean(unittest.TestCase):
    def test_mean_thirds(self):
        self.assertAlmostEqual(mean([1, 2, 4]), 7 / 3)

    def test_mean_single_int_is_float(self):
        self.assertEqual(central_mean([7]), 7.0)

    def test_mean_negative(self):
        self.assertEqual(mean([-3, 0]), -1.5)


class TestSpread(unittest.TestCase):
    def test_variance_uses_exact_mean(self):
        self.assertAlmostEqual(spread_variance([1, 2, 3, 4]), 1.25)

    def test_empty_spread(self):
        self.assertEqual(variance([]), 0.0)
        self.assertEqual(std_dev([]), 0.0)

    def test_single_value(self):
        self.assertEqual(variance([5.5]), 0.0)

    def test_std_dev_pair(self):
        self.assertAlmostEqual(std_dev([1, 3]), 1.0)

    def test_median_untouched(self):
        self.assertEqual(median([9, 1, 5]), 5.0)
