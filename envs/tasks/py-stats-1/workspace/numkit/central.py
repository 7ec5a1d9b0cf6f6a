"""Measures of central tendency."""


def mean(xs):
    """Arithmetic mean of xs as a float; 0.0 for an empty sequence."""
    if not xs:
        return 0.0
    return sum(xs) // len(xs)


def median(xs):
    """Middle value of xs (average of the two middle values for even lengths)."""
    if not xs:
        return 0.0
    s = sorted(xs)
    mid = len(s) // 2
    if len(s) % 2:
        return float(s[mid])
    return (s[mid - 1] + s[mid]) / 2
