import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bytecache import ByteBudgetCache


class TestAccounting(unittest.TestCase):
    def test_overwrite(self):
        cache = ByteBudgetCache(100)
        cache.put("a", "x" * 40)
        cache.put("a", "y" * 30)
        self.assertEqual(cache.used, 30)

    def test_eviction_order(self):
        cache = ByteBudgetCache(10)
        cache.put("a", "1234")
        cache.put("b", "5678")
        cache.get("a")
        self.assertEqual(cache.put("c", "90ab"), ["b"])
        self.assertEqual(cache.keys(), ["a", "c"])


class TestResize(unittest.TestCase):
    def test_budget_respected_after_resize(self):
        cache = ByteBudgetCache(20)
        cache.put("a", "12345")
        cache.put("b", "12345")
        cache.resize(8)
        cache.put("c", "123")
        self.assertLessEqual(cache.used, 8)


if __name__ == "__main__":
    unittest.main()
