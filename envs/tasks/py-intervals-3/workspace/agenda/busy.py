"""Normalising busy intervals."""


def normalize(busy):
    """Sorted, disjoint busy blocks.

    Intervals are half-open (start, end).  Empty intervals (start >= end)
    are dropped; overlapping or touching intervals are merged into one.
    """
    merged = []
    for start, end in sorted(iv for iv in busy if iv[0] < iv[1]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged
