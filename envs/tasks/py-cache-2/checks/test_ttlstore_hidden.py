import unittest

from ttlstore.clocks import ManualClock
from ttlstore.entry import Entry
from ttlstore.store import TTLStore


class TestEntry(unittest.TestCase):
    def test_boundary(self):
        entry = Entry("x", 100.0, 2.5)
        self.assertFalse(entry.expired(102.0))
        self.assertTrue(entry.expired(102.5))
        self.assertTrue(entry.expired(200.0))


class TestStore(unittest.TestCase):
    def test_fractional_ttl(self):
        clock = ManualClock(start=50)
        store = TTLStore(3, clock=clock)
        store.set("session", {"user": 7})
        clock.advance(2.5)
        self.assertEqual(store.get("session"), {"user": 7})
        self.assertTrue("session" in store)
        clock.advance(0.5)
        self.assertFalse("session" in store)
        self.assertEqual(store.get("session", "gone"), "gone")

    def test_reset_on_set(self):
        clock = ManualClock()
        store = TTLStore(4, clock=clock)
        store.set("k", 1)
        clock.advance(3)
        store.set("k", 2)
        clock.advance(3)
        self.assertEqual(store.get("k"), 2)


class TestPurge(unittest.TestCase):
    def test_purge_counts_removed(self):
        clock = ManualClock()
        store = TTLStore(1, clock=clock)
        for key in ["p", "q", "r"]:
            store.set(key, key)
        store.set("s", "s", ttl=8)
        clock.advance(1)
        self.assertEqual(store.purge(), 3)
        self.assertEqual(len(store), 1)
        self.assertEqual(store.get("s"), "s")
        self.assertEqual(store.purge(), 0)

    def test_purge_exact_instant(self):
        clock = ManualClock()
        store = TTLStore(6, clock=clock)
        store.set("a", 1)
        store.set("b", 2, ttl=7)
        clock.advance(6)
        self.assertEqual(store.purge(), 1)
        self.assertEqual(len(store), 1)
        clock.advance(1)
        self.assertEqual(store.purge(), 1)
        self.assertEqual(len(store), 0)
