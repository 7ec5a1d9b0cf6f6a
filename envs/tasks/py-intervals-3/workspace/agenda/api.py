"""Text front end: 'HH:MM-HH:MM' ranges in, ranges out."""
from .clock import fmt_hhmm, parse_range
from .free import find_free


def free_slots_text(busy_text, day="09:00-17:00", min_minutes=30):
    """Free slots of a day as 'HH:MM-HH:MM' strings.

    busy_text is a comma-separated list of ranges (may be empty).
    """
    busy = [parse_range(part) for part in busy_text.split(",") if part.strip()]
    day_start, day_end = parse_range(day)
    return [f"{fmt_hhmm(s)}-{fmt_hhmm(e)}" for s, e in find_free(busy, day_start, day_end, min_minutes)]
