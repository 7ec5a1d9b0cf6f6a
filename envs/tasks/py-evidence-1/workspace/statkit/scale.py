"""Rescaling helpers."""


def normalize(xs):
    """Min-max rescale xs into [0.0, 1.0], as a list of floats. An empty sequence
    gives []; when every value is equal, every result is 0.0."""
    if not xs:
        return []
    lo, hi = min(xs), max(xs)
    if hi == lo:
        return [0.0 for _ in xs]
    return [(x - lo) / (hi - lo) for x in xs]


def clamp(x, lo, hi):
    """x limited to the closed interval [lo, hi] (lo <= hi)."""
    return max(lo, min(x, hi))
