import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from pager import nav, page_count, page_label, page_slice


class TestPager(unittest.TestCase):
    def test_count(self):
        self.assertEqual(page_count(10, 3), 4)
        self.assertEqual(page_count(0, 5), 1)

    def test_last_page_slice(self):
        self.assertEqual(page_slice(4, 3, 10), (9, 10))

    def test_first_page_slice(self):
        self.assertEqual(page_slice(1, 3, 10), (0, 3))

    def test_label(self):
        self.assertEqual(page_label(4, 3, 10), "Items 10-10 of 10")

    def test_nav(self):
        self.assertEqual(nav(3, 3, 10), (2, 4))


if __name__ == "__main__":
    unittest.main()
