"""One stored value with its expiry time."""


class Entry:
    __slots__ = ("value", "expires_at")

    def __init__(self, value, created, ttl):
        self.value = value
        self.expires_at = created + ttl

    def expired(self, now):
        """True from the instant `now` reaches expires_at onwards."""
        return now > self.expires_at
