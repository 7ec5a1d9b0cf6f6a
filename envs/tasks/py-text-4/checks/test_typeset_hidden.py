import unittest

from typeset.headline import headline
from typeset.truncate import truncate


class TestHeadlineHidden(unittest.TestCase):
    def test_compound_first(self):
        self.assertEqual(headline("of-the-moment ideas for a new year"),
                         "Of-the-Moment Ideas for a New Year")

    def test_compound_last(self):
        self.assertEqual(headline("keeping your notes up-to-date"),
                         "Keeping Your Notes Up-to-Date")

    def test_compound_middle_and_acronym(self):
        self.assertEqual(headline("why NASA builds one-of-a-kind probes"),
                         "Why NASA Builds One-of-a-Kind Probes")

    def test_compound_after_colon(self):
        self.assertEqual(headline("field notes: in-and-out of the city"),
                         "Field Notes: In-and-Out of the City")


class TestTruncateHidden(unittest.TestCase):
    def test_multichar_ellipsis(self):
        self.assertEqual(truncate("alpha beta gamma delta epsilon", 20, ellipsis=" [...]"),
                         "alpha beta [...]")

    def test_exact_fit(self):
        self.assertEqual(truncate("alpha beta gamma delta", 19, ellipsis="..."), "alpha beta gamma...")

    def test_bound_for_many_limits(self):
        text = "Sphinx of black quartz, judge my vow; pack my box with five dozen jugs"
        for limit in range(8, 60):
            out = truncate(text, limit, ellipsis="(more)")
            self.assertLessEqual(len(out), limit)
            self.assertTrue(out.endswith("(more)"))

    def test_first_word_cut(self):
        self.assertEqual(truncate("Incomprehensibilities abound", 10, ellipsis="..."), "Incompr...")
