import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from prose import heading, title_case, wrap


class TestTitleCase(unittest.TestCase):
    def test_small_words_inside(self):
        self.assertEqual(title_case("the lord of the rings"), "The Lord of the Rings")

    def test_acronym_kept(self):
        self.assertEqual(title_case("NASA and the moon"), "NASA and the Moon")

    def test_last_word_capitalised(self):
        self.assertEqual(title_case("what are you looking at"), "What Are You Looking At")


class TestWrap(unittest.TestCase):
    def test_sentence(self):
        self.assertEqual(
            wrap("the quick brown fox jumps over the lazy dog", 10),
            ["the quick", "brown fox", "jumps over", "the lazy", "dog"],
        )

    def test_lines_fit(self):
        text = "aaaa bbbbb cccc ddddd"
        for line in wrap(text, 9):
            self.assertLessEqual(len(line), 9)

    def test_heading(self):
        self.assertEqual(heading("a tale of two cities", 12), "A Tale of\nTwo Cities")


if __name__ == "__main__":
    unittest.main()
