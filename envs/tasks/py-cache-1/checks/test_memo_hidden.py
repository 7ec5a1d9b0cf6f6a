import unittest

from memo.lru import LRUCache
from memo.memoize import Memoized, memoize


class TestLRUOrder(unittest.TestCase):
    def test_read_protects_key(self):
        cache = LRUCache(3)
        for key in ["x", "y", "z"]:
            cache.put(key, key.upper())
        self.assertEqual(cache.get("x"), "X")
        self.assertEqual(cache.get("y"), "Y")
        cache.put("w", "W")
        self.assertEqual(cache.keys(), ["x", "y", "w"])
        self.assertFalse("z" in cache)

    def test_miss_and_membership_do_not_reorder(self):
        cache = LRUCache(2)
        cache.put(1, "one")
        cache.put(2, "two")
        self.assertIsNone(cache.get(3))
        self.assertTrue(1 in cache)
        cache.put(3, "three")
        self.assertEqual(cache.keys(), [2, 3])


class TestClear(unittest.TestCase):
    def test_clear_resets_everything(self):
        calls = []

        def double(x):
            calls.append(x)
            return 2 * x

        wrapped = Memoized(double, capacity=2)
        self.assertEqual([wrapped(5), wrapped(5), wrapped(6)], [10, 10, 12])
        self.assertEqual(wrapped.stats(), (1, 2, 2))
        wrapped.clear()
        self.assertEqual(wrapped.stats(), (0, 0, 0))
        self.assertEqual(wrapped(5), 10)
        self.assertEqual(calls, [5, 6, 5])
        self.assertEqual(wrapped.stats(), (0, 1, 1))

    def test_capacity_kept(self):
        @memoize(capacity=2)
        def ident(x):
            return x

        ident(1)
        ident.clear()
        for x in [1, 2, 3, 1]:
            ident(x)
        self.assertEqual(ident.stats(), (0, 4, 2))
