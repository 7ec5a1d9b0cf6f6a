"""ttlstore: a key/value store with expiry."""
from .clocks import ManualClock, system_clock
from .store import TTLStore
