import unittest

from pager.bounds import page_slice
from pager.count import page_count
from pager.labels import nav, page_label


class TestCount(unittest.TestCase):
    def test_exact_multiple(self):
        self.assertEqual(page_count(10, 5), 2)
        self.assertEqual(page_count(1, 1), 1)

    def test_partial_last_page(self):
        self.assertEqual(page_count(11, 5), 3)
        self.assertEqual(page_count(1, 20), 1)

    def test_empty(self):
        self.assertEqual(page_count(0, 4), 1)


class TestSlices(unittest.TestCase):
    def test_partial_last(self):
        self.assertEqual(page_slice(3, 5, 11), (10, 11))

    def test_full_last(self):
        self.assertEqual(page_slice(2, 5, 10), (5, 10))
        with self.assertRaises(IndexError):
            page_slice(3, 5, 10)

    def test_empty_list(self):
        self.assertEqual(page_slice(1, 4, 0), (0, 0))

    def test_labels_and_nav(self):
        self.assertEqual(page_label(3, 5, 11), "Items 11-11 of 11")
        self.assertEqual(page_label(2, 4, 7), "Items 5-7 of 7")
        self.assertEqual(page_label(1, 4, 0), "No items")
        self.assertEqual(nav(3, 5, 11), (2, None))
        self.assertEqual(nav(2, 5, 10), (1, None))
