import unittest

from bytecache.cache import ByteBudgetCache
from bytecache.ledger import Ledger


class TestLedger(unittest.TestCase):
    def test_recharge(self):
        ledger = Ledger()
        ledger.charge("k", 12)
        ledger.charge("k", 5)
        ledger.charge("j", 3)
        self.assertEqual(ledger.total, 8)
        self.assertEqual(ledger.release("k"), 5)
        self.assertEqual(ledger.total, 3)


class TestAccounting(unittest.TestCase):
    def test_repeated_overwrites_do_not_evict(self):
        cache = ByteBudgetCache(16)
        cache.put("a", b"12345678")
        for i in range(10):
            self.assertEqual(cache.put("b", "v%d" % i), [])
        self.assertEqual(cache.keys(), ["a", "b"])
        self.assertEqual(cache.used, 10)

    def test_grow_existing_key_evicts_others(self):
        cache = ByteBudgetCache(12)
        cache.put("p", [1])
        cache.put("q", "abcd")
        self.assertEqual(cache.put("q", "abcdefgh"), ["p"])
        self.assertEqual(cache.used, 8)

    def test_oversized_value_drops_old(self):
        cache = ByteBudgetCache(6)
        cache.put("k", "abc")
        self.assertEqual(cache.put("k", "abcdefg"), ["k"])
        self.assertEqual(cache.used, 0)
        self.assertIsNone(cache.get("k"))


class TestResize(unittest.TestCase):
    def test_shrink_returns_evicted(self):
        cache = ByteBudgetCache(30)
        for key in ["a", "b", "c", "d"]:
            cache.put(key, "x" * 6)
        cache.get("a")
        self.assertEqual(cache.resize(13), ["b", "c"])
        self.assertEqual(cache.keys(), ["d", "a"])
        self.assertEqual(cache.used, 12)
        self.assertEqual(cache.max_bytes, 13)

    def test_grow_and_zero(self):
        cache = ByteBudgetCache(10)
        cache.put("x", "12345")
        self.assertEqual(cache.resize(50), [])
        cache.put("y", "y" * 40)
        self.assertEqual(cache.keys(), ["x", "y"])
        self.assertEqual(cache.resize(0), ["x", "y"])
        self.assertEqual(cache.used, 0)

    def test_negative(self):
        cache = ByteBudgetCache(10)
        with self.assertRaises(ValueError):
            cache.resize(-1)
