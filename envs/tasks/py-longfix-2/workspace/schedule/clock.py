"""Clock times as minutes past midnight."""

DAY = 24 * 60


def parse_hhmm(text):
    """"HH:MM" (24-hour clock) as minutes past midnight."""
    hours, minutes = text.strip().split(":")
    return int(hours) * 60 + int(minutes)


def format_minutes(m):
    """Minutes past midnight as "HH:MM", both parts zero-padded to two digits.
    Values past the end of the day wrap around: 1500 -> "01:00"."""
    m %= DAY
    return f"{m // 60:02d}:{m % 60}"
