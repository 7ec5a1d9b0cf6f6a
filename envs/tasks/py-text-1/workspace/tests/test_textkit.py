import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from textkit import clip, slugify


class TestSlugify(unittest.TestCase):
    def test_basic(self):
        self.assertEqual(slugify("Hello, World!"), "hello-world")

    def test_already_slugged(self):
        self.assertEqual(slugify("  Already-slugged  "), "already-slugged")

    def test_custom_separator(self):
        self.assertEqual(slugify("Rock & Roll", sep="_"), "rock_roll")


class TestClip(unittest.TestCase):
    def test_short_text_unchanged(self):
        self.assertEqual(clip("short", 10), "short")

    def test_long_text(self):
        self.assertEqual(clip("The quick brown fox", 10), "The qui...")

    def test_never_longer_than_width(self):
        self.assertLessEqual(len(clip("The quick brown fox", 12)), 12)


if __name__ == "__main__":
    unittest.main()
