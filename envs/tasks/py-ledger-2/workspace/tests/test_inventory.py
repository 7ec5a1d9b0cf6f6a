import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from warehouse import Inventory, OutOfStock


class TestInventory(unittest.TestCase):
    def setUp(self):
        self.inv = Inventory()
        self.inv.receive("bolt", 10)

    def test_reserve_reduces_available(self):
        self.inv.reserve("bolt", 4)
        self.assertEqual(self.inv.available("bolt"), 6)
        self.assertEqual(self.inv.on_hand("bolt"), 10)

    def test_cannot_overbook(self):
        self.inv.reserve("bolt", 8)
        with self.assertRaises(OutOfStock):
            self.inv.reserve("bolt", 5)

    def test_release(self):
        rid = self.inv.reserve("bolt", 7)
        self.inv.release(rid)
        self.assertEqual(self.inv.available("bolt"), 10)

    def test_fulfil(self):
        rid = self.inv.reserve("bolt", 3)
        self.inv.fulfil(rid)
        self.assertEqual(self.inv.on_hand("bolt"), 7)
        self.assertEqual(self.inv.available("bolt"), 7)


if __name__ == "__main__":
    unittest.main()
