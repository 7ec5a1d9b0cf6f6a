"""Measures of spread."""


def variance(xs):
    """Population variance of xs (divide by n); 0.0 for an empty sequence."""
    if not xs:
        return 0.0
    m = sum(xs) / len(xs)
    return sum((x - m) ** 2 for x in xs) / len(xs)


def value_range(xs):
    """Largest minus smallest value of xs; 0 for an empty sequence."""
    if not xs:
        return 0
    return max(xs) - min(xs)
