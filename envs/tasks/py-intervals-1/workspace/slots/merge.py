"""Merging of half-open intervals."""


def merge(intervals):
    """Merge overlapping or touching intervals.

    Returns a new list of (start, end) tuples sorted by start.
    """
    merged = []
    for start, end in intervals:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def total_covered(intervals):
    """Length of the union of the intervals."""
    return sum(end - start for start, end in merge(intervals))
