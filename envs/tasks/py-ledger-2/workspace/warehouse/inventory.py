"""Stock levels with reservations."""
from .errors import OutOfStock
from .reservations import ReservationBook


class Inventory:
    """Units on hand per sku; part of them can be reserved for orders.

    available = on hand - reserved.  A reservation can be released (the units
    become available again) or fulfilled (the units leave the warehouse).
    """

    def __init__(self):
        self._on_hand = {}
        self.book = ReservationBook()

    def receive(self, sku, qty):
        if qty <= 0:
            raise ValueError("quantity must be positive")
        self._on_hand[sku] = self._on_hand.get(sku, 0) + qty

    def on_hand(self, sku):
        return self._on_hand.get(sku, 0)

    def available(self, sku):
        return self.on_hand(sku) - self.book.reserved(sku)

    def reserve(self, sku, qty):
        """Reserve ``qty`` units; returns the reservation id.  OutOfStock if not available."""
        if qty <= 0:
            raise ValueError("quantity must be positive")
        if qty > self.on_hand(sku):
            raise OutOfStock(f"{sku}: wanted {qty}, available {self.available(sku)}")
        return self.book.open(sku, qty).rid

    def release(self, rid):
        """Cancel reservation ``rid``: its units become available again."""
        self.book.close(rid)

    def fulfil(self, rid):
        """Ship reservation ``rid``: its units leave the stock."""
        res = self.book.close(rid)
        self._on_hand[res.sku] -= res.qty
