import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from typeset import fill, headline, truncate


class TestHeadline(unittest.TestCase):
    def test_minor_words(self):
        self.assertEqual(headline("a history of the world in ten objects"),
                         "A History of the World in Ten Objects")

    def test_after_colon(self):
        self.assertEqual(headline("dune: the desert planet"), "Dune: The Desert Planet")

    def test_compound_first_word(self):
        self.assertEqual(headline("state-of-the-art tools for the web"),
                         "State-of-the-Art Tools for the Web")


class TestTruncate(unittest.TestCase):
    def test_fits(self):
        self.assertEqual(truncate("short  and   sweet", 20), "short and sweet")

    def test_word_boundary(self):
        self.assertEqual(truncate("The rain in Spain stays mainly in the plain", 20),
                         "The rain in Spain\u2026")

    def test_punctuation_dropped(self):
        self.assertEqual(truncate("Hello, world and everyone", 12), "Hello\u2026")


class TestFill(unittest.TestCase):
    def test_hanging_indent(self):
        self.assertEqual(fill("one two three four five", 9, indent="  "),
                         "one two\n  three\n  four\n  five")


if __name__ == "__main__":
    unittest.main()
