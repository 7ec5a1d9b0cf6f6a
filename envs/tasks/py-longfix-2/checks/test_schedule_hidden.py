import unittest

from schedule import conflicts, duration, free_minutes, overlaps, parse_hhmm
from schedule.clock import format_minutes


class TestClock(unittest.TestCase):
    def test_padding(self):
        self.assertEqual(format_minutes(62), "01:02")
        self.assertEqual(format_minutes(0), "00:00")
        self.assertEqual(format_minutes(1439), "23:59")

    def test_wraps_past_midnight(self):
        self.assertEqual(format_minutes(1500), "01:00")
        self.assertEqual(format_minutes(1445), "00:05")

    def test_round_trip(self):
        self.assertEqual(format_minutes(parse_hhmm("17:08")), "17:08")


class TestSlots(unittest.TestCase):
    def test_touching_either_side(self):
        self.assertFalse(overlaps((600, 660), (540, 600)))
        self.assertFalse(overlaps((720, 780), (780, 800)))

    def test_disjoint_in_either_order(self):
        self.assertFalse(overlaps((700, 760), (540, 600)))
        self.assertFalse(overlaps((540, 600), (700, 760)))

    def test_overlapping(self):
        self.assertTrue(overlaps((600, 700), (650, 660)))
        self.assertTrue(overlaps((650, 660), (600, 700)))
        self.assertTrue(overlaps((599, 601), (600, 602)))

    def test_duration(self):
        self.assertEqual(duration((540, 615)), 75)


class TestAgenda(unittest.TestCase):
    def test_conflicts(self):
        self.assertEqual(conflicts([(700, 760), (540, 600), (590, 710)]), [(0, 2), (1, 2)])
        self.assertEqual(conflicts([(480, 540), (540, 600), (600, 660)]), [])

    def test_free_minutes(self):
        self.assertEqual(free_minutes([(540, 600), (570, 630), (700, 800)], 500, 720), 110)


if __name__ == "__main__":
    unittest.main()
