import unittest

from warehouse.errors import OutOfStock, UnknownReservation
from warehouse.inventory import Inventory


def stocked():
    inv = Inventory()
    inv.receive("widget", 12)
    inv.receive("gadget", 3)
    return inv


class TestReserveHidden(unittest.TestCase):
    def test_overbooking_across_reservations(self):
        inv = stocked()
        inv.reserve("widget", 5)
        inv.reserve("widget", 5)
        with self.assertRaises(OutOfStock):
            inv.reserve("widget", 3)
        self.assertEqual(inv.available("widget"), 2)

    def test_reserve_everything_left(self):
        inv = stocked()
        inv.reserve("gadget", 1)
        inv.reserve("gadget", 2)
        self.assertEqual(inv.available("gadget"), 0)

    def test_other_sku_unaffected(self):
        inv = stocked()
        inv.reserve("gadget", 3)
        inv.reserve("widget", 12)
        self.assertEqual(inv.available("widget"), 0)


class TestReleaseHidden(unittest.TestCase):
    def test_release_restores(self):
        inv = stocked()
        a = inv.reserve("widget", 9)
        b = inv.reserve("widget", 2)
        inv.release(a)
        self.assertEqual(inv.available("widget"), 10)
        self.assertEqual(inv.book.active_ids(), [b])
        self.assertEqual(inv.on_hand("widget"), 12)

    def test_release_unknown_and_twice(self):
        inv = stocked()
        rid = inv.reserve("gadget", 2)
        with self.assertRaises(UnknownReservation):
            inv.release(rid + 100)
        inv.release(rid)
        with self.assertRaises(UnknownReservation):
            inv.release(rid)
        with self.assertRaises(KeyError):
            inv.fulfil(rid)

    def test_fulfil_then_reserve_again(self):
        inv = stocked()
        rid = inv.reserve("widget", 10)
        inv.fulfil(rid)
        self.assertEqual(inv.on_hand("widget"), 2)
        with self.assertRaises(OutOfStock):
            inv.reserve("widget", 3)
        inv.reserve("widget", 2)
        self.assertEqual(inv.available("widget"), 0)

    def test_close_returns_reservation(self):
        inv = stocked()
        rid = inv.reserve("gadget", 1)
        res = inv.book.close(rid)
        self.assertEqual((res.rid, res.sku, res.qty), (rid, "gadget", 1))
        self.assertEqual(inv.book.active_ids(), [])
