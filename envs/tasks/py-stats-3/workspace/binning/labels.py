"""Histogram rows with their edges, for the text report."""
from .edges import bin_edges
from .histogram import histogram


def labelled(values, lo, hi, bins):
    """List of (left_edge, right_edge, count) tuples, one per bin."""
    edges = bin_edges(lo, hi, bins)
    counts = histogram(values, lo, hi, bins)
    return [(edges[i], edges[i + 1], counts[i]) for i in range(bins)]


def render(values, lo, hi, bins, mark="#"):
    """Text lines such as '0.0-2.5 | ###'."""
    return [f"{left:g}-{right:g} | {mark * count}" for left, right, count in labelled(values, lo, hi, bins)]
