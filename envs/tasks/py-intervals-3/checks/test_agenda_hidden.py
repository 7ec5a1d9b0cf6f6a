import unittest

from agenda.api import free_slots_text
from agenda.busy import normalize
from agenda.free import find_free


class TestNormalize(unittest.TestCase):
    def test_contained_and_unsorted(self):
        self.assertEqual(normalize([(700, 760), (600, 900), (650, 660)]), [(600, 900)])

    def test_touching_merged(self):
        self.assertEqual(normalize([(600, 660), (540, 600), (900, 960), (660, 700)]),
                         [(540, 700), (900, 960)])

    def test_empty_dropped(self):
        self.assertEqual(normalize([(800, 800), (820, 810)]), [])


class TestFindFree(unittest.TestCase):
    def test_end_of_day_exact(self):
        self.assertEqual(find_free([(480, 975)], 480, 1020, 45), [(975, 1020)])

    def test_start_of_day_exact(self):
        self.assertEqual(find_free([(500, 1000)], 480, 1000, 20), [(480, 500)])

    def test_nested_inside_day(self):
        busy = [(600, 780), (620, 640), (800, 830)]
        self.assertEqual(find_free(busy, 540, 900, 20), [(540, 600), (780, 800), (830, 900)])

    def test_touching_leaves_no_gap(self):
        self.assertEqual(find_free([(540, 600), (600, 660)], 480, 720, 0), [(480, 540), (660, 720)])

    def test_text_front_end(self):
        self.assertEqual(
            free_slots_text("08:00-09:30, 13:00-14:00, 13:15-13:45, 16:30-18:00", day="09:00-17:00", min_minutes=30),
            ["09:30-13:00", "14:00-16:30"],
        )
        self.assertEqual(free_slots_text("", day="10:00-10:45", min_minutes=45), ["10:00-10:45"])
