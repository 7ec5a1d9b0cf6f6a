"""Free slots between busy blocks."""
from .busy import normalize


def find_free(busy, day_start, day_end, min_length=1):
    """Free (start, end) slots within [day_start, day_end) that are at least
    min_length minutes long, in order.  Busy time outside the day is ignored.
    """
    slots = []
    cursor = day_start
    for start, end in normalize(busy):
        if end <= day_start or start >= day_end:
            continue
        if start - cursor > min_length:
            slots.append((cursor, start))
        cursor = max(cursor, end)
    if day_end - cursor > min_length:
        slots.append((cursor, day_end))
    return slots
