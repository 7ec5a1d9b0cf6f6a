import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from memo import LRUCache, memoize


class TestLRU(unittest.TestCase):
    def test_get_refreshes(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        cache.put("b", 2)
        self.assertEqual(cache.get("a"), 1)
        cache.put("c", 3)
        self.assertEqual(cache.keys(), ["a", "c"])


class TestMemoized(unittest.TestCase):
    def test_clear(self):
        @memoize(capacity=4)
        def square(x):
            return x * x

        square(2)
        square(2)
        self.assertEqual(square.stats(), (1, 1, 1))
        square.clear()
        self.assertEqual(square.stats(), (0, 0, 0))


if __name__ == "__main__":
    unittest.main()
