"""Equal-width bin edges."""


def bin_edges(lo, hi, bins):
    """Edges of `bins` equal-width bins covering [lo, hi].

    Returns bins + 1 floats: the first is lo, the last is hi.
    """
    if bins < 1:
        raise ValueError("need at least one bin")
    if hi <= lo:
        raise ValueError("hi must be greater than lo")
    width = (hi - lo) // bins
    return [float(lo + i * width) for i in range(bins)] + [float(hi)]
