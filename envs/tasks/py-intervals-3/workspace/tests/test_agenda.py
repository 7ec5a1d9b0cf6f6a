import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from agenda.api import free_slots_text
from agenda.busy import normalize
from agenda.free import find_free


class TestBusy(unittest.TestCase):
    def test_nested_meeting(self):
        self.assertEqual(normalize([(540, 720), (600, 660)]), [(540, 720)])


class TestFree(unittest.TestCase):
    def test_gap_exactly_min_length(self):
        self.assertEqual(find_free([(540, 600), (630, 1020)], 540, 1020, 30), [(600, 630)])

    def test_text(self):
        self.assertEqual(free_slots_text("09:00-12:00, 10:00-11:00, 13:00-16:00"),
                         ["12:00-13:00", "16:00-17:00"])


if __name__ == "__main__":
    unittest.main()
