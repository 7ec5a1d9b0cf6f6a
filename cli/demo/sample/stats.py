"""Small statistics helpers used by the Arbor demo."""

VERSION = "0.1.0"


def mean(values):
    """Arithmetic mean of a non-empty sequence of numbers."""
    if not values:
        raise ValueError("mean() of an empty sequence")
    return sum(values) / len(values)


def median(values):
    """Middle value (mean of the two middle values for even lengths)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("median() of an empty sequence")
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2
