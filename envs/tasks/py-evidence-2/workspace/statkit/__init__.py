"""statkit: small descriptive statistics helpers."""
from .central import mean, median, mode
from .scale import clamp, normalize
from .spread import value_range, variance

__version__ = "0.4.0"

__all__ = ["mean", "median", "mode", "variance", "value_range", "normalize", "clamp"]
