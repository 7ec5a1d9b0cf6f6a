"""Conversion of raw config values."""


def convert(raw):
    """Convert one raw value.

    'true' / 'false' in any case -> bool; an integer with an optional
    leading '+' or '-' -> int; anything else stays a string.
    """
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if raw.isdigit():
        return int(raw)
    return raw
