import unittest

from textkit.clip import clip
from textkit.slug import slugify


class TestSlugHidden(unittest.TestCase):
    def test_runs_collapse(self):
        self.assertEqual(slugify("--Multiple   spaces!!here--"), "multiple-spaces-here")

    def test_underscores_are_separators(self):
        self.assertEqual(slugify("snake_case and kebab-case"), "snake-case-and-kebab-case")

    def test_dot_separator(self):
        self.assertEqual(slugify("Version 2.0 Release", sep="."), "version.2.0.release")

    def test_accents_dropped(self):
        self.assertEqual(slugify("Caf\u00e9 Ol\u00e9 42"), "caf-ol-42")


class TestClipHidden(unittest.TestCase):
    def test_default_ellipsis(self):
        self.assertEqual(clip("abcdefghijklmnop", 8), "abcde...")

    def test_custom_ellipsis(self):
        self.assertEqual(clip("abcdefghij", 6, ellipsis="\u2026"), "abcde\u2026")

    def test_exact_fit_and_empty(self):
        self.assertEqual(clip("exactly eleven", 14), "exactly eleven")
        self.assertEqual(clip("", 5), "")

    def test_length_bound(self):
        for width in range(4, 30):
            self.assertLessEqual(len(clip("Lorem ipsum dolor sit amet, consectetur", width, "[..]")), width)
