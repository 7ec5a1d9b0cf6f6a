"""numkit: tiny numeric helpers."""
from .central import mean, median
from .spread import std_dev, variance

__all__ = ["mean", "median", "variance", "std_dev"]
