"""Discounts applied to a cart subtotal (all amounts in cents)."""


def apply_discount(amount, discount):
    """Return ``amount`` after ``discount``.

    ``discount`` is None, ("percent", p) with 0 <= p <= 100, or ("fixed", cents).
    Percent discounts round the saving down to a whole cent.  A discount can
    bring the total down to 0 but never below.
    """
    if discount is None:
        return amount
    kind, value = discount
    if kind == "percent":
        return amount - amount * value // 100
    if kind == "fixed":
        return amount - value
    raise ValueError(f"unknown discount kind: {kind!r}")
