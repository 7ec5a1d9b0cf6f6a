"""Measures of spread."""
import math

from .central import mean


def variance(xs):
    """Population variance of xs (divide by n); 0.0 for an empty sequence."""
    m = mean(xs)
    return sum((x - m) ** 2 for x in xs) / len(xs)


def std_dev(xs):
    """Population standard deviation of xs; 0.0 for an empty sequence."""
    return math.sqrt(variance(xs))
