"""Measures of central tendency."""


def mean(xs):
    """Arithmetic mean of xs as a float; 0.0 for an empty sequence."""
    if not xs:
        return 0.0
    return sum(xs) / len(xs)


def median(xs):
    """Middle value of xs as a float (the mean of the two middle values for an
    even length); 0.0 for an empty sequence."""
    if not xs:
        return 0.0
    s = sorted(xs)
    mid = len(s) // 2
    if len(s) % 2:
        return float(s[mid])
    return (s[mid - 1] + s[mid]) / 2


def mode(xs):
    """Most frequent value of xs; a tie goes to the smallest of the tied values.
    None for an empty sequence."""
    if not xs:
        return None
    counts = {}
    for x in xs:
        counts[x] = counts.get(x, 0) + 1
    return max(counts, key=counts.get)
