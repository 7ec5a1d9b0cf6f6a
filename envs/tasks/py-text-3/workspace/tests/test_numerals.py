import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from numerals import format_number, from_roman, group_digits, ordinal, to_roman


class TestRoman(unittest.TestCase):
    def test_to_roman(self):
        self.assertEqual(to_roman(1994), "MCMXCIV")
        self.assertEqual(to_roman(3888), "MMMDCCCLXXXVIII")

    def test_from_roman_subtractive(self):
        self.assertEqual(from_roman("MCMXCIV"), 1994)

    def test_from_roman_repeated(self):
        self.assertEqual(from_roman("VIII"), 8)


class TestGrouping(unittest.TestCase):
    def test_positive(self):
        self.assertEqual(group_digits(1234567), "1,234,567")
        self.assertEqual(group_digits(999), "999")

    def test_negative(self):
        self.assertEqual(group_digits(-987654), "-987,654")

    def test_format_number(self):
        self.assertEqual(format_number(1234.5), "1,234.50")


class TestOrdinal(unittest.TestCase):
    def test_ordinals(self):
        self.assertEqual([ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21)],
                         ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st"])


if __name__ == "__main__":
    unittest.main()
