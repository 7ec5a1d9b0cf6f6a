"""Half-open time slots (start, end), in minutes past midnight: a slot includes its
start minute and excludes its end minute."""


def duration(slot):
    """Length of slot in minutes."""
    start, end = slot
    return end - start


def overlaps(a, b):
    """True when slots a and b share at least one minute."""
    return a[0] <= b[1] and b[0] <= a[1]
