import unittest

from numerals.grouping import format_number, group_digits
from numerals.roman import from_roman, to_roman


class TestRomanHidden(unittest.TestCase):
    def test_repeated_symbols(self):
        self.assertEqual(from_roman("MMXXIII"), 2023)
        self.assertEqual(from_roman("CCC"), 300)

    def test_lower_case_and_mixed(self):
        self.assertEqual(from_roman("xlii"), 42)
        self.assertEqual(from_roman("mcdxliv"), 1444)

    def test_round_trip(self):
        for n in (1, 4, 9, 14, 40, 90, 400, 1666, 2444, 3999):
            self.assertEqual(from_roman(to_roman(n)), n)


class TestGroupingHidden(unittest.TestCase):
    def test_negative_multiple_of_three(self):
        self.assertEqual(group_digits(-250000), "-250,000")
        self.assertEqual(group_digits(-123), "-123")

    def test_negative_other_sep(self):
        self.assertEqual(group_digits(-1000000, sep="."), "-1.000.000")
        self.assertEqual(group_digits(-45678, sep=" "), "-45 678")

    def test_zero_and_small(self):
        self.assertEqual(group_digits(0), "0")
        self.assertEqual(group_digits(-7), "-7")

    def test_format_negative(self):
        self.assertEqual(format_number(-654321.987, 1), "-654,322.0")
        self.assertEqual(format_number(-100200.3, 0), "-100,200")
