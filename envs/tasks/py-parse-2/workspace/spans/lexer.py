"""Split a duration string into (amount, unit) parts."""
import re

_PART = re.compile(r"(\d+)([a-z]+)")


def split_parts(text):
    """'1h30m' -> [(1, 'h'), (30, 'm')].

    Parts may be separated by whitespace ('1h 30m').  Anything that is not a
    whole number directly followed by a unit name raises ValueError.
    """
    text = text.strip().lower()
    if not text:
        raise ValueError("empty duration")
    parts = []
    pos = 0
    for match in _PART.finditer(text):
        if match.start() != pos:
            raise ValueError(f"unexpected text at {pos}: {text[pos:match.start()]!r}")
        parts.append((int(match.group(1)), match.group(2)))
        pos = match.end()
    if pos != len(text):
        raise ValueError(f"unexpected text at {pos}: {text[pos:]!r}")
    return parts
