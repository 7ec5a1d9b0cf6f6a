"""Byte accounting per key."""


class Ledger:
    """Remembers what each key costs and keeps the running total."""

    def __init__(self):
        self._sizes = {}
        self.total = 0

    def charge(self, key, size):
        """Record that key now costs `size` bytes, replacing any earlier cost."""
        self._sizes[key] = size
        self.total += size

    def release(self, key):
        """Forget key; return the number of bytes freed (0 for an unknown key)."""
        size = self._sizes.pop(key, 0)
        self.total -= size
        return size

    def cost(self, key):
        return self._sizes.get(key, 0)
