"""HH:MM <-> minutes since midnight."""


def parse_hhmm(text):
    """'09:30' -> 570."""
    hours, sep, minutes = text.strip().partition(":")
    if not sep or not hours.isdigit() or not minutes.isdigit() or len(minutes) != 2:
        raise ValueError(f"bad time {text!r}")
    value = int(hours) * 60 + int(minutes)
    if int(minutes) >= 60 or value > 24 * 60:
        raise ValueError(f"bad time {text!r}")
    return value


def fmt_hhmm(minutes):
    """570 -> '09:30'."""
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def parse_range(text):
    """'09:00-10:30' -> (540, 630)."""
    start, sep, end = text.partition("-")
    if not sep:
        raise ValueError(f"bad range {text!r}")
    return parse_hhmm(start), parse_hhmm(end)
