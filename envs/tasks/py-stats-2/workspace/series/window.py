"""Sliding-window helpers over a list of numbers."""


def windows(xs, size):
    """All contiguous windows of exactly `size` items, in order."""
    if size <= 0:
        raise ValueError("size must be positive")
    return [xs[i:i + size] for i in range(len(xs) - size)]


def moving_average(xs, size):
    """Mean of every full window of `size` items, as a list of floats.

    A series shorter than `size` has no full window and gives [].
    """
    return [sum(w) / size for w in windows(xs, size)]
