"""Memoization on top of LRUCache."""
import functools

from .lru import LRUCache

_MISSING = object()


class Memoized:
    """Wraps a one-argument function and caches its results in an LRUCache."""

    def __init__(self, func, capacity=128):
        self.func = func
        self.cache = LRUCache(capacity)
        self.hits = 0
        self.misses = 0
        functools.update_wrapper(self, func)

    def __call__(self, arg):
        value = self.cache.get(arg, _MISSING)
        if value is _MISSING:
            self.misses += 1
            value = self.func(arg)
            self.cache.put(arg, value)
        else:
            self.hits += 1
        return value

    def stats(self):
        """(hits, misses, number of cached results)."""
        return (self.hits, self.misses, len(self.cache))

    def clear(self):
        """Forget every cached result and reset the hit and miss counters to 0.

        The capacity stays the same.
        """
        raise NotImplementedError("clear() is not implemented yet")


def memoize(capacity=128):
    """Decorator form: @memoize(capacity=...)."""
    def wrap(func):
        return Memoized(func, capacity)
    return wrap
