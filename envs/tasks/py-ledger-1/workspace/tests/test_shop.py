import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from shop import Cart, apply_discount


class TestDiscounts(unittest.TestCase):
    def test_percent(self):
        self.assertEqual(apply_discount(10000, ("percent", 15)), 8500)

    def test_fixed(self):
        self.assertEqual(apply_discount(2000, ("fixed", 500)), 1500)

    def test_fixed_larger_than_amount(self):
        self.assertEqual(apply_discount(300, ("fixed", 500)), 0)


class TestCart(unittest.TestCase):
    def test_totals(self):
        cart = Cart()
        cart.add("apple", 50, 4)
        cart.add("pear", 75)
        self.assertEqual(cart.subtotal(), 275)
        cart.discount = ("percent", 10)
        self.assertEqual(cart.total(), 248)

    def test_remove_some(self):
        cart = Cart()
        cart.add("apple", 50, 4)
        cart.remove("apple", 3)
        self.assertEqual(cart.quantity("apple"), 1)


if __name__ == "__main__":
    unittest.main()
