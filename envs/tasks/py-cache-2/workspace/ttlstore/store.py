"""Key/value store with per-entry expiry."""
from .clocks import system_clock
from .entry import Entry


class TTLStore:
    """Entries expire `ttl` seconds after they were last set."""

    def __init__(self, ttl, clock=system_clock):
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        self.ttl = ttl
        self.clock = clock
        self._entries = {}

    def set(self, key, value, ttl=None):
        """Store value under key; ttl overrides the store default for this entry."""
        self._entries[key] = Entry(value, self.clock(), self.ttl if ttl is None else ttl)

    def get(self, key, default=None):
        entry = self._entries.get(key)
        if entry is None:
            return default
        if entry.expired(self.clock()):
            del self._entries[key]
            return default
        return entry.value

    def __contains__(self, key):
        entry = self._entries.get(key)
        return entry is not None and not entry.expired(self.clock())

    def __len__(self):
        """Number of stored entries, expired ones included until they are
        read or purged."""
        return len(self._entries)

    def purge(self):
        """Delete every entry that is expired now; return how many were deleted."""
        raise NotImplementedError("purge() is not written yet")
