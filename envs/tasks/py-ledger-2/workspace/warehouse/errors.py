"""Exceptions raised by the warehouse package."""


class StockError(Exception):
    """Base class for warehouse errors."""


class OutOfStock(StockError):
    """Not enough available units for a reservation."""


class UnknownReservation(StockError, KeyError):
    """No active reservation with that id (never made, released or fulfilled)."""
