import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from statkit.scale import clamp, normalize


class TestNormalize(unittest.TestCase):
    def test_normalize_offset_values(self):
        self.assertEqual(normalize([2, 4, 6]), [0.0, 0.5, 1.0])

    def test_normalize_all_equal(self):
        self.assertEqual(normalize([3, 3]), [0.0, 0.0])


class TestClamp(unittest.TestCase):
    def test_clamp_limits(self):
        self.assertEqual(clamp(12, 0, 10), 10)
        self.assertEqual(clamp(-2, 0, 10), 0)

    def test_clamp_inside(self):
        self.assertEqual(clamp(5, 0, 10), 5)


if __name__ == "__main__":
    unittest.main()
