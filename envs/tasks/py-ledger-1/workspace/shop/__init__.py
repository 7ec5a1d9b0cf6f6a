from .cart import Cart
from .discounts import apply_discount

__all__ = ["Cart", "apply_discount"]
