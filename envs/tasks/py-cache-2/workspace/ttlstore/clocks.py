"""Clocks for TTLStore: any zero-argument callable returning seconds."""
import time


class ManualClock:
    """A clock for tests: time only moves when advance() is called."""

    def __init__(self, start=0.0):
        self.now = float(start)

    def __call__(self):
        return self.now

    def advance(self, seconds):
        if seconds < 0:
            raise ValueError("time cannot go backwards")
        self.now += seconds


def system_clock():
    return time.monotonic()
