import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from binning import bin_edges, histogram, render


class TestEdges(unittest.TestCase):
    def test_quarter_edges(self):
        self.assertEqual(bin_edges(0, 10, 4), [0.0, 2.5, 5.0, 7.5, 10.0])


class TestHistogram(unittest.TestCase):
    def test_upper_bound_counted(self):
        self.assertEqual(histogram([0, 1, 2.5, 9, 10], 0, 10, 4), [2, 1, 0, 2])

    def test_outside_ignored(self):
        self.assertEqual(histogram([-1, 11], 0, 10, 2), [0, 0])

    def test_render(self):
        self.assertEqual(render([0, 1, 2.5, 9, 10], 0, 10, 4),
                         ["0-2.5 | ##", "2.5-5 | #", "5-7.5 | ", "7.5-10 | ##"])


if __name__ == "__main__":
    unittest.main()
