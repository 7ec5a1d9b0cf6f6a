import unittest

from prose.titlecase import title_case
from prose.wrap import wrap


class TestTitleHidden(unittest.TestCase):
    def test_last_small_word(self):
        self.assertEqual(title_case("something to look forward to"), "Something to Look Forward To")

    def test_first_small_word(self):
        self.assertEqual(title_case("of mice and men"), "Of Mice and Men")

    def test_single_small_word(self):
        self.assertEqual(title_case("the"), "The")

    def test_custom_small_words(self):
        self.assertEqual(
            title_case("war and peace in the USSR", small_words={"and", "in"}),
            "War and Peace in The USSR",
        )


class TestWrapHidden(unittest.TestCase):
    def test_exact_fit(self):
        self.assertEqual(wrap("ab cd ef gh", 5), ["ab cd", "ef gh"])

    def test_no_overflow(self):
        self.assertEqual(wrap("one two three four five six", 7), ["one two", "three", "four", "five", "six"])

    def test_long_word_alone(self):
        self.assertEqual(wrap("a supercalifragilistic word", 8), ["a", "supercalifragilistic", "word"])

    def test_blank(self):
        self.assertEqual(wrap("   ", 10), [])
