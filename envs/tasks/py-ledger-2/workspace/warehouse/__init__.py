from .errors import OutOfStock, StockError, UnknownReservation
from .inventory import Inventory

__all__ = ["Inventory", "OutOfStock", "StockError", "UnknownReservation"]
