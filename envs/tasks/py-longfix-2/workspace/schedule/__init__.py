"""schedule: meeting-room bookings as minutes past midnight."""
from .agenda import conflicts, free_minutes
from .clock import format_minutes, parse_hhmm
from .slots import duration, overlaps

__all__ = ["parse_hhmm", "format_minutes", "duration", "overlaps", "conflicts", "free_minutes"]
