"""A day's agenda: conflicts between slots and free time."""
from .slots import overlaps


def conflicts(slots):
    """Index pairs (i, j), i < j, of the slots that overlap, in order."""
    out = []
    for i in range(len(slots)):
        for j in range(i + 1, len(slots)):
            if overlaps(slots[i], slots[j]):
                out.append((i, j))
    return out


def free_minutes(slots, day_start, day_end):
    """Minutes in [day_start, day_end) not covered by any slot."""
    busy = set()
    for start, end in slots:
        busy.update(range(max(start, day_start), min(end, day_end)))
    return (day_end - day_start) - len(busy)
