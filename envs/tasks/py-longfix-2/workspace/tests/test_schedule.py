import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from schedule import conflicts, format_minutes, free_minutes, overlaps, parse_hhmm


class TestClock(unittest.TestCase):
    def test_parse(self):
        self.assertEqual(parse_hhmm("09:05"), 545)

    def test_format_pads_minutes(self):
        self.assertEqual(format_minutes(545), "09:05")
        self.assertEqual(format_minutes(600), "10:00")


class TestSlots(unittest.TestCase):
    def test_overlapping(self):
        self.assertTrue(overlaps((540, 600), (570, 630)))

    def test_back_to_back_do_not_overlap(self):
        self.assertFalse(overlaps((540, 600), (600, 660)))


class TestAgenda(unittest.TestCase):
    def test_conflicts(self):
        self.assertEqual(conflicts([(540, 600), (600, 660), (630, 700)]), [(1, 2)])

    def test_free_minutes(self):
        self.assertEqual(free_minutes([(540, 600)], 480, 720), 180)


if __name__ == "__main__":
    unittest.main()
