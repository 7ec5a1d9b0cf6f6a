"""Order statistics over lists of floats."""


def median(values):
    """Median of values, or None for an empty list."""
    if not values:
        return None
    s = sorted(values)
    mid = len(s) // 2
    if len(s) % 2:
        return float(s[mid])
    return (s[mid - 1] + s[mid]) / 2


def trimmed_mean(values, cut=0.1):
    """Mean after dropping the k smallest and the k largest values, where
    k = int(len(values) * cut).  None for an empty list."""
    if not values:
        return None
    if not 0 <= cut < 0.5:
        raise ValueError("cut must be in [0, 0.5)")
    s = sorted(values)
    k = int(len(s) * cut)
    kept = s[k:-k]
    return sum(kept) / len(kept)
