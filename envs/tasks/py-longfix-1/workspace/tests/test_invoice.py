import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from invoice import format_cents, parse_line, parse_price, subtotal, tax_cents


class TestLines(unittest.TestCase):
    def test_parse_price(self):
        self.assertEqual(parse_price("4.25"), 425)
        self.assertEqual(parse_price("12"), 1200)

    def test_parse_line_two_word_name(self):
        self.assertEqual(parse_line("2 x Blue Mug @ 4.25"), (2, "Blue Mug", 425))


class TestTotals(unittest.TestCase):
    def test_subtotal(self):
        self.assertEqual(subtotal([(2, "Mug", 425), (1, "Pen", 99)]), 949)

    def test_tax_whole_cents(self):
        self.assertEqual(tax_cents(1000, 8), 80)

    def test_tax_half_cent_rounds_up(self):
        self.assertEqual(tax_cents(25, 10), 3)


class TestRender(unittest.TestCase):
    def test_format_cents(self):
        self.assertEqual(format_cents(1250), "12.50")
        self.assertEqual(format_cents(7), "0.07")


if __name__ == "__main__":
    unittest.main()
