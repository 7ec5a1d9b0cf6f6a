"""Parsing invoice lines such as "3 x Blue Mug @ 4.25"."""


def parse_price(text):
    """A price such as "4.25", "12.5" or "12" as integer cents."""
    whole, _, frac = text.strip().partition(".")
    frac = (frac + "00")[:2]
    return int(whole) * 100 + int(frac)


def parse_line(text):
    """Parse "<qty> x <name> @ <price>" into (qty, name, unit_cents).

    The name may contain spaces; whitespace around the parts is ignored."""
    parts = text.split()
    qty = int(parts[0])
    name = parts[2]
    unit_cents = parse_price(parts[-1])
    return qty, name, unit_cents
