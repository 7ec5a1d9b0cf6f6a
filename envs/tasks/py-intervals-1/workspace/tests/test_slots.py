import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from slots import merge, overlaps


class TestOverlap(unittest.TestCase):
    def test_touching(self):
        self.assertFalse(overlaps((1, 3), (3, 5)))

    def test_overlapping(self):
        self.assertTrue(overlaps((1, 4), (3, 5)))


class TestMerge(unittest.TestCase):
    def test_unsorted(self):
        self.assertEqual(merge([(5, 7), (1, 3), (2, 4)]), [(1, 4), (5, 7)])


if __name__ == "__main__":
    unittest.main()
