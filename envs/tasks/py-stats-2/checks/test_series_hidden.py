import unittest

from series.rank import percentile
from series.summary import summarize
from series.window import moving_average, windows


class TestWindows(unittest.TestCase):
    def test_triples(self):
        self.assertEqual(moving_average([2, 4, 6, 8, 10], 3), [4.0, 6.0, 8.0])

    def test_exact_length(self):
        self.assertEqual(moving_average([1, 2, 3], 3), [2.0])

    def test_size_one(self):
        self.assertEqual(moving_average([7.5, 2.5], 1), [7.5, 2.5])

    def test_windows_lists(self):
        self.assertEqual(windows([1, 2, 3, 4, 5], 4), [[1, 2, 3, 4], [2, 3, 4, 5]])


class TestPercentile(unittest.TestCase):
    def test_median_rank(self):
        self.assertEqual(percentile([9, 3, 7, 1, 5], 50), 5)

    def test_top_and_bottom(self):
        data = [30, 10, 20, 60, 50, 40]
        self.assertEqual(percentile(data, 100), 60)
        self.assertEqual(percentile(data, 1), 10)
        self.assertEqual(percentile(data, 75), 50)

    def test_summary(self):
        self.assertEqual(
            summarize([4, 8, 6, 2, 10, 0], size=2),
            {"count": 6, "p50": 4, "p90": 10, "peak_average": 7.0},
        )
