"""invoice: parse invoice lines and compute totals in integer cents."""
from .lines import parse_line, parse_price
from .render import format_cents, render
from .totals import line_total, subtotal, tax_cents

__all__ = ["parse_line", "parse_price", "line_total", "subtotal", "tax_cents",
           "format_cents", "render"]
