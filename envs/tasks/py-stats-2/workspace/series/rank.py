"""Order statistics."""
import math


def percentile(xs, p):
    """Nearest-rank percentile of xs.

    The result is the smallest value v in xs such that at least p percent of
    the values are <= v; that is the value at 1-based rank ceil(p / 100 * n)
    in sorted order.  p must be in (0, 100].  An empty xs gives None.
    """
    if not 0 < p <= 100:
        raise ValueError("p must be in (0, 100]")
    if not xs:
        return None
    rank = math.ceil(p / 100 * len(xs))
    return xs[rank - 1]
