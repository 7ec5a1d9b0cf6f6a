"""Overlap tests for half-open intervals (start, end)."""


def overlaps(a, b):
    """True when a and b share at least one point.

    (1, 3) and (3, 5) only touch, so they do not overlap.
    """
    return a[0] <= b[1] and b[0] <= a[1]


def contains(outer, inner):
    """True when every point of inner is also in outer."""
    return outer[0] <= inner[0] and inner[1] <= outer[1]
