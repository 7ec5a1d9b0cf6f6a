import unittest

from spans.duration import format_duration, parse_duration
from spans.lexer import split_parts


class TestLexer(unittest.TestCase):
    def test_spaced_parts(self):
        self.assertEqual(split_parts("2d 4h  5s"), [(2, "d"), (4, "h"), (5, "s")])

    def test_still_rejected(self):
        for bad in ["1 h", "h1", "1h,30m", "", "  ", "10"]:
            with self.assertRaises(ValueError):
                split_parts(bad)


class TestDuration(unittest.TestCase):
    def test_parse(self):
        self.assertEqual(parse_duration("2h 15m"), 8100)
        self.assertEqual(parse_duration(" 1d 1s "), 86401)
        self.assertEqual(parse_duration("10m5s"), 605)

    def test_order_rules_kept(self):
        for bad in ["30m 1h", "1h 2h"]:
            with self.assertRaises(ValueError):
                parse_duration(bad)

    def test_format(self):
        self.assertEqual(format_duration(0), "0s")
        self.assertEqual(format_duration(3725), "1h2m5s")
        self.assertEqual(format_duration(86400), "1d")

    def test_round_trip(self):
        for seconds in [0, 1, 59, 61, 3600, 90061]:
            self.assertEqual(parse_duration(format_duration(seconds)), seconds)
