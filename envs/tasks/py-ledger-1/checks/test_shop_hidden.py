import unittest

from shop.cart import Cart
from shop.discounts import apply_discount


def make():
    cart = Cart()
    cart.add("tea", 399, 2)
    cart.add("mug", 1250)
    cart.add("spoon", 120, 5)
    return cart


class TestDiscountHidden(unittest.TestCase):
    def test_fixed_clamped(self):
        self.assertEqual(apply_discount(999, ("fixed", 1000)), 0)
        self.assertEqual(apply_discount(0, ("fixed", 1)), 0)

    def test_fixed_partial(self):
        self.assertEqual(apply_discount(4321, ("fixed", 321)), 4000)

    def test_cart_total_with_big_voucher(self):
        cart = make()
        cart.discount = ("fixed", 5000)
        self.assertEqual(cart.total(), 0)


class TestRemoveHidden(unittest.TestCase):
    def test_remove_all_by_default(self):
        cart = make()
        cart.remove("spoon")
        self.assertEqual(cart.skus(), ["mug", "tea"])
        self.assertEqual(cart.subtotal(), 2048)

    def test_remove_exact_quantity_drops_line(self):
        cart = make()
        cart.remove("tea", 2)
        self.assertEqual(cart.quantity("tea"), 0)
        self.assertEqual(cart.skus(), ["mug", "spoon"])

    def test_partial_remove(self):
        cart = make()
        cart.remove("spoon", 2)
        self.assertEqual(cart.quantity("spoon"), 3)
        self.assertEqual(cart.subtotal(), 798 + 1250 + 360)

    def test_errors(self):
        cart = make()
        with self.assertRaises(KeyError):
            cart.remove("kettle")
        with self.assertRaises(ValueError):
            cart.remove("mug", 2)
        with self.assertRaises(ValueError):
            cart.remove("tea", 0)
        self.assertEqual(cart.quantity("mug"), 1)
        self.assertEqual(cart.quantity("tea"), 2)
