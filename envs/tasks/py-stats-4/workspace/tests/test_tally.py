import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tally.groups import summarize
from tally.order import median, trimmed_mean
from tally.report import report_from_lines
from tally.rows import parse_rows


class TestOrder(unittest.TestCase):
    def test_median_even(self):
        self.assertEqual(median([4.0, 1.0, 3.0, 2.0]), 2.5)

    def test_trimmed_mean_trims(self):
        values = [float(v) for v in range(1, 11)] + [1000.0]
        self.assertEqual(trimmed_mean(values, 0.1), 6.0)


class TestSummary(unittest.TestCase):
    def test_small_team(self):
        rows = parse_rows(["api,10", "api,30", "api,20"])
        self.assertEqual(summarize(rows), {"api": {"n": 3, "median": 20.0, "trimmed": 20.0}})

    def test_team_without_measurements(self):
        rows = parse_rows(["web,", "api,5"])
        self.assertEqual(
            summarize(rows),
            {"web": {"n": 0, "median": None, "trimmed": None},
             "api": {"n": 1, "median": 5.0, "trimmed": 5.0}},
        )

    def test_report(self):
        self.assertEqual(report_from_lines(["db,2", "db,4"]), ["db: n=2 median=3.0 trimmed=3.0"])


if __name__ == "__main__":
    unittest.main()
