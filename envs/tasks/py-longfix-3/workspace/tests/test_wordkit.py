import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from wordkit import format_top, tokenize, top_words, word_counts


class TestTokens(unittest.TestCase):
    def test_tokenize_lower_cases(self):
        self.assertEqual(tokenize("The cat saw the dog"), ["the", "cat", "saw", "the", "dog"])

    def test_word_counts(self):
        self.assertEqual(word_counts("The cat saw the dog"),
                         {"the": 2, "cat": 1, "saw": 1, "dog": 1})


class TestRank(unittest.TestCase):
    def test_ties_alphabetical(self):
        self.assertEqual(top_words({"ant": 2, "bee": 2, "cat": 1}, 2), [("ant", 2), ("bee", 2)])

    def test_highest_first(self):
        self.assertEqual(top_words({"x": 1, "y": 3}, 1), [("y", 3)])


class TestReport(unittest.TestCase):
    def test_format_top(self):
        self.assertEqual(format_top([("ant", 2)]), "ant: 2")


if __name__ == "__main__":
    unittest.main()
