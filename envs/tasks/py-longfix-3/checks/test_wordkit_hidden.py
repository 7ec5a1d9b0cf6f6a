import unittest

from wordkit import summary, tokenize, top_words, word_counts


class TestTokens(unittest.TestCase):
    def test_punctuation_separates(self):
        self.assertEqual(tokenize("Hello, world! Hello again."), ["hello", "world", "hello", "again"])

    def test_apostrophes_and_digits(self):
        self.assertEqual(tokenize("Don't STOP 2 times"), ["don't", "stop", "times"])

    def test_counts_case_insensitive(self):
        self.assertEqual(word_counts("A b a, B! c"), {"a": 2, "b": 2, "c": 1})


class TestRank(unittest.TestCase):
    def test_ties_alphabetical_any_insertion_order(self):
        self.assertEqual(top_words({"pear": 3, "apple": 3, "fig": 1, "kiwi": 3}, 3),
                         [("apple", 3), ("kiwi", 3), ("pear", 3)])

    def test_count_first(self):
        self.assertEqual(top_words({"b": 1, "a": 1, "z": 4}, 2), [("z", 4), ("a", 1)])

    def test_n_larger_than_counts(self):
        self.assertEqual(top_words({"a": 1}, 5), [("a", 1)])


class TestSummary(unittest.TestCase):
    def test_summary(self):
        self.assertEqual(summary("the cat and the hat and the bat", 2), "the: 3\nand: 2")
        self.assertEqual(summary("b a B A c", 3), "a: 2\nb: 2\nc: 1")


if __name__ == "__main__":
    unittest.main()
