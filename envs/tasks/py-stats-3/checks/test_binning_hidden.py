import unittest

from binning.edges import bin_edges
from binning.histogram import bin_index, histogram
from binning.labels import labelled


class TestEdges(unittest.TestCase):
    def test_uneven_width(self):
        self.assertEqual(bin_edges(1, 4, 2), [1.0, 2.5, 4.0])

    def test_negative_range(self):
        self.assertEqual(bin_edges(-3, 3, 3), [-3.0, -1.0, 1.0, 3.0])


class TestHistogram(unittest.TestCase):
    def test_closed_last_bin(self):
        self.assertEqual(histogram([5, 6, 6, 8], 5, 8, 3), [1, 2, 1])

    def test_fractional_range(self):
        self.assertEqual(histogram([0.5, 1.0, 0.25, 1.5, -0.5], 0, 1, 2), [1, 2])

    def test_bin_index(self):
        self.assertEqual(bin_index(4, 1, 4, 3), 2)
        self.assertEqual(bin_index(1, 1, 4, 3), 0)
        self.assertIsNone(bin_index(4.5, 1, 4, 3))

    def test_labelled(self):
        self.assertEqual(labelled([1, 2, 3, 4], 1, 4, 2), [(1.0, 2.5, 2), (2.5, 4.0, 2)])
