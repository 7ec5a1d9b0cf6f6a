"""Invoice totals, in integer cents."""


def line_total(qty, unit_cents):
    """qty items at unit_cents each."""
    return qty * unit_cents


def subtotal(lines):
    """Sum of the line totals of (qty, name, unit_cents) lines."""
    return sum(line_total(qty, unit) for qty, _, unit in lines)


def tax_cents(amount_cents, rate_percent):
    """Tax on amount_cents at an integer rate_percent, rounded to the nearest cent;
    an exact half cent rounds up."""
    return round(amount_cents * rate_percent / 100)
