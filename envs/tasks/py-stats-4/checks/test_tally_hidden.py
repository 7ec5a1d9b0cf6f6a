import unittest

from tally.groups import group_values, summarize
from tally.order import trimmed_mean
from tally.report import report_from_lines
from tally.rows import parse_rows


class TestTrimmedMean(unittest.TestCase):
    def test_nothing_trimmed(self):
        self.assertEqual(trimmed_mean([2.0, 9.0], 0.1), 5.5)
        self.assertEqual(trimmed_mean([7.0], 0.1), 7.0)

    def test_zero_cut(self):
        self.assertEqual(trimmed_mean([1.0, 2.0, 3.0, 10.0], 0.0), 4.0)

    def test_one_each_side(self):
        self.assertEqual(trimmed_mean([50.0, 1.0, 3.0, 5.0, -20.0], 0.2), 3.0)


class TestGroups(unittest.TestCase):
    def test_gap_in_the_middle(self):
        rows = parse_rows(["b,4", "a,", "b,", "a,1", "b,8", "c,"])
        self.assertEqual(group_values(rows), {"b": [4.0, 8.0], "a": [1.0], "c": []})
        self.assertEqual(list(group_values(rows)), ["b", "a", "c"])

    def test_summary_order_and_values(self):
        rows = parse_rows(["x,", "y,3", "x,6", "y,", "y,1", "x,2", "z,"])
        summary = summarize(rows)
        self.assertEqual(list(summary), ["x", "y", "z"])
        self.assertEqual(summary["x"], {"n": 2, "median": 4.0, "trimmed": 4.0})
        self.assertEqual(summary["y"], {"n": 2, "median": 2.0, "trimmed": 2.0})
        self.assertEqual(summary["z"], {"n": 0, "median": None, "trimmed": None})

    def test_report_lines(self):
        lines = ["ops,12", "", "qa,", "ops,18", "ops,30"]
        self.assertEqual(report_from_lines(lines),
                         ["ops: n=3 median=18.0 trimmed=20.0", "qa: n=0 median=- trimmed=-"])
