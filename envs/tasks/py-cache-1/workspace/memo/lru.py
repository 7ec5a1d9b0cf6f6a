"""A fixed-capacity least-recently-used cache."""
from collections import OrderedDict


class LRUCache:
    """Mapping with at most `capacity` keys; adding one more evicts the least
    recently used key.  Both a successful get() and a put() count as a use.
    """

    def __init__(self, capacity):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._data = OrderedDict()

    def get(self, key, default=None):
        if key not in self._data:
            return default
        return self._data[key]

    def put(self, key, value):
        if key in self._data:
            self._data.move_to_end(key)
        self._data[key] = value
        if len(self._data) > self.capacity:
            self._data.popitem(last=False)

    def keys(self):
        """Keys from least to most recently used."""
        return list(self._data)

    def __len__(self):
        return len(self._data)

    def __contains__(self, key):
        # A membership test is not a use.
        return key in self._data
