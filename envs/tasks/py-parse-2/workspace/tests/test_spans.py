import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from spans import format_duration, parse_duration


class TestParse(unittest.TestCase):
    def test_compact(self):
        self.assertEqual(parse_duration("1h30m"), 5400)

    def test_spaced(self):
        self.assertEqual(parse_duration("1h 30m"), 5400)

    def test_unknown_unit(self):
        with self.assertRaises(ValueError):
            parse_duration("3w")


class TestFormat(unittest.TestCase):
    def test_format(self):
        self.assertEqual(format_duration(5400), "1h30m")

    def test_zero_round_trip(self):
        self.assertEqual(parse_duration(format_duration(0)), 0)


if __name__ == "__main__":
    unittest.main()
