"""A shopping cart."""
from .discounts import apply_discount


class Cart:
    def __init__(self):
        self._lines = {}  # sku -> [unit price in cents, quantity]
        self.discount = None

    def add(self, sku, price, qty=1):
        """Add ``qty`` units of ``sku`` at ``price`` cents each."""
        if qty <= 0:
            raise ValueError("quantity must be positive")
        if sku in self._lines:
            self._lines[sku][1] += qty
        else:
            self._lines[sku] = [price, qty]

    def remove(self, sku, qty=None):
        """Remove ``qty`` units of ``sku`` (all of them when ``qty`` is None).

        Raises KeyError if ``sku`` is not in the cart and ValueError if ``qty``
        is not positive or is more than the cart holds.  When the last unit
        is removed, the sku disappears from the cart.
        """
        raise NotImplementedError("Cart.remove")

    def quantity(self, sku):
        return self._lines[sku][1] if sku in self._lines else 0

    def skus(self):
        return sorted(self._lines)

    def subtotal(self):
        return sum(price * qty for price, qty in self._lines.values())

    def total(self):
        return apply_discount(self.subtotal(), self.discount)
