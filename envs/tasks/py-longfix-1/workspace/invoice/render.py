"""Plain-text rendering of an invoice."""
from .totals import subtotal, tax_cents


def format_cents(cents):
    """Integer cents as a string with two decimals: 1250 -> "12.50"."""
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{cents // 100}.{cents % 100:02d}"


def render(lines, rate_percent):
    """The invoice as text: one row per line, then the subtotal, tax and total rows."""
    rows = []
    for qty, name, unit in lines:
        rows.append(f"{qty} x {name}: {format_cents(qty * unit)}")
    sub = subtotal(lines)
    tax = tax_cents(sub, rate_percent)
    rows.append(f"subtotal: {format_cents(sub)}")
    rows.append(f"tax {rate_percent}%: {format_cents(tax)}")
    rows.append(f"total: {format_cents(sub + tax)}")
    return "\n".join(rows)
