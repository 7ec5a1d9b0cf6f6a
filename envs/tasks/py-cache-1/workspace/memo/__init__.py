"""memo: LRU cache and memoization."""
from .lru import LRUCache
from .memoize import Memoized, memoize
