"""Amounts are written as decimal strings ("12.50") and stored as integer cents."""
import re

_AMOUNT = re.compile(r"^(-?)(\d+)(?:\.(\d{1,2}))?$")


def to_cents(text):
    """Parse "12.34" -> 1234, "7" -> 700, "0.5" -> 50, "-3.07" -> -307.

    At most two decimals are allowed; anything else raises ValueError.
    """
    m = _AMOUNT.match(text.strip())
    if not m:
        raise ValueError(f"bad amount: {text!r}")
    sign, whole, frac = m.groups()
    cents = int(whole) * 100 + int(frac or "0")
    return -cents if sign else cents


def fmt(cents):
    """1234 -> "12.34", -5 -> "-0.05", 0 -> "0.00"."""
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    return f"{sign}{whole}.{frac:02d}"
