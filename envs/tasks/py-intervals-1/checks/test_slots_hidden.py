import unittest

from slots.merge import merge, total_covered
from slots.overlap import overlaps


class TestOverlaps(unittest.TestCase):
    def test_touching_both_orders(self):
        self.assertFalse(overlaps((0, 10), (10, 20)))
        self.assertFalse(overlaps((10, 20), (0, 10)))

    def test_real_overlaps(self):
        self.assertTrue(overlaps((0, 10), (9, 20)))
        self.assertTrue(overlaps((2, 3), (0, 10)))
        self.assertTrue(overlaps((0, 10), (2, 3)))

    def test_disjoint(self):
        self.assertFalse(overlaps((0, 1), (5, 6)))


class TestMerge(unittest.TestCase):
    def test_long_interval_last(self):
        self.assertEqual(merge([(8, 9), (1, 10), (2, 3)]), [(1, 10)])

    def test_touching_merged(self):
        self.assertEqual(merge([(6, 8), (1, 2), (2, 4)]), [(1, 4), (6, 8)])

    def test_empty(self):
        self.assertEqual(merge([]), [])

    def test_total_covered(self):
        self.assertEqual(total_covered([(4, 6), (0, 5), (10, 12)]), 8)
