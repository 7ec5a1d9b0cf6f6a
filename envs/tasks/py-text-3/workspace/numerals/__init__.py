"""numerals: number formatting helpers."""
from .grouping import format_number, group_digits
from .ordinal import ordinal
from .roman import from_roman, to_roman

__all__ = ["format_number", "group_digits", "ordinal", "from_roman", "to_roman"]
