import unittest

from invoice import parse_line, parse_price, render, subtotal, tax_cents
from invoice.render import format_cents


class TestParse(unittest.TestCase):
    def test_one_word_name(self):
        self.assertEqual(parse_line("1 x Pen @ 0.95"), (1, "Pen", 95))

    def test_three_word_name(self):
        self.assertEqual(parse_line("3 x Extra Large Tote @ 12.5"), (3, "Extra Large Tote", 1250))

    def test_surrounding_whitespace(self):
        self.assertEqual(parse_line("  4 x Desk Lamp @ 30 "), (4, "Desk Lamp", 3000))

    def test_price_untouched(self):
        self.assertEqual(parse_price("0.07"), 7)


class TestTax(unittest.TestCase):
    def test_half_cent_rounds_up(self):
        self.assertEqual(tax_cents(45, 10), 5)
        self.assertEqual(tax_cents(3845, 10), 385)

    def test_rounds_to_nearest(self):
        self.assertEqual(tax_cents(1201, 10), 120)
        self.assertEqual(tax_cents(199, 5), 10)
        self.assertEqual(tax_cents(1250, 8), 100)
        self.assertEqual(tax_cents(0, 20), 0)

    def test_returns_int(self):
        self.assertEqual(tax_cents(1234, 7), 86)


class TestInvoice(unittest.TestCase):
    def test_render_end_to_end(self):
        lines = [parse_line("3 x Extra Large Tote @ 12.5"), parse_line("1 x Pen @ 0.95")]
        self.assertEqual(subtotal(lines), 3845)
        self.assertEqual(render(lines, 10),
                         "3 x Extra Large Tote: 37.50\n1 x Pen: 0.95\nsubtotal: 38.45\n"
                         "tax 10%: 3.85\ntotal: 42.30")

    def test_format_untouched(self):
        self.assertEqual(format_cents(-305), "-3.05")


if __name__ == "__main__":
    unittest.main()
