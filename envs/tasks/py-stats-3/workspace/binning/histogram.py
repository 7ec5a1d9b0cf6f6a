"""Counting values into equal-width bins."""


def bin_index(value, lo, hi, bins):
    """Index of the bin that holds value, or None when value is outside [lo, hi].

    Bins are half-open [edge_i, edge_i+1), except the last one, which is
    closed and also holds hi itself.
    """
    if value < lo or value > hi:
        return None
    width = (hi - lo) / bins
    return int((value - lo) / width)


def histogram(values, lo, hi, bins):
    """List of `bins` counts; values outside [lo, hi] are ignored."""
    counts = [0] * bins
    for value in values:
        index = bin_index(value, lo, hi, bins)
        if index is None or index >= bins:
            continue
        counts[index] += 1
    return counts
