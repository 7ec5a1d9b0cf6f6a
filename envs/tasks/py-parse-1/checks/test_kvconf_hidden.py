import unittest

from kvconf.parser import parse_config
from kvconf.values import convert


class TestConvert(unittest.TestCase):
    def test_signed_ints(self):
        self.assertEqual(convert("-15"), -15)
        self.assertEqual(convert("+7"), 7)
        self.assertEqual(convert("42"), 42)

    def test_not_ints(self):
        self.assertEqual(convert("--3"), "--3")
        self.assertEqual(convert("-"), "-")
        self.assertEqual(convert("1.5"), "1.5")

    def test_bools(self):
        self.assertEqual(convert("False"), False)
        self.assertEqual(convert("tRuE"), True)


class TestParser(unittest.TestCase):
    def test_comments_and_blanks(self):
        text = "\t# tabbed comment\nlevel = +3\n  \n\t\n  # spaced comment = 1\nmode=fast\n"
        self.assertEqual(parse_config(text), {"level": 3, "mode": "fast"})

    def test_first_equals_only(self):
        self.assertEqual(parse_config("  url = a=b  \nshift = -1\n"), {"url": "a=b", "shift": -1})

    def test_error_line_number(self):
        with self.assertRaises(ValueError) as ctx:
            parse_config("# head\n  \nok = 1\noops\n")
        self.assertIn("line 4", str(ctx.exception))
