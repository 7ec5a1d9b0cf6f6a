"""bytecache: a byte-budgeted LRU cache."""
from .cache import ByteBudgetCache
from .sizing import size_of
