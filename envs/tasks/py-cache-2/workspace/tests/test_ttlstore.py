import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ttlstore import ManualClock, TTLStore


class TestExpiry(unittest.TestCase):
    def test_expires_at_ttl(self):
        clock = ManualClock()
        store = TTLStore(10, clock=clock)
        store.set("k", "v")
        clock.advance(9)
        self.assertEqual(store.get("k"), "v")
        clock.advance(1)
        self.assertIsNone(store.get("k"))


class TestPurge(unittest.TestCase):
    def test_purge(self):
        clock = ManualClock()
        store = TTLStore(5, clock=clock)
        store.set("a", 1)
        store.set("b", 2)
        store.set("c", 3, ttl=60)
        clock.advance(30)
        self.assertEqual(store.purge(), 2)
        self.assertEqual(len(store), 1)


if __name__ == "__main__":
    unittest.main()
