"""LRU cache bounded by the total size of its values."""
from collections import OrderedDict

from .ledger import Ledger
from .sizing import size_of


class ByteBudgetCache:
    """Evicts least recently used entries whenever the values together
    cost more than max_bytes.  get() hits and put() count as uses."""

    def __init__(self, max_bytes):
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        self.max_bytes = max_bytes
        self._items = OrderedDict()
        self._ledger = Ledger()

    @property
    def used(self):
        """Bytes used by the cached values."""
        return self._ledger.total

    def keys(self):
        """Keys from least to most recently used."""
        return list(self._items)

    def get(self, key, default=None):
        if key not in self._items:
            return default
        self._items.move_to_end(key)
        return self._items[key]

    def put(self, key, value):
        """Store value and evict until the budget holds; return the evicted keys.

        A value bigger than the whole budget is not stored at all (and any
        older value for the key is dropped); the result is then [key].
        """
        size = size_of(value)
        if size > self.max_bytes:
            self.pop(key)
            return [key]
        self._items[key] = value
        self._items.move_to_end(key)
        self._ledger.charge(key, size)
        return self._evict(self.max_bytes)

    def pop(self, key, default=None):
        if key not in self._items:
            return default
        self._ledger.release(key)
        return self._items.pop(key)

    def _evict(self, limit):
        evicted = []
        while self._ledger.total > limit and self._items:
            key, _ = self._items.popitem(last=False)
            self._ledger.release(key)
            evicted.append(key)
        return evicted

    def resize(self, max_bytes):
        """Set a new budget.  Shrinking evicts least recently used entries at
        once until the values fit; returns the evicted keys, oldest first
        ([] when nothing had to go).  A negative budget raises ValueError.
        """
        raise NotImplementedError("resize() is not implemented yet")
