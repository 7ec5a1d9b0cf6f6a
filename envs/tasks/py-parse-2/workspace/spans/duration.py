"""Parse and format durations such as '1h30m'."""
from .lexer import split_parts
from .units import UNIT_SECONDS

_ORDER = list(UNIT_SECONDS)


def parse_duration(text):
    """Total seconds in a duration such as '1h30m', '2d', '45s' or '1h 5m 30s'.

    Units are d, h, m and s; each may appear at most once, largest first.
    """
    total = 0
    previous = -1
    for amount, unit in split_parts(text):
        if unit not in UNIT_SECONDS:
            raise ValueError(f"unknown unit {unit!r}")
        rank = _ORDER.index(unit)
        if rank <= previous:
            raise ValueError(f"unit {unit!r} out of order or repeated")
        previous = rank
        total += amount * UNIT_SECONDS[unit]
    return total


def format_duration(seconds):
    """Inverse of parse_duration: 5400 -> '1h30m', 90061 -> '1d1h1m1s'.

    Zero-valued units are left out; a zero duration is written '0s'.
    """
    if seconds < 0:
        raise ValueError("negative duration")
    out = []
    for unit, size in UNIT_SECONDS.items():
        count, seconds = divmod(seconds, size)
        if count:
            out.append(f"{count}{unit}")
    return "".join(out)
